"""crew-up: the supervision as one unit. Each stage killed is restarted and
recorded; a second crew-up is refused; SIGTERM, crew-down and even SIGKILL of
crew-up leave no process behind; --status; --systemd."""
import json
import os
import shutil
import signal
import subprocess
import sys

import pytest

from conftest import BIN, wait_for
from crewfile.crew import crewup
from crewfile.wake import inbox
from crewfile.session.sessions import Session, register
from crewfile.core import locks, paths


def start(crew, primary="boss", *args):
    os.makedirs(crew.root, exist_ok=True)
    log = open(os.path.join(os.path.dirname(crew.root), "crew-up.out"), "ab")
    proc = subprocess.Popen([sys.executable, os.path.join(BIN, "crew-up"), primary,
                             "--backoff-max", "0.5s", *args],
                            env={**os.environ, "CREWFILE_DIR": crew.root},
                            stdout=log, stderr=log)
    wait_for(lambda: _all_running(crew, proc), what="every stage running")
    return proc


def _all_running(crew, proc):
    assert proc.poll() is None, "crew-up exited"
    st = crewup.read_state(crew)
    stages = st.get("stages") or {}
    return st.get("pid") == proc.pid and stages.get("wake", {}).get("running") \
        and stages.get("nudge", {}).get("running")


def state(crew):
    return crewup.read_state(crew)["stages"]


def pids(crew):
    return {name: pid for s in state(crew).values() for name, pid in s["pids"].items()}


def log_text(crew):
    with open(crewup.files(crew)["log"]) as f:
        return f.read()


def described(pid):
    """What /proc says of a process that should be gone: its parent, signal
    masks and state, for a failure that must name its cause."""
    try:
        with open(f"/proc/{pid}/status") as f:
            keep = ("State", "PPid", "Threads", "SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt")
            return " ".join(l.strip().replace(":\t", "=") for l in f if l.split(":")[0] in keep)
    except OSError as e:
        return f"({e.strerror})"


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is gone for our purpose
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0


@pytest.mark.parametrize("stage", ["crew-watch", "wake-filter", "wake-send", "nudge-tick"])
def test_a_killed_stage_is_restarted_and_recorded(crew, stage):
    register(crew, "boss", kind="primary")
    register(crew, "w1")
    proc = start(crew)
    try:
        victim = pids(crew)[stage]
        group = "nudge" if stage == "nudge-tick" else "wake"
        os.kill(victim, signal.SIGKILL)
        wait_for(lambda: state(crew)[group]["restarts"] == 1 and state(crew)[group]["running"]
                 and victim not in pids(crew).values(), what=f"{stage} restarted")
        # Its stage's line names it; on a loaded machine a neighbour that its
        # death ended (crew-watch, its reader gone) may be seen first and named first.
        exited = [line for line in log_text(crew).splitlines() if f"stage-exited: {group}: " in line]
        assert any(f"{stage} pid {victim} killed by SIGKILL" in line for line in exited), exited
        assert f"{stage} pid {victim} killed by SIGKILL" in state(crew)[group]["last_error"]
        Session(crew, "w1").append("done", "after the restart")
        wait_for(lambda: any("after the restart" in n.text for n in inbox.pending(crew, "boss")),
                 what="a wake through the restarted pipe")
    finally:
        stop(proc)


def test_a_second_crew_up_is_refused_at_once(crew, run):
    proc = start(crew)
    try:
        p = run("crew-up", "boss", timeout=30)
        assert p.returncode == 1
        assert p.stderr == f"crew-up: crew-up already runs for {crew.root} (pid {proc.pid})\n"
    finally:
        stop(proc)


@pytest.mark.parametrize("how", ["SIGTERM", "crew-down", "SIGKILL"])
def test_stopping_leaves_no_process_behind(crew, run, how):
    proc = start(crew)
    found = pids(crew)
    # the four long-running stages; the one-shot job-sweep started at once may
    # still be running on a loaded machine (then it must go too)
    assert {"crew-watch", "wake-filter", "wake-send", "nudge-tick"} <= set(found), found
    assert set(found) <= {"crew-watch", "wake-filter", "wake-send", "nudge-tick", "job-sweep"}
    children = list(found.values())
    assert all(alive(p) for n, p in found.items() if n != "job-sweep")
    if how == "SIGTERM":
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        assert log_text(crew).rstrip().splitlines()[-1].endswith(f"down: pid {proc.pid}")
    elif how == "crew-down":
        assert run("crew-down").returncode == 0
        assert proc.wait(30) == 0
        assert run("crew-down").returncode == 3
    else:
        proc.kill()         # no handler runs: the children follow it by PR_SET_PDEATHSIG
        proc.wait()
    wait_for(lambda: not any(alive(p) for p in children),
             what=lambda: "every stage gone; left: " + "; ".join(
                 f"{n} {described(p)}" for n, p in found.items() if alive(p)))
    if how != "SIGKILL":
        assert run("crew-up", "--status").returncode == 3
    # and a new one starts cleanly on the same crew
    again = start(crew)
    stop(again)


