"""Background jobs: job-exec, job-wait, job-ls, job-sweep, and the watcher.

Real processes, real signals, real flock and inotify. A job that must end on
cue reads a FIFO: the test ends it by writing a line (no sleeps as sync).
"""
import functools
import json
import os
import resource
import signal
import subprocess
import sys
import threading
import time
import tty

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import BIN, wait_for
from crewfile.wake import inbox
from crewfile.background import jobs, jobwait, jobwatch, sweep
from crewfile.core import liveness
from crewfile.session import sessions
from crewfile.core import locks
from crewfile.core.errors import BadInput, JOB_HEARD, NotFound
from crewfile.core.paths import Crew
from crewfile.core.durations import parse_duration
from crewfile.core.atomic import replace


@pytest.fixture(autouse=True)
def no_job_left_running(crew):
    """A failed test must not leave a job blocked on its FIFO: kill what runs."""
    yield
    for handle in jobs.handles(crew):
        job = jobs.Job(crew, handle)
        pgid = (job.pids() or {}).get("pgid")
        if pgid and job.result() is None:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def fifo(tmp_path, name="go"):
    path = str(tmp_path / name)
    os.mkfifo(path)
    return path


def release(path, text="x\n"):
    """End a job blocked on `read x < FIFO` (open blocks until it reads)."""
    with open(path, "w") as f:
        f.write(text)


def on_cue(path, then="echo finished"):
    return ["sh", "-c", f'read x < "$1"; {then}', "sh", path]


def settled(crew, handle):
    """The watcher has written the result and exited (its decision is made)."""
    job = jobs.Job(crew, handle)
    wait_for(lambda: job.result() is not None and not job.watcher_alive(), what="the watcher to finish")
    return job


def started(crew, handle):
    """The watcher has started the command (job-exec returns before: `starting`)."""
    job = jobs.Job(crew, handle)
    wait_for(lambda: job.pids() is not None, what="the command to start")
    return job


def waiting(h, *args, default_sigint=False, **kw):
    """job-wait HANDLE ARGS..., once it has counted itself in (it holds a
    shared flock on `waiters`) and waits; *default_sigint*: with SIGINT's
    default action, even if this process was handed it ignored."""
    job = jobs.Job(Crew(kw.get("env", os.environ)["CREWFILE_DIR"]), h)
    reset = ["env", "--default-signal=INT"] if default_sigint else []
    waiter = subprocess.Popen([*reset, sys.executable, f"{BIN}/job-wait", h, *args], **kw)
    wait_for(lambda: locks.is_held(job.waiters_path) or waiter.poll() is not None,
             what="job-wait to count itself in")
    assert waiter.poll() is None
    return waiter


