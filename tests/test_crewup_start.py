"""crew-up when a stage cannot be started, wholly or in part: the wake
pipe's crew-watch starts but wake-filter cannot (crew-up out of file
descriptors). What started is stopped, the failure is counted like a stage
that never started, crew-up goes on, and starts the pipe again once it can."""
import contextlib
import os
import resource
import signal
import subprocess
import sys

from conftest import BIN, wait_for
from crewfile.crew import crewup
from crewfile.wake import inbox
from crewfile.session.sessions import Session, register

# What subprocess.Popen opens at once for a pipe's first process (stdin
# /dev/null, stdout and stderr pipes, its exec-error pipe) and keeps after
# (the read ends of stdout and stderr); the next process opens three pipes
# more while those two are held: its peak is one above the first one's.
FIRST_PEAK, FIRST_KEEPS, NEXT_PEAK = 1 + 2 + 2 + 2, 2, 2 + 2 + 2


def up(crew, out, limit=None, runner=()):
    """crew-up for the boss, its stdout and stderr into *out*; with *limit*,
    its soft RLIMIT_NOFILE (the hard one unchanged, so it can be raised again);
    *runner*: the interpreter's arguments before crew-up's path."""
    def preexec():
        resource.setrlimit(resource.RLIMIT_NOFILE,
                           (limit, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    with open(out, "ab") as f:
        return subprocess.Popen([sys.executable, *runner, os.path.join(BIN, "crew-up"), "boss",
                                 "--backoff-max", "0.5s", "--sweep", "1h"],
                                env={**os.environ, "CREWFILE_DIR": crew.root},
                                stdout=f, stderr=f, preexec_fn=preexec if limit else None)


@contextlib.contextmanager
def ended(proc, out):
    """The body with crew-up *proc* running; after it, whatever happens,
    crew-up ended by SIGTERM (it stops its stages), killed if it has not
    ended within 30 s, and reaped; after a body that went well, its exit is 0."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    assert proc.returncode == 0, said(out)


def said(path):
    """What crew-up wrote in *path* (its output, or its log)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def stages(crew, proc):
    st = crewup.read_state(crew)
    return st.get("stages") or {} if st.get("pid") == proc.pid else {}


def wake_fails(crew, proc, out, why, logged=0):
    """Wait until crew-up says, once, that stage wake fails at once (*why*),
    with no traceback; its log (from offset *logged*) records the failure
    and no start. Returns the stage's state."""
    log = crewup.files(crew)["log"]
    told = f"crew-up: stage wake fails at once (3 times in a row; cannot start wake: {why})"

    def failing():
        assert proc.poll() is None, f"crew-up exited {proc.returncode}:\n{said(out)}"
        return any(l.startswith(told) for l in said(out).splitlines())
    wait_for(failing, timeout=60, what=lambda: f"crew-up telling wake fails:\n{said(out)}{said(log)}")
    lines = said(out).splitlines()
    assert "Traceback (most recent call last):" not in lines
    wake = [l for l in lines if l.startswith("crew-up: stage wake ")]
    assert len(wake) == 1 and wake[0].endswith(f"; still restarting it, see {log}"), lines
    with open(log) as f:
        f.seek(logged)
        records = f.read()
    assert f"stage-failed: wake: cannot start wake: {why}\n" in records
    assert "stage-started: wake:" not in records
    return stages(crew, proc)["wake"]


def carries_a_wake(crew, proc, out, text):
    """Wait until crew-up runs the wake pipe whole and a wake saying *text* goes through it."""
    def running():
        assert proc.poll() is None, f"crew-up exited {proc.returncode}:\n{said(out)}"
        w = stages(crew, proc).get("wake") or {}
        return w.get("running") and set(w["pids"]) == {"crew-watch", "wake-filter", "wake-send"}
    wait_for(running, timeout=60, what=lambda: f"the wake pipe running:\n{said(out)}")
    Session(crew, "w1").append("done", text)
    wait_for(lambda: any(text in n.text for n in inbox.pending(crew, "boss")),
             timeout=60, what="a wake through the pipe")


def held_before_any_stage(crew, out, looks=20):
    """How many descriptors crew-up holds when it starts its first stage: read
    from a crew-up left alone, once its sweep ended and the wake pipe and
    nudge-tick run, less the one stderr pipe it reads of each of those. A
    look may fall within a write of its log or state (a file open a moment):
    the fewest over *looks* looks at the same stages."""
    seen = []
    with ended(up(crew, out), out) as proc:
        def settled():
            assert proc.poll() is None, said(out)
            s = stages(crew, proc)
            if not (s and s["wake"]["running"] and s["nudge"]["running"]
                    and s["sweep"]["since"] and not s["sweep"]["running"]):
                return False
            fds = len(os.listdir(f"/proc/{proc.pid}/fd"))
            if stages(crew, proc) != s or seen and seen[0][0] != s:
                seen.clear()            # a stage ended or started meanwhile: look again
                return False
            seen.append((s, fds - sum(len(x["pids"]) for x in s.values())))
            return len(seen) >= looks
        wait_for(settled, timeout=60, every=0.05, what="crew-up settled")
    return min(held for _, held in seen)


def test_a_stage_started_in_part_is_stopped_and_retried(crew, tmp_path):
    register(crew, "boss", kind="primary")
    register(crew, "w1")
    out = str(tmp_path / "crew-up.out")
    held = held_before_any_stage(crew, out)
    limit = held + FIRST_PEAK       # crew-watch can be started, wake-filter cannot
    assert held + FIRST_KEEPS + NEXT_PEAK > limit
    os.truncate(out, 0)
    logged = os.path.getsize(crewup.files(crew)["log"])
    with ended(up(crew, out, limit), out) as proc:
        s = wake_fails(crew, proc, out, "Too many open files", logged)
        assert not s["running"] and s["pids"] == {}
        assert s["last_error"] == "cannot start wake: Too many open files"

        # Descriptors to spare again: the pipe is started whole and carries a wake.
        resource.prlimit(proc.pid, resource.RLIMIT_NOFILE,
                         resource.getrlimit(resource.RLIMIT_NOFILE))
        carries_a_wake(crew, proc, out, "after the limit")


# crew-up run by an interpreter (`python -c REFUSING FLAG CREW-UP ARGS...`)
# whose audit hook refuses ctypes in a child of crew-up before its exec
# while FLAG exists: each stage's preexec_fn then
# fails, which subprocess reports as a SubprocessError, not an OSError.
REFUSING = """\
import os, runpy, sys
flag, crew_up = sys.argv[1], sys.argv[2]
me = os.getpid()
def refuse(event, args):
    if event == "ctypes.dlopen" and os.getpid() != me and os.path.exists(flag):
        raise RuntimeError("ctypes refused (the test)")
sys.addaudithook(refuse)
sys.argv = [crew_up] + sys.argv[3:]
runpy.run_path(crew_up, run_name="__main__")
"""


def test_a_stage_whose_child_fails_before_its_exec_is_retried(crew, tmp_path):
    register(crew, "boss", kind="primary")
    register(crew, "w1")
    out, flag = str(tmp_path / "crew-up.out"), tmp_path / "refuse"
    flag.touch()
    with ended(up(crew, out, runner=("-c", REFUSING, str(flag))), out) as proc:
        wake_fails(crew, proc, out, "Exception occurred in preexec_fn.")
        flag.unlink()
        carries_a_wake(crew, proc, out, "after the refusal")