def test_status_output(crew, run):
    proc = start(crew)
    try:
        p = run("crew-up", "--status")
        assert p.returncode == 0, p.stderr
        lines = p.stdout.splitlines()
        assert lines[0].startswith(f"crew-up pid {proc.pid} primary boss since ")
        assert lines[1].split() == ["STAGE", "RUNNING", "PIDS", "SINCE", "RESTARTS", "LAST-ERROR"]
        rows = {l.split()[0]: l.split() for l in lines[2:]}
        assert rows["wake"][1] == "yes" and rows["wake"][4] == "0" and rows["wake"][5] == "-"
        assert rows["wake"][2].startswith("crew-watch=")
        assert rows["nudge"][1] == "yes"
    finally:
        stop(proc)
    p = run("crew-up", "--status")
    assert p.returncode == 3 and p.stderr == f"crew-up: not running for {crew.root}\n"
    p = run("crew-up")
    assert p.returncode == 2 and p.stderr.startswith("crew-up: missing PRIMARY")


def test_systemd_unit_verifies(crew, run, tmp_path):
    p = run("crew-up", "boss", "--systemd")
    assert p.returncode == 0
    unit = p.stdout
    assert f'Environment="CREWFILE_DIR={crew.root}"' in unit
    assert "ExecStart=" + sys.executable in unit and "crew-up boss --dir" in unit
    if not shutil.which("systemd-analyze"):
        pytest.skip("systemd-analyze is not installed: the unit was not verified")
    path = tmp_path / "crew-up.service"
    path.write_text(unit)
    v = subprocess.run(["systemd-analyze", "verify", "--user", str(path)],
                       capture_output=True, text=True)
    problems = [l for l in v.stderr.splitlines() if "crew-up.service" in l]
    assert not problems, v.stderr


def test_the_systemd_unit_runs_crew_up_with_every_option_given(crew, run, tmp_path):
    """--remote (and --remotes' lines), --sweep, --backoff-max and --notify go
    into the unit's ExecStart: a unit that dropped them would run another crew."""
    hosts = tmp_path / "hosts"
    hosts.write_text("# the second machine\nbuild2:/srv/crew\n")
    p = run("crew-up", "boss", "--systemd", "--remote", "build1:/home/c/crew", "--remotes",
            str(hosts), "--sweep", "5m", "--backoff-max", "30s", "--notify", "true")
    assert p.returncode == 0, p.stderr
    start = [l for l in p.stdout.splitlines() if l.startswith("ExecStart=")][0]
    assert start.endswith(f"crew-up boss --dir {crew.root} --remote build1:/home/c/crew"
                          " --remote build2:/srv/crew --sweep 5m --backoff-max 30s"
                          " --notify true")
    p = run("crew-up", "boss", "--systemd", "--sweep", "soon")
    assert (p.returncode, p.stdout) == (2, "")


def test_the_walkthrough_primary_registered_after_crew_up(crew):
    """The issue's scenario through crew-up: the done wake is not lost."""
    register(crew, "w1")
    proc = start(crew)
    try:
        Session(crew, "w1").append("done", "shipped")
        wait_for(lambda: "holding 1 wake(s)" in log_text(crew), what="wake-send holding")
        os.kill(pids(crew)["crew-watch"], signal.SIGKILL)          # and a stage dies meanwhile
        wait_for(lambda: state(crew)["wake"]["restarts"] == 1, what="the restart")
        register(crew, "boss", kind="primary")
        wait_for(lambda: len(inbox.pending(crew, "boss")) == 1, what="the done wake")
        assert inbox.pending(crew, "boss")[0].text.endswith(" w1 done: shipped")
    finally:
        stop(proc)