def held_job(crew, handle):
    """A job with no watcher of ours: `alive` and `running` held by flock(1),
    as a shell watcher would hold them. (job, [alive's holder, running's])."""
    job = jobs.new_job(crew, handle)
    jobs.write_spec(job, ["true"])
    holders = []
    for path in (job.alive_path, job.running_path):
        holders.append(subprocess.Popen(["flock", path, "sh", "-c", "echo held; exec cat"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE))
        assert holders[-1].stdout.readline() == b"held\n"
    return job, holders


def let_go(holder):
    """A held_job() lock let go (its holder ends)."""
    holder.stdin.close()
    holder.wait()


def live_session(crew, name="w1"):
    return sessions.register(crew, name, pid=os.getpid())


def job_notices(crew, name="w1"):
    return [n for n in inbox.pending(crew, name) if n.kind == "job"]


def exec_(run, *args, check=True):
    proc = run("job-exec", *args)
    if check:
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.count("\n") == 1
    return proc.stdout.strip()


# -- the basics ------------------------------------------------------------------

def test_exec_prints_handle_and_wait_reports_code_and_tail(crew, run):
    h = exec_(run, "--label", "three", "--", "sh", "-c", "for i in $(seq 1 15); do echo line $i; done; exit 3")
    proc = run("job-wait", h)
    assert proc.returncode == 3, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(f"{h} exited 3 after ") and lines[0].endswith("; heard by this wait")
    assert lines[1:] == [f"line {i}" for i in range(6, 16)]       # the tail: last 10
    again = run("job-wait", h, "--all")
    assert again.returncode == 3
    assert again.stdout.splitlines()[0].endswith("; heard already by wait")
    assert again.stdout.splitlines()[1:] == [f"line {i}" for i in range(1, 16)]
    job = settled(crew, h)
    assert job.heard()["by"] == "wait"
    assert job.spec()["label"] == "three"


def test_job_wait_leaving_by_os_exit_loses_nothing(crew, run, tmp_path):
    """job-wait leaves by os._exit (cli.leave) once it has printed: through
    a slow pipe, every byte of a large output arrives, `heard` is written
    naming job-wait's pid (the watcher announces nothing), and nothing is
    left held: `lock` and `waiters` are free the moment it exits."""
    live_session(crew)
    go = fifo(tmp_path)
    body = "".join(f"line {i:06d} " + "x" * 90 + "\n" for i in range(5000))     # ~500 KB
    (tmp_path / "body").write_text(body)
    h = exec_(run, "--session", "w1", "--", "sh", "-c", f'read x < "$1"; cat {tmp_path / "body"}',
              "sh", go)
    job = jobs.Job(crew, h)
    waiter = waiting(h, "--all", stdout=subprocess.PIPE, env=dict(os.environ, CREWFILE_DIR=crew.root))
    release(go)
    got = b""
    while chunk := waiter.stdout.read(4096):                         # a slow reader
        got += chunk
        time.sleep(0.001)
    assert waiter.wait() == 0
    first, rest = got.split(b"\n", 1)
    assert first.endswith(b"; heard by this wait") and rest == body.encode()
    assert not locks.is_held(job.lock_path) and not locks.is_held(job.waiters_path)
    assert job.heard()["by"] == "wait" and job.heard()["pid"] == waiter.pid
    settled(crew, h)
    assert job_notices(crew) == [] and job.notice() is None


def test_signal_exit_is_128_plus_n(crew, run):
    h = exec_(run, "--", "sh", "-c", "echo bye; kill -TERM $$")
    proc = run("job-wait", h)
    assert proc.returncode == 128 + 15
    assert "killed by SIGTERM (15)" in proc.stdout.splitlines()[0]
    assert settled(crew, h).result()["signal"] == 15


def test_a_signal_without_a_name_reads_as_its_number(crew, run):
    h = exec_(run, "--", "sh", "-c", "kill -35 $$")                 # a real-time signal
    proc = run("job-wait", h)
    assert proc.returncode == 128 + 35
    assert "killed by signal 35 (35)" in proc.stdout.splitlines()[0]
    settled(crew, h)


def test_command_that_does_not_exist_still_has_an_outcome(crew, run):
    h = exec_(run, "--", "no-such-command-crewfile")
    proc = run("job-wait", h)
    assert proc.returncode == 127
    assert proc.stdout.splitlines()[0].startswith(f"{h} exited 127 ")
    assert "job-exec: no-such-command-crewfile: No such file or directory" in proc.stdout
    notexec = exec_(run, "--", "/etc/hostname")
    assert run("job-wait", notexec).returncode == 126


def test_durations_read_as_the_pages_show_them():
    """job-wait.md's `after 3m05s`, jobs.md's `3m12s`: each unit of the docstring."""
    assert [jobs.duration_text(s) for s in (0.42, 12.0, 185, 7800, 273600)] == [
        "0.42s", "12.0s", "3m05s", "2h10m", "3d4h"]


def test_empty_command_and_bad_options_are_usage_errors(crew, run):
    proc = run("job-exec", "--")
    assert proc.returncode == 2 and proc.stderr.startswith("job-exec: missing COMMAND")
    proc = run("job-exec", "--", "")
    assert proc.returncode == 2 and proc.stderr == "job-exec: empty command\n"
    proc = run("job-exec", "--handle", "../x", "--", "true")
    assert proc.returncode == 2 and "bad job handle" in proc.stderr
    proc = run("job-exec", "--session", "ghost", "--", "true")
    assert proc.returncode == 3 and "no session 'ghost'" in proc.stderr
    proc = run("job-exec", "--label", "a\nb", "--", "true")
    assert proc.returncode == 2 and "control character" in proc.stderr
    proc = run("job-exec", "--label", "x" * 201, "--", "true")      # job-exec.md: at most 200
    assert proc.returncode == 2 and "label longer than 200 characters" in proc.stderr
    assert jobs.handles(crew) == []
    exec_(run, "--handle", "mine", "--", "true")
    proc = run("job-exec", "--handle", "mine", "--", "true")
    assert proc.returncode == 1 and "job 'mine' exists" in proc.stderr


def test_wait_errors_exit_125_with_nothing_on_stdout(crew, run):
    for args, msg in ((["nope"], "job-wait: no job 'nope'\n"),
                      (["../x"], "bad job handle"),
                      (["nope", "--timeout", "soon"], "bad --timeout 'soon'"),
                      ([], "job-wait: missing HANDLE")):
        proc = run("job-wait", *args)
        assert proc.returncode == 125, (args, proc.stderr)
        assert msg in proc.stderr and proc.stdout == ""


def test_caller_reading_the_handle_through_a_pipe_is_not_held_up(crew, run, tmp_path):
    go = fifo(tmp_path)
    t0 = time.monotonic()
    out = subprocess.run(["sh", "-c", f'h=$({sys.executable} {BIN}/job-exec -- sh -c \'read x < "$1"\' sh {go}); echo "$h"'],
                         stdout=subprocess.PIPE, timeout=20, text=True).stdout.strip()
    assert time.monotonic() - t0 < 15
    # job-exec returns before the command runs: `starting` (the watcher holds
    # `alive`, no pids yet), then `running`; never `lost` in between.
    assert jobs.info(jobs.Job(crew, out))["state"] in ("starting", "running")
    wait_for(lambda: jobs.info(jobs.Job(crew, out))["state"] == "running", what="running")
    release(go)
    assert run("job-wait", out).returncode == 0


def test_duration_parser():
    assert parse_duration("30s", "--x") == 30
    assert parse_duration("10m", "--x") == 600
    assert parse_duration("2h", "--x") == 7200
    assert parse_duration("7d", "--x") == 7 * 86400
    assert parse_duration("1.5", "--x") == 1.5
    assert parse_duration("0", "--x", positive=False) == 0
    for bad in ("", "m", "-1s", "10x", "1e400", "nan", "+5m", "5 m"):
        with pytest.raises(BadInput):
            parse_duration(bad, "--x")


# -- heard exactly once ----------------------------------------------------------------

def test_outcome_landing_during_a_wait_is_reported_by_it_and_not_announced(crew, run, tmp_path):
    live_session(crew)
    go = fifo(tmp_path)
    h = exec_(run, "--session", "w1", "--", *on_cue(go))
    waiter = waiting(h, stdout=subprocess.PIPE, text=True)
    job = jobs.Job(crew, h)
    release(go)
    out, _ = waiter.communicate(timeout=20)
    assert waiter.returncode == 0
    assert out.splitlines() == [out.splitlines()[0], "finished"]
    assert out.splitlines()[0].endswith("heard by this wait")
    settled(crew, h)
    assert job_notices(crew) == []
    assert job.heard()["by"] == "wait" and job.notice() is None


def test_nobody_waiting_announces_one_line_notice(crew, run, tmp_path):
    live_session(crew)
    h = exec_(run, "--session", "w1", "--label", "deploy app", "--",
              "sh", "-c", "echo step one; echo 'all done: 3 hosts'; exit 4")
    job = settled(crew, h)
    notices = job_notices(crew)
    assert len(notices) == 1
    text = notices[0].text
    assert text.startswith(f"job {h} (deploy app) exited 4 after ")
    assert text.endswith("; last output: all done: 3 hosts")
    heard = job.heard()
    row = {"label": "deploy app", "session": "w1", "created": job.spec()["created"], "code": 4,
           "signal": None, "ended": job.result()["ended"]}     # what job-ls prints, copied
    assert heard == {"by": "notice", "at": heard["at"], "id": notices[0].id, **row}
    assert job.notice()["posted"] is True


# -- heard exactly once at the model: a wait after the announcement -----------------

def test_wait_before_the_notice_is_drained_takes_the_outcome_over(crew, run):
    live_session(crew)
    sessions.register(crew, "w2", pid=os.getpid())
    inbox.post(crew, "w1", "wake", "before")
    h = exec_(run, "--session", "w1", "--", "sh", "-c", "echo hi; exit 3")
    job = settled(crew, h)
    inbox.post(crew, "w1", "wake", "after")
    nid = job.heard()["id"]
    proc = run("job-wait", h)
    assert proc.returncode == 3
    assert proc.stdout.startswith(f"{h} exited 3 after ")
    assert proc.stdout.endswith("; heard by this wait\nhi\n")
    # Withdrawn under the inbox's lock: the other notices stay, in order.
    assert [(n.kind, n.text) for n in inbox.pending(crew, "w1")] == [("wake", "before"),
                                                                     ("wake", "after")]
    assert job.heard()["by"] == "wait" and job.heard()["withdrawn"] == nid
    assert "wait" in run("job-ls").stdout.splitlines()[1].split()
    again = run("job-wait", h)             # asked twice: told twice, as before
    assert again.returncode == 3 and "heard already by wait" in again.stdout
    assert inbox.drain(crew, "w1")[0][-1].text == "after"


def test_wait_after_the_notice_reached_the_model_does_not_repeat_it(crew, run):
    live_session(crew)
    h = exec_(run, "--session", "w1", "--", "sh", "-c", "echo secret-output; exit 3")
    job = settled(crew, h)
    nid = job.heard()["id"]
    drained = run("inbox-drain", "w1").stdout          # handed to the model
    assert f"job {h} exited 3" in drained
    proc = run("job-wait", h)
    assert proc.returncode == JOB_HEARD == 122
    assert proc.stdout == f"{h} heard already by notice {nid}: not repeated\n"
    assert job.heard()["by"] == "notice"
    assert run("job-wait", h, "--all").stdout == proc.stdout


def test_a_stuck_session_lock_keeps_the_notice_and_the_wait_does_not_repeat_it(crew, run):
    live_session(crew)
    h = exec_(run, "--session", "w1", "--", "sh", "-c", "echo hi; exit 3")
    job = settled(crew, h)
    holder = subprocess.Popen(["flock", os.path.join(crew.session_dir("w1"), "lock"),
                               "sh", "-c", "echo held; exec sleep 60"], stdout=subprocess.PIPE,
                              start_new_session=True)
    try:
        assert holder.stdout.readline() == b"held\n"
        proc = run("job-wait", h)
    finally:
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait()
    assert proc.returncode == 122 and "not repeated" in proc.stdout
    notices = job_notices(crew)
    assert len(notices) == 1 and notices[0].text.startswith(f"job {h} exited 3 after ")


def test_timeout_leaves_job_running_and_it_is_announced(crew, run, tmp_path):
    live_session(crew)
    go = fifo(tmp_path)
    h = exec_(run, "--session", "w1", "--", *on_cue(go, "echo late; exit 7"))
    proc = run("job-wait", h, "--timeout", "0.2")
    assert proc.returncode == 124
    assert proc.stdout == f"{h} running: timed out after waiting {proc.stdout.split()[-1]}\n"
    job = jobs.Job(crew, h)
    assert not locks.is_held(job.waiters_path)
    release(go)
    settled(crew, h)
    notices = job_notices(crew)
    assert len(notices) == 1 and f"job {h} exited 7" in notices[0].text
    assert notices[0].text.endswith("last output: late")


def test_waiter_killed_after_the_outcome_landed_still_announced(crew, run, tmp_path):
    """The watcher saw a waiter, so it did not announce; the waiter dies
    before it reports: the watcher decides again and announces."""
    live_session(crew)
    go = fifo(tmp_path)
    h = exec_(run, "--session", "w1", "--", *on_cue(go))
    job = jobs.Job(crew, h)
    with locks.acquire(job.lock_path):                 # count in, as job-wait does
        fake_waiter = locks.acquire(job.waiters_path, shared=True)
    release(go)
    wait_for(lambda: job.result() is not None, what="the result")
    with locks.acquire(job.lock_path):                 # the watcher has decided
        pass
    assert job.watcher_alive() and job.heard() is None and job_notices(crew) == []
    fake_waiter.release()                              # what SIGKILL does to a waiter
    settled(crew, h)
    assert len(job_notices(crew)) == 1 and job.heard()["by"] == "notice"


def test_quiet_session_gets_no_notice_and_outcome_stays_unheard(crew, run):
    gone = subprocess.Popen(["true"])
    gone.wait()
    sessions.register(crew, "dead", pid=os.getpid())
    sessions.Session(crew, "dead").update_meta(pid=gone.pid)    # its process is gone
    sessions.register(crew, "done", pid=os.getpid())
    sessions.Session(crew, "done").update_meta(pid=gone.pid)    # an end is believed once
    sessions.Session(crew, "done").append("ended", "exit")      # its agent is gone
    for name, why in (("dead", "session dead is not live: agent-gone: agent process"),
                      ("done", "session done is not live: ended: the session has ended")):
        h = exec_(run, "--session", name, "--", "echo", "hi")
        job = settled(crew, h)
        assert job.notice()["posted"] is False and job.notice()["reason"].startswith(why)
        assert job.heard() is None
        assert job_notices(crew, name) == []
        row = [r for r in json.loads(run("job-ls", "--json").stdout) if r["handle"] == h][0]
        assert row["heard"] is None and row["announced"] is False
        assert f"{h}  {name}" in run("job-ls").stdout and "no!" in run("job-ls").stdout
        proc = run("job-wait", h)                      # asking hears it
        assert proc.returncode == 0 and "heard by this wait" in proc.stdout


def test_job_without_session_is_unheard_until_waited(crew, run, monkeypatch):
    monkeypatch.delenv("CREWFILE_SESSION", raising=False)
    h = exec_(run, "--", "true")
    job = settled(crew, h)
    notice = job.notice()
    assert {k: notice[k] for k in ("posted", "reason")} == {"posted": False,
                                                            "reason": "no owning session"}
    assert job.heard() is None


def test_session_defaults_to_crewfile_session(crew, run):
    live_session(crew, "agent")
    h = run("job-exec", "--", "true", env={"CREWFILE_SESSION": "agent"}).stdout.strip()
    settled(crew, h)
    assert len(job_notices(crew, "agent")) == 1


def test_two_job_waits_one_hears_and_the_other_is_told_it_was_heard(crew, run, tmp_path):
    """Two job-waits on one job: the first to take `lock` hears it, the
    other says it was heard already; both print the output and exit with
    the job's code, and nothing is announced."""
    live_session(crew)
    go = fifo(tmp_path)
    h = exec_(run, "--session", "w1", "--", *on_cue(go, "echo done; exit 5"))
    job = jobs.Job(crew, h)
    first = waiting(h, stdout=subprocess.PIPE)
    second = subprocess.Popen([sys.executable, f"{BIN}/job-wait", h], stdout=subprocess.PIPE)
    wait_for(lambda: _shared_holders(job.waiters_path) == 2, what="both job-waits to count in")
    release(go)
    lines = []
    for waiter in (first, second):
        out, _ = waiter.communicate(timeout=20)
        assert waiter.returncode == 5
        line, rest = out.decode().split("\n", 1)
        assert line.startswith(f"{h} exited 5 after ") and rest == "done\n"
        lines.append(line.split("; ", 1)[1])
    assert sorted(lines) == ["heard already by wait", "heard by this wait"]
    hearer = (first, second)[lines.index("heard by this wait")]
    assert job.heard()["by"] == "wait" and job.heard()["pid"] == hearer.pid
    settled(crew, h)
    assert job_notices(crew) == [] and job.notice() is None
    # The job's files are the protocol's, and nothing else (no socket, no temporary).
    assert sorted(os.listdir(job.dir)) == ["alive", "heard", "lock", "output", "pids", "result",
                                           "running", "spec", "waiters"]


def _shared_holders(path):
    """How many flocks /proc/locks shows on *path* (shared ones count each)."""
    st_ = os.stat(path)
    want = f"{os.major(st_.st_dev):02x}:{os.minor(st_.st_dev):02x}:{st_.st_ino}"
    with open("/proc/locks") as f:
        return sum(1 for line in f if line.split()[1] != "->" and line.split()[5] == want)


def test_a_job_wait_killed_while_it_waits_never_hears_and_the_outcome_is_announced(crew, run, tmp_path):
    """job-wait SIGKILLed while the job runs: the kernel counts it out of
    `waiters`; the outcome is announced, once."""
    live_session(crew)
    go = fifo(tmp_path)
    h = exec_(run, "--session", "w1", "--", *on_cue(go))
    job = jobs.Job(crew, h)
    waiter = waiting(h, stdout=subprocess.PIPE)
    waiter.send_signal(signal.SIGKILL)
    assert waiter.stdout.read() == b""
    waiter.wait()
    assert job.result() is None
    release(go)
    settled(crew, h)
    assert len(job_notices(crew)) == 1
    assert job.heard()["by"] == "notice"


@pytest.mark.parametrize("fault", ["reader-gone", "output-not-believed"])
def test_a_job_wait_whose_answer_is_not_delivered_takes_its_heard_back(crew, run, tmp_path, fault):
    """The outcome lands while job-wait waits, but its answer cannot be
    delivered: its reader has gone (EPIPE, exit 141), or the output is not
    believed (exit 125). Nobody heard it: `heard` is taken back and the
    watcher announces it, once."""
    live_session(crew)
    go = fifo(tmp_path)
    h = exec_(run, "--session", "w1", "--", *on_cue(go))
    job = jobs.Job(crew, h)
    r, w = os.pipe()
    waiter = waiting(h, stdout=w)
    os.close(w)
    if fault == "reader-gone":
        os.close(r)
    else:
        started(crew, h)
        os.chmod(job.output_path, 0o666)        # others may write it: not believed
    release(go)
    assert waiter.wait(timeout=30) == (141 if fault == "reader-gone" else 125)
    if fault != "reader-gone":
        os.close(r)
    settled(crew, h)
    assert len(job_notices(crew)) == 1
    assert job.heard()["by"] == "notice"


def test_an_owner_whose_meta_cannot_be_read_is_still_told(crew, run, tmp_path):
    """The owning session's meta damaged while the job runs: its liveness is
    unknown, which is no reason to stay silent: the notice is posted (the
    watcher used to die asking, and nobody ever heard the outcome)."""
    live_session(crew)
    go = fifo(tmp_path)
    h = exec_(run, "--session", "w1", "--", *on_cue(go))
    started(crew, h)
    with open(os.path.join(crew.root, "sessions", "w1", "meta"), "w") as f:
        f.write("{not json")
    release(go)
    job = settled(crew, h)
    assert len(job_notices(crew)) == 1
    assert job.heard()["by"] == "notice" and job.notice()["posted"] is True


def test_a_notice_that_cannot_be_posted_is_said_in_notice(crew, run, tmp_path):
    """The owner's inbox cannot be written (a directory in its place): the
    watcher says so in `notice` (posted false, why), and job-ls shows why,
    where it used to die with the outcome heard by nobody and said nowhere."""
    live_session(crew)
    go = fifo(tmp_path)
    h = exec_(run, "--session", "w1", "--", *on_cue(go))
    started(crew, h)
    os.mkdir(os.path.join(crew.root, "sessions", "w1", "inbox"))
    release(go)
    job = settled(crew, h)
    notice = job.notice()
    assert notice["posted"] is False, notice
    assert notice["reason"].startswith("the notice could not be posted: "), notice
    assert job.heard() is None


def test_a_job_wait_killed_while_its_watcher_is_stopped_never_hears_the_outcome(crew, run, tmp_path):
    """The watcher is stopped while job-wait is killed and the job ends:
    when it runs again, it writes `result`, finds `waiters` free and
    announces the outcome, once."""
    live_session(crew)
    go = fifo(tmp_path)
    h = exec_(run, "--session", "w1", "--", *on_cue(go))
    job = started(crew, h)
    watcher = job.pids()["watcher"]
    waiter = waiting(h, stdout=subprocess.DEVNULL)
    os.kill(watcher, signal.SIGSTOP)
    try:
        wait_for(lambda: liveness.stat(watcher).stopped, what="the watcher to stop")
        waiter.send_signal(signal.SIGKILL)
        waiter.wait()
        release(go)
        pgid = job.pids()["pgid"]
        wait_for(lambda: liveness.stat(pgid) is None or liveness.stat(pgid).gone, what="the job to end")
    finally:
        os.kill(watcher, signal.SIGCONT)
    settled(crew, h)
    assert len(job_notices(crew)) == 1 and job.heard()["by"] == "notice"


def test_a_job_wait_whose_reader_went_away_exits_141(crew, run, tmp_path):
    """The reader of job-wait's output is gone when it prints: exit 141."""
    go = fifo(tmp_path)
    h = exec_(run, "--", *on_cue(go, "echo done; exit 2"))
    r, w = os.pipe()
    waiter = waiting(h, stdout=w, stderr=subprocess.PIPE)
    os.close(w)
    os.close(r)                                         # the reader goes away
    release(go)
    _, err = waiter.communicate(timeout=20)
    assert waiter.returncode == 141 and err == b""


def test_an_output_file_turned_into_a_link_is_not_followed_into_job_waits_answer(crew, run, tmp_path):
    """`output` replaced by a link to another file while the job runs:
    job-wait does not follow it (nothing of that file is printed): it says
    why on stderr, prints nothing, exits 125."""
    go = fifo(tmp_path)
    h = exec_(run, "--", *on_cue(go, "echo done; exit 2"))
    job = started(crew, h)
    (tmp_path / "secret").write_text("not for the caller\n")
    os.unlink(job.output_path)
    os.symlink(str(tmp_path / "secret"), job.output_path)
    waiter = waiting(h, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    release(go)
    out, err = waiter.communicate(timeout=20)
    assert waiter.returncode == 125 and out == b""
    assert err == f"job-wait: {job.output_path}: a symlink is not followed\n".encode()


def test_job_output_reaches_a_terminal_escaped_and_a_pipe_byte_for_byte(crew, run):
    """The job's output holds escape sequences (a colour, a window title, a
    bell) and a tab: into a pipe (the agent's tool) job-wait copies them as
    they are; on a terminal (a real pty) each line passes through
    records.escape, the result line too."""
    h = exec_(run, "--", "sh", "-c",
              "printf 'red \\033[31mtext\\033[0m\\tend\\n\\033]0;title\\007\\n\\377x'; exit 2")
    settled(crew, h)
    raw = b"red \x1b[31mtext\x1b[0m\tend\n\x1b]0;title\x07\n\xffx\n"
    piped = subprocess.run([sys.executable, f"{BIN}/job-wait", h, "--all"], stdout=subprocess.PIPE)
    assert piped.returncode == 2 and piped.stdout.split(b"\n", 1)[1] == raw
    master, slave = os.openpty()
    tty.setraw(slave)                                   # no newline translation: the bytes as written
    try:
        shown = subprocess.Popen([sys.executable, f"{BIN}/job-wait", h, "--all"], stdout=slave)
        os.close(slave)
        got = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:                             # EIO: the terminal's last writer is gone
                break
            if not chunk:
                break
            got += chunk
        assert shown.wait() == 2
    finally:
        os.close(master)
    line, rest = got.split(b"\n", 1)
    assert line.startswith(f"{h} exited 2 after ".encode()) and line.endswith(b"; heard already by wait")
    assert rest == (b"red \\x1b[31mtext\\x1b[0m\\tend\n\\x1b]0;title\\x07\n"
                    + "\ufffdx".encode() + b"\n")


# -- a lost watcher --------------------------------------------------------------------

def test_watcher_killed_is_fate_unknown_not_running(crew, run, tmp_path):
    go = fifo(tmp_path)
    h = exec_(run, "--", *on_cue(go))
    job = started(crew, h)
    pids = job.pids()
    waiter = waiting(h, stdout=subprocess.PIPE, text=True)
    os.kill(pids["watcher"], signal.SIGKILL)
    # The kernel lets go of `running` with the watcher: the wait wakes, and
    # finds no result and `alive` free.
    out, _ = waiter.communicate(timeout=20)
    assert waiter.returncode == 125
    assert out.splitlines()[0] == (f"{h} lost: fate unknown (watcher lost); process group "
                                   f"{pids['pgid']} still running")
    ls = run("job-ls").stdout
    assert "lost(group-alive)" in ls and "running" not in ls
    assert run("job-wait", h).returncode == 125
    os.killpg(pids["pgid"], signal.SIGKILL)
    wait_for(lambda: "lost(group-gone)" in run("job-ls").stdout, what="the group to be gone")


def temporaries(job):
    """The atomic-replace temporaries (`.NAME.tmp.*`) in the job's directory."""
    return sorted(n for n in os.listdir(job.dir) if ".tmp." in n)


def test_temporaries_made_ahead_are_gone_however_a_wait_or_the_watcher_ends(crew, run, tmp_path):
    """`result`'s temporary is made while the command runs, `heard`'s while a
    wait waits (off the path from the job's end to the answer): none is left
    by a wait that times out, is interrupted (^C), or is killed (the watcher
    clears it once nobody waits), nor by a lost watcher (the wait clears it)."""
    live_session(crew)
    go = fifo(tmp_path)
    h = exec_(run, "--session", "w1", "--", *on_cue(go))
    job = started(crew, h)
    wait_for(lambda: temporaries(job), what="the watcher's temporary of `result`")
    assert [n.split(".tmp.")[0] for n in temporaries(job)] == [".result"]
    assert run("job-wait", h, "--timeout", "0.1").returncode == 124
    assert [n.split(".tmp.")[0] for n in temporaries(job)] == [".result"]
    # ^C as a terminal delivers it: a suite started in the background (bash
    # gives its `&` jobs SIGINT ignored) would hand the wait an ignored SIGINT
    waiter = waiting(h, stdout=subprocess.PIPE, default_sigint=True)
    wait_for(lambda: len(temporaries(job)) == 2, what="the wait's temporary of `heard`")
    waiter.send_signal(signal.SIGINT)
    assert waiter.wait(timeout=60) == 130 and waiter.stdout.read() == b""
    assert [n.split(".tmp.")[0] for n in temporaries(job)] == [".result"]
    waiter = waiting(h, stdout=subprocess.PIPE)
    wait_for(lambda: len(temporaries(job)) == 2, what="the wait's temporary of `heard`")
    waiter.send_signal(signal.SIGKILL)
    waiter.wait()
    assert len(temporaries(job)) == 2                  # a killed wait cannot clear its own
    release(go)
    settled(crew, h)
    assert temporaries(job) == [] and job.heard()["by"] == "notice"

    go = fifo(tmp_path, "lost")                        # the watcher killed: lost
    h = exec_(run, "--", *on_cue(go))
    job = started(crew, h)
    wait_for(lambda: temporaries(job), what="the watcher's temporary of `result`")
    waiter = waiting(h, stdout=subprocess.PIPE)
    os.kill(job.pids()["watcher"], signal.SIGKILL)
    waiter.communicate(timeout=20)
    assert waiter.returncode == 125 and temporaries(job) == []
    os.killpg(job.pids()["pgid"], signal.SIGKILL)


def test_a_ctrl_c_the_moment_heard_s_temporary_is_made_leaves_none(crew, run, tmp_path):
    """A ^C delivered as open(2) returns `heard`'s temporary, before anything
    holds it (CI saw one left: the wait preempted right after making it):
    raised here at that exact moment, from the profiler's return event of
    that open, the wait's cleanup still finds and removes it."""
    go = fifo(tmp_path)
    h = exec_(run, "--", *on_cue(go))
    job = started(crew, h)
    wait_for(lambda: temporaries(job), what="the watcher's temporary of `result`")
    made = []

    def interrupt_after_the_open(frame, event, arg):
        if event == "c_return" and arg is os.open and not made and any(
                ".heard.tmp." in n for n in os.listdir(job.dir)):
            made.append(True)
            raise KeyboardInterrupt
    sys.setprofile(interrupt_after_the_open)
    try:
        with pytest.raises(KeyboardInterrupt):
            jobwait.wait(crew, h)
    finally:
        sys.setprofile(None)
    assert made and [n.split(".tmp.")[0] for n in temporaries(job)] == [".result"]
    release(go)
    settled(crew, h)
    assert temporaries(job) == []


def test_waits_in_threads_of_one_process_each_make_their_own_temporary(crew, tmp_path):
    """Several waits in one process, each holding `heard`'s temporary made
    ahead: the names never collide; one wait hears the outcome, the others
    are told it was heard, and nothing is left behind."""
    go = fifo(tmp_path)
    h = jobwatch.start(crew, on_cue(go))
    job = started(crew, h)
    outcomes, failures = [], []

    def wait():
        try:
            outcomes.append(jobwait.wait(crew, h))
        except Exception as e:          # noqa: BLE001 - reported below
            failures.append(e)
    threads = [threading.Thread(target=wait) for _ in range(8)]
    for t in threads:
        t.start()
    wait_for(lambda: len([n for n in temporaries(job) if n.startswith(".heard.")]) == 8,
             what=lambda: f"8 temporaries of `heard`, one per wait: {temporaries(job)}")
    release(go)
    for t in threads:
        t.join()
    assert failures == [] and len(outcomes) == 8
    assert sorted(o.heard_here for o in outcomes) == [False] * 7 + [True]
    assert all(o.state == "done" and o.result["code"] == 0 for o in outcomes)
    settled(crew, h)
    assert temporaries(job) == [] and job.heard()["by"] == "wait"


def test_alive_is_held_from_before_spec_so_a_job_is_starting_or_lost_never_stuck(crew, run):
    """job-exec takes `alive` before `spec` and the watcher inherits it: a job
    with a spec, no pids and `alive` held (here by flock(1), as a shell
    watcher would) is starting; the moment nobody holds it, it is lost."""
    job = jobs.new_job(crew, "j-manual")
    jobs.write_spec(job, ["true"])
    holder = subprocess.Popen(["flock", job.alive_path, "sh", "-c", "echo held; exec cat"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert holder.stdout.readline() == b"held\n"
    assert jobs.info(jobs.Job(crew, "j-manual"))["state"] == "starting"
    holder.stdin.close()
    holder.wait()
    assert jobs.info(jobs.Job(crew, "j-manual"))["state"] == "lost"
    assert run("job-wait", "j-manual").returncode == 125


def test_a_waiter_wakes_when_running_is_let_go_and_tells_lost_from_ended(crew, tmp_path):
    """job-wait waits for a shared flock on `running` (held here by flock(1),
    as a shell watcher would, with `alive`): let go with `result` written, it
    hears the outcome; let go by a watcher that died (alive free too), lost;
    let go while `alive` is still held (a watcher failing to write `result`,
    or a job from before `running`), it looks again every second."""
    manual = functools.partial(held_job, crew)

    def waiting(job):
        w = subprocess.Popen([sys.executable, os.path.join(BIN, "job-wait"), job.handle],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=dict(os.environ, CREWFILE_DIR=crew.root))
        wait_for(lambda: locks.is_held(job.waiters_path), what="the waiter to count in")
        return w

    def write_result(job, code):
        with locks.acquire(job.lock_path):
            replace(job.result_path, jobs.dump_json({"code": code, "exit": code}))

    job, (alive, running) = manual("j-ended")         # the outcome, then `running` let go
    w = waiting(job)
    write_result(job, 4)
    let_go(running)
    out, err = w.communicate(timeout=30)
    assert w.returncode == 4 and out.startswith(b"j-ended exited 4 after") and err == b""
    let_go(alive)

    job, (alive, running) = manual("j-died")          # both let go, no outcome: lost
    w = waiting(job)
    let_go(alive)
    let_go(running)
    out, _ = w.communicate(timeout=30)
    assert w.returncode == 125 and out.startswith(b"j-died lost: fate unknown")

    job, (alive, running) = manual("j-old")           # `running` free, `alive` held: polls
    let_go(running)
    w = waiting(job)
    write_result(job, 6)
    out, _ = w.communicate(timeout=30)
    assert w.returncode == 6 and out.startswith(b"j-old exited 6 after")
    let_go(alive)


def test_result_is_the_json_alone_and_an_earlier_versions_padded_one_still_reads(crew, run):
    """The watcher writes `result` as one JSON line, nothing after it. An
    earlier version padded it with blanks to 512 bytes: such a file reads
    as the same result (trailing white space is JSON's)."""
    h = exec_(run, "--", "sh", "-c", "echo hi; exit 3")
    job = settled(crew, h)
    with open(job.result_path, "rb") as f:
        raw = f.read()
    assert raw == jobs.dump_json(job.result()).encode() and json.loads(raw)["code"] == 3
    assert [n for n in os.listdir(job.dir) if n.startswith(".")] == []     # no temporary left
    with open(job.result_path, "wb") as f:
        f.write(raw.rstrip(b"\n") + b" " * (511 - len(raw)) + b"\n")
    assert job.result() == json.loads(raw)
    assert run("job-wait", h).stdout.startswith(f"{h} exited 3 after")


def test_a_linked_running_lock_is_one_line_error_with_or_without_a_timeout(crew, run, tmp_path):
    job = jobs.new_job(crew, "j-linked")
    jobs.write_spec(job, ["true"])
    holder = subprocess.Popen(["flock", job.alive_path, "sh", "-c", "echo held; exec cat"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert holder.stdout.readline() == b"held\n"
    (tmp_path / "elsewhere").write_text("")
    os.symlink(tmp_path / "elsewhere", job.running_path)
    try:
        for extra in ([], ["--timeout", "30s"]):
            proc = run("job-wait", "j-linked", *extra)
            assert proc.returncode == 125 and proc.stdout == ""
            assert proc.stderr == f"job-wait: {job.running_path}: a symlink is not followed\n"
    finally:
        holder.stdin.close()
        holder.wait()


def test_an_exec_failure_nobody_waits_for_is_announced_like_any_outcome(crew, run):
    live_session(crew)
    h = exec_(run, "--session", "w1", "--", "no-such-command-crewfile")
    settled(crew, h)
    [notice] = job_notices(crew)
    assert notice.text.startswith(f"job {h} exited 127 after ")
    assert notice.text.endswith("last output: job-exec: no-such-command-crewfile: "
                                "No such file or directory")


# -- output ----------------------------------------------------------------------------

def test_output_past_the_limit_is_bounded_with_marker_and_tail(crew, run):
    limit = 4096
    h = run("job-exec", "--", "sh", "-c", "i=1; while [ $i -le 2000 ]; do echo \"line $i\"; i=$((i+1)); done",
            env={"CREWFILE_JOB_OUTPUT_BYTES": str(limit)}).stdout.strip()
    job = settled(crew, h)
    data = open(job.output_path, "rb").read()
    total = sum(len(f"line {i}\n") for i in range(1, 2001))
    first, rest = data.split(b"\n", 1)
    assert first.startswith(b"[crewfile: ") and first.endswith(b" bytes of older output dropped]")
    dropped = int(first.split()[1])
    assert dropped + len(rest) == total                 # nothing lost but what the marker counts
    assert len(rest) <= limit
    kept = rest.decode().splitlines()
    start = int(kept[0].split()[1])
    assert kept == [f"line {i}" for i in range(start, 2001)]
    proc = run("job-wait", h, "--tail", "3")
    assert proc.stdout.splitlines()[1:] == ["line 1998", "line 1999", "line 2000"]
    proc = run("job-wait", h, "--all")
    assert proc.stdout.splitlines()[1].startswith("[crewfile: ")
    assert jobs.last_line(job.output_path) == "line 2000"


def test_output_limit_has_a_floor(crew, run):
    h = run("job-exec", "--", "true", env={"CREWFILE_JOB_OUTPUT_BYTES": "10"}).stdout.strip()
    assert jobs.Job(crew, h).spec()["output_limit"] == jobs.MIN_OUTPUT_LIMIT


# -- listing and sweeping --------------------------------------------------------------

def test_job_ls_columns_and_json(crew, run, tmp_path):
    live_session(crew)
    go = fifo(tmp_path)
    running = exec_(run, "--session", "w1", "--label", "long one", "--", *on_cue(go))
    done = exec_(run, "--session", "w1", "--", "sh", "-c", "exit 2")
    settled(crew, done)
    out = run("job-ls").stdout.splitlines()
    assert out[0].split() == ["HANDLE", "SESSION", "STATE", "CODE", "HEARD", "AGE", "LABEL"]
    rows = {line.split()[0]: line.split() for line in out[1:]}
    assert rows[running][1:5] == ["w1", "running", "-", "no"] and rows[running][-2:] == ["long", "one"]
    assert rows[done][1:5] == ["w1", "exited", "2", "notice"]
    data = {r["handle"]: r for r in json.loads(run("job-ls", "--json").stdout)}
    assert data[done]["code"] == 2 and data[done]["heard"] == "notice"
    assert data[running]["state"] == "running" and data[running]["pgid"] > 0
    release(go)


def test_the_table_from_one_file_per_ended_job_says_what_all_the_files_say(crew, run, tmp_path):
    """job-ls (no --json) reads `heard`, or `notice`, of an ended job, where
    what it prints was copied: every kind of job, listed both ways, agrees."""
    live_session(crew)
    sessions.register(crew, "gone", pid=os.getpid())
    go, go2 = fifo(tmp_path), fifo(tmp_path, "go2")
    running = exec_(run, "--session", "w1", "--", *on_cue(go))
    lost = exec_(run, "--", *on_cue(go2))
    os.kill(started(crew, lost).pids()["watcher"], signal.SIGKILL)
    notice = exec_(run, "--session", "w1", "--label", "by notice", "--", "sh", "-c", "exit 2")
    taken = exec_(run, "--session", "w1", "--", "sh", "-c", "exit 3")
    nobody = exec_(run, "--", "sh", "-c", "kill -TERM $$")
    settled(crew, notice), settled(crew, taken), settled(crew, nobody)
    assert run("job-wait", taken).returncode == 3           # takes the notice back
    waited = exec_(run, "--", "sh", "-c", "exit 5")
    assert run("job-wait", waited).returncode == 5
    wait_for(lambda: not jobs.Job(crew, lost).watcher_alive(), what="the watcher's death")
    keys = ("handle", "label", "session", "state", "code", "signal", "heard", "created", "ended")

    def table(rows):        # job-ls's HEARD column: `announced` counts only when nobody heard
        return [{"HEARD": r["heard"] or ("no!" if r["announced"] is False else "no"),
                 **{k: r.get(k) for k in keys}} for r in rows]
    quick = table(jobs.list_jobs(crew, full=False))
    assert quick == table(jobs.list_jobs(crew)) and len(quick) == 6
    states = {r["handle"]: (r["state"], r["code"], r["HEARD"]) for r in quick}
    assert states == {running: ("running", None, "no"), lost: ("lost", None, "no"),
                      notice: ("exited", 2, "notice"), taken: ("exited", 3, "wait"),
                      nobody: ("killed", 143, "no!"), waited: ("exited", 5, "wait")}
    release(go)
    os.killpg(jobs.Job(crew, lost).pids()["pgid"], signal.SIGKILL)


def test_sweep_removes_only_heard_outcomes_past_retention(crew, run, tmp_path):
    live_session(crew)
    go = fifo(tmp_path)
    by_wait = exec_(run, "--", "echo", "w")
    assert run("job-wait", by_wait).returncode == 0
    by_notice = exec_(run, "--session", "w1", "--", "echo", "n")
    unheard = exec_(run, "--", "echo", "u")
    running = exec_(run, "--", *on_cue(go))
    for h in (by_wait, by_notice, unheard):
        settled(crew, h)
    assert run("job-sweep").stdout == ""                        # 10m not yet passed
    assert set(jobs.handles(crew)) == {by_wait, by_notice, unheard, running}
    proc = run("job-sweep", "--older-than", "0s")
    assert proc.returncode == 0 and sorted(proc.stdout.split()) == sorted([by_wait, by_notice])
    assert set(jobs.handles(crew)) == {unheard, running}
    assert not os.path.exists(crew.job_dir(by_wait))             # output and all
    assert run("job-wait", by_wait).returncode == 125
    # An unheard outcome outlives any short retention; only its long one ends it.
    assert sweep.sweep(crew, 0, sweep.UNHEARD_RETENTION, now=time.time() + 6 * 86400) == []
    assert sweep.sweep(crew, 0, sweep.UNHEARD_RETENTION, now=time.time() + 8 * 86400) == [unheard]
    assert jobs.handles(crew) == [running]                        # running: never
    assert [e for e in os.listdir(crew.sub("jobs")) if e.startswith(".")] == []
    proc = run("job-sweep", "--older-than", "ten")
    assert proc.returncode == 2 and "bad --older-than 'ten'" in proc.stderr
    release(go)


def test_library_errors(crew):
    with pytest.raises(NotFound):
        jobwait.wait(crew, "nope", timeout=0)
    with pytest.raises(BadInput):
        jobwatch.start(crew, [])
    with pytest.raises(BadInput):
        jobs.Job(crew, "a/b")


# -- detached ----------------------------------------------------------------------------

def test_caller_exits_and_terminal_closes_job_runs_on_and_is_announced(crew, tmux, tmp_path):
    live_session(crew)
    go = fifo(tmp_path)
    hfile = tmp_path / "handle"
    pane = tmux.new_window("sh", env={"CREWFILE_DIR": crew.root})
    tmux("send-keys", "-t", pane, "-l",
         f"{sys.executable} {BIN}/job-exec --session w1 -- sh -c 'read x < {go}; echo survived' > {hfile}")
    tmux("send-keys", "-t", pane, "Enter")
    wait_for(lambda: hfile.exists() and hfile.read_text().endswith("\n"), what="the handle")
    h = hfile.read_text().strip()
    shell_pid = int(tmux("display-message", "-p", "-t", pane, "#{pane_pid}").strip())
    tmux("kill-window", "-t", pane)                   # the terminal closes: SIGHUP
    wait_for(lambda: not os.path.exists(f"/proc/{shell_pid}"), what="the caller's shell to exit")
    job = started(crew, h)
    pids = job.pids()
    assert jobs.info(job)["state"] == "running"
    # Its own session and process group; the watcher in a session of its own
    # (not its leader: double-forked, it can never get a controlling terminal).
    assert os.getsid(pids["pid"]) == pids["pid"] == os.getpgid(pids["pid"])
    assert os.getsid(pids["watcher"]) not in (pids["watcher"], shell_pid, os.getsid(0))
    release(go)
    settled(crew, h)
    notices = job_notices(crew)
    assert len(notices) == 1
    assert notices[0].text.startswith(f"job {h} exited 0 after ")
    assert notices[0].text.endswith("; last output: survived")


def test_a_hangup_right_after_the_handle_does_not_lose_the_job(crew, run):
    """job-exec returns before its watcher has left its process group (the
    middle process calls setsid() after the fork): a terminal closing at that
    moment (SIGHUP to the group) must not kill the watcher's parent. 20 jobs,
    each hung up the moment its handle is read."""
    for _ in range(20):
        proc = subprocess.Popen([sys.executable, f"{BIN}/job-exec", "--", "true"],
                                stdout=subprocess.PIPE, start_new_session=True)
        h = proc.stdout.readline().decode().strip()
        try:
            os.killpg(proc.pid, signal.SIGHUP)
        except ProcessLookupError:
            pass                # everyone in the group had left it already
        proc.wait()
        assert run("job-wait", h).returncode == 0, jobs.info(jobs.Job(crew, h))


def test_a_grandchild_holding_the_output_pipe_does_not_hold_up_the_outcome(crew, run):
    h = exec_(run, "--", "sh", "-c", "sleep 600 & echo started; exit 6")
    proc = run("job-wait", h, timeout=20)
    assert proc.returncode == 6 and proc.stdout.splitlines()[1:] == ["started"]
    pgid = jobs.Job(crew, h).pids()["pgid"]
    os.killpg(pgid, signal.SIGKILL)                   # the leftover sleep, found by its group


def test_output_that_cannot_be_written_does_not_lose_the_outcome(crew):
    """A file-size limit (as a full disk would) stops the output, not the watcher."""

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (2000, 2000))
    proc = subprocess.run([sys.executable, f"{BIN}/job-exec", "--", "sh", "-c",
                           "i=0; while [ $i -lt 500 ]; do echo 'twenty bytes of text'; i=$((i+1)); done; exit 3"],
                          stdout=subprocess.PIPE, text=True, preexec_fn=small_files, check=True)
    job = settled(crew, proc.stdout.strip())
    assert job.result()["code"] == 3
    assert os.path.getsize(job.output_path) <= 2000


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.integers(0, 40000), max_size=12), st.booleans(), st.integers(0, 14))
def test_the_tail_read_from_the_end_is_the_tail_of_the_whole(tmp_path_factory, lengths, closed, n):
    """Job.output(N), read from the end in blocks, says what the last N lines
    of the whole output are (lines as long as blocks, and longer, included)."""
    crew = Crew(str(tmp_path_factory.mktemp("tail") / "crew"))
    job = jobs.new_job(crew, "j-tail")
    data = b"\n".join(b"%d" % i + b"x" * length for i, length in enumerate(lengths))
    if closed and data:
        data += b"\n"
    with open(job.output_path, "wb") as f:
        f.write(data)
    parts = data.split(b"\n")
    if parts and parts[-1] == b"":
        parts.pop()
    assert job.output(n) == (b"\n".join(parts[-n:]) + b"\n" if parts and n else b"")
    assert job.output() == data