def test_bad_remotes_are_refused_before_anything_starts(crew, run, tmp_path):
    p = run("crew-up", "boss", "--remote", "host-without-dir")
    assert p.returncode == 2 and "bad --remote 'host-without-dir'" in p.stderr
    p = run("crew-up", "boss", "--remote", "a b:/x")
    assert p.returncode == 2 and "bad --host 'a b'" in p.stderr
    p = run("crew-up", "boss", "--remotes", tmp_path / "nope")
    assert p.returncode == 3
    f = tmp_path / "remotes"
    f.write_text("# build machines\n\nrelative:dir\n")
    p = run("crew-up", "boss", "--remotes", f)
    assert p.returncode == 2 and "bad --remote 'relative:dir'" in p.stderr
    assert not os.path.exists(crewup.files(crew)["state"])


def test_a_lock_still_held_for_a_killed_crew_up_is_waited_for(crew):
    """A crew-up SIGKILLed while forking a stage leaves its lock held by that
    child until its exec: the next crew-up (its state naming a dead pid) waits
    for the lock instead of exiting Refused, and runs once it is free."""
    register(crew, "boss", kind="primary")
    gone = subprocess.Popen(["true"])
    gone.wait()
    paths.ensure_dir(crew.sub(crewup.DIR))
    with open(crewup.files(crew)["state"], "w") as f:
        json.dump({"version": 1, "pid": gone.pid, "primary": "boss", "stages": {}}, f)
    held = locks.acquire(crewup.files(crew)["lock"], timeout=0)     # the forking child's
    out = os.path.join(os.path.dirname(crew.root), "crew-up.out")
    with open(out, "ab") as log:
        proc = subprocess.Popen([sys.executable, os.path.join(BIN, "crew-up"), "boss"],
                                env={**os.environ, "CREWFILE_DIR": crew.root},
                                stdout=log, stderr=log)
    def said():
        with open(out) as f:
            return f.read()
    try:
        def waiting():
            assert proc.poll() is None, said()
            return "waiting up to 10s" in said()
        wait_for(waiting, timeout=60, what="crew-up waiting for the lock")
        assert said() == (f"crew-up: the lock is busy but crew-up pid {gone.pid} is"
                                    f" gone: waiting up to 10s for a child it was starting to"
                                    f" let go\n")
        held.release()
        wait_for(lambda: _all_running(crew, proc), timeout=60, what="every stage running")
    finally:
        held.release()
        stop(proc)


def test_a_stage_whose_crew_up_died_before_its_prctl_never_runs(tmp_path):
    """The child of a crew-up that died before the child's prctl (its parent is
    then init or a subreaper, not necessarily pid 1) exits instead of running
    the stage unsupervised; with its parent alive it runs."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    for parent, want in ((gone.pid, False), (os.getpid(), True)):
        ran = tmp_path / f"ran-{parent}"
        p = subprocess.Popen(["sh", "-c", f"echo ran > {ran}"],
                             preexec_fn=crewup._die_with_parent(parent))
        assert p.wait(30) == 0
        assert ran.exists() == want


def test_crew_down_signals_only_the_lock_s_holder(crew, run, tmp_path):
    """crew-up/state is a file any process of the user can write: crew-down
    signals the pid it names only when that process holds crew-up/lock.
    Here flock(1) holds the lock and the state names another process."""
    os.makedirs(crew.root, exist_ok=True)
    paths.ensure_dir(crew.sub("crew-up"))
    lock = os.path.join(crew.root, "crew-up", "lock")
    holder = subprocess.Popen(["flock", lock, "sleep", "600"], start_new_session=True)
    victim = subprocess.Popen(["sleep", "600"])
    try:
        wait_for(lambda: locks.is_held(lock), what="flock(1) holding crew-up/lock")
        with open(os.path.join(crew.root, "crew-up", "state"), "w") as f:
            json.dump({"pid": victim.pid}, f)
        p = run("crew-down", "--timeout", "2s")
        assert p.returncode == 111, p
        assert p.stderr.startswith(f"crew-down: crew-up/state names pid {victim.pid}, but crew-up/lock"
                                   f" is held by pid {holder.pid} (flock)"), p.stderr
        assert p.stderr.rstrip().endswith("nothing signalled"), p.stderr
        assert victim.poll() is None and holder.poll() is None
    finally:
        os.killpg(holder.pid, signal.SIGKILL)       # flock(1) and the sleep it runs
        victim.kill()
        for proc in (holder, victim):
            proc.wait()
