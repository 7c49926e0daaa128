"""Nudges against real tmux, real fake agents, real processes and locks."""
import fcntl
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import REPO, cmd, crash_and_respawn, make_due, spawn_fake, wait_for
from crewfile.nudges import nudgewatch, schedules
from crewfile.core.atomic import replace
from crewfile.core.logfile import TailStats
from crewfile.session.reader import state
from crewfile.session.sessions import Session, register
from crewfile.core import locks, notify, paths
from crewfile.wake import announce

FAKE = os.path.join(REPO, "tests", "fake-agent")
LIB = os.path.join(REPO, "lib")


def agent(crew, tmux, name, cwd=None, **ids):
    sess, pane = tmux.agent_window(crew, name, FAKE, cwd=cwd, **ids)
    tmux.wait_screen(pane, "ready>")
    wait_for(lambda: "started" in kinds(sess), what=f"{name}'s started record")
    return sess, pane


def records(sess, n=100):
    return sess.last_records(n, TailStats())


def kinds(sess):
    return [r.kind for r in records(sess)]


def captain_lines(sess):
    return [r.text for r in records(sess) if r.kind == "captain"]


def nudge_records(sess):
    return [(r.kind, r.text) for r in records(sess) if r.kind.startswith("nudge")]


def add(*args):
    proc = cmd("nudge-add", *args)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def tick():
    proc = cmd("nudge-tick")
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def sched(crew, sid):
    return schedules.get(crew, sid)


def git_repo(path):
    os.makedirs(os.path.join(path, ".git"))
    return path


MESSAGE = "continue; record blockers in $(NOTES) `now` && \"quote\" 'it''s' -x;"


def test_delivers_literally_and_records_it(crew, tmux, tmp_path):
    sess, pane = agent(crew, tmux, "w1", cwd=str(tmp_path))
    sid = add("--session", "w1", "--every", "600", "--message", MESSAGE, "--max", "3")
    assert tick() == ""                                   # not due yet: nothing at all
    make_due(crew, sid)
    out = tick()
    assert f"{sid} w1 delivered: attempt 1/3: delivered" in out
    wait_for(lambda: captain_lines(sess) == [MESSAGE], what="the message as the agent's input")
    assert nudge_records(sess) == [("nudge", f"{sid} attempt 1/3: delivered")]
    s = sched(crew, sid)
    assert (s["attempts"], s["armed"], s["last_outcome"]) == (1, True, "delivered")
    assert tick() == ""                                   # the floor holds: not due again


class Gate:
    """A turn that lasts until the test opens the gate: the agent runs
    `flock GATE true` while the test holds GATE."""

    def __init__(self, path):
        self.path = path
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def start_turn(self, tmux, pane, sess):
        tmux("send-keys", "-t", pane, "-l", f"RUN: flock {self.path} true")
        tmux("send-keys", "-t", pane, "Enter")
        wait_for(lambda: kinds(sess)[-1] == "turn-started", what="turn-started")

    def open(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


@pytest.fixture
def gate(tmux, tmp_path):
    g = Gate(str(tmp_path / "gate"))
    yield g
    g.open()


def idle_again(tmux, pane, sess):
    wait_for(lambda: kinds(sess)[-1] == "turn-ended", what="turn-ended")
    tmux.wait_screen(pane, lambda s: s.rstrip().endswith("ready>"))


def test_busy_target_is_nudged_at_the_first_tick_after_its_turn(crew, tmux, tmp_path, gate):
    sess, pane = agent(crew, tmux, "w1", cwd=str(tmp_path))
    sid = add("--session", "w1", "--every", "600", "--message", "go on")
    gate.start_turn(tmux, pane, sess)
    make_due(crew, sid)
    assert "refused: generating" in tick()
    assert "refused: generating" in tick()
    s = sched(crew, sid)
    assert (s["attempts"], s["armed"]) == (0, True)       # a busy refusal costs nothing
    assert [k for k, _ in nudge_records(sess)] == ["nudge-refused"]     # said once
    gate.open()
    idle_again(tmux, pane, sess)
    assert "delivered" in tick()                          # the first tick after the turn
    wait_for(lambda: captain_lines(sess)[-1:] == ["go on"], what="the nudge")
    assert sched(crew, sid)["attempts"] == 1


def test_incident_replay(crew, tmux, tmp_path):
    """The target's window closed half an hour ago; another session is live in the
    same repository. The tick refuses, disarms, and types nothing anywhere."""
    repo = git_repo(str(tmp_path / "repo"))
    os.makedirs(os.path.join(repo, "src"))
    target, tpane = agent(crew, tmux, "sleeper", cwd=repo, session_key="hq-7",
                          agent_session_id="5683-abcd")
    other, opane = agent(crew, tmux, "builder", cwd=os.path.join(repo, "src"))
    sid = add("--agent-session-id", "5683-abcd", "--every", "3600",
              "--message", "continue the overnight work")
    half_hour_ago = time.time() - 1800
    target.append("turn-ended", now=half_hour_ago)
    target.append("idle", now=half_hour_ago + 1)
    tmux("kill-window", "-t", tpane)                      # garbage-collected, as in the seed
    tmux("send-keys", "-t", opane, "-l", "SLOW: 600")     # the other agent is mid-build
    tmux("send-keys", "-t", opane, "Enter")
    wait_for(lambda: kinds(other)[-1] == "turn-started", what="builder's turn")
    make_due(crew, sid)
    before_other = tmux.screen(opane)
    out = tick()
    assert f"{sid} sleeper disarmed: refused and disarmed: not-live" in out
    s = sched(crew, sid)
    assert (s["armed"], s["attempts"]) == (False, 0)
    assert nudge_records(target)[-1][0] == "nudge-disarmed"
    assert captain_lines(other) == ["SLOW: 600"] and nudge_records(other) == []
    assert tmux.screen(opane) == before_other
    assert len(tmux("list-panes", "-a").splitlines()) == 1      # nothing was started
    make_due(crew, sid)
    assert tick() == ""                                   # disarmed stays disarmed


def test_another_live_session_in_the_tree_refuses_and_keeps(crew, tmux, tmp_path):
    repo = git_repo(str(tmp_path / "repo"))
    os.makedirs(os.path.join(repo, "a", "deep"))
    target, tpane = agent(crew, tmux, "t", cwd=os.path.join(repo, "a"))
    other, opane = agent(crew, tmux, "o", cwd=os.path.join(repo, "a", "deep"))
    elsewhere = git_repo(str(tmp_path / "elsewhere"))   # a tree of its own, whatever is above
    elsewhere, _ = agent(crew, tmux, "e", cwd=elsewhere)                      # outside: ignored
    sid = add("--session", "t", "--every", "60", "--message", "hello")
    make_due(crew, sid)
    assert "refused: other-session: o is live in " + repo in tick()
    assert sched(crew, sid)["armed"] and captain_lines(target) == []
    tmux("kill-window", "-t", opane)
    assert "delivered" in tick()
    wait_for(lambda: captain_lines(target) == ["hello"], what="the nudge")
    assert captain_lines(elsewhere) == []


def test_unknown_tree_refuses_on_any_other_live_session(crew, tmux, tmp_path):
    os.makedirs(tmp_path / "x")
    target, tpane = agent(crew, tmux, "t", cwd=str(tmp_path / "x"))
    other, opane = agent(crew, tmux, "o")                  # registered without a cwd
    sid = add("--session", "t", "--every", "60", "--message", "hello")
    make_due(crew, sid)
    assert "refused: other-session: o is live and its tree is unknown" in tick()
    assert captain_lines(target) == []


def test_restart_survival_counts_carry_on(crew, tmux, tmp_path):
    sess, pane = agent(crew, tmux, "w1", cwd=str(tmp_path))
    sid = add("--session", "w1", "--every", "60", "--message", "next", "--max", "3")
    for n in (1, 2, 3):                                   # each tick a separate process
        make_due(crew, sid)
        assert f"attempt {n}/3: delivered" in tick()
        wait_for(lambda: captain_lines(sess).count("next") == n, what=f"nudge {n}")
        wait_for(lambda: state(sess)["generating"] == "no", what="the turn to end")
        tmux.wait_screen(pane, lambda s: s.rstrip().endswith("ready>"))
    s = sched(crew, sid)
    assert (s["attempts"], s["armed"]) == (3, False)
    assert nudge_records(sess)[-1] == ("nudge-disarmed", f"{sid} max: 3 of 3 attempts made")
    make_due(crew, sid)
    assert tick() == ""
    assert captain_lines(sess).count("next") == 3


def test_no_prompt_on_screen_refuses_and_keeps(crew, tmux, tmp_path):
    pane = tmux.new_window("clear; printf 'a full-screen view'; exec sleep 600", name="view")
    sess = register(crew, "w1", tmux=pane, cwd=str(tmp_path), pid=tmux.pane_pid(pane))
    sess.append("idle")                                   # a hook that says idle regardless
    sid = add("--session", "w1", "--every", "60", "--message", "next")
    tmux.wait_screen(pane, "a full-screen view")
    make_due(crew, sid)
    assert "refused: no-prompt" in tick()
    assert sched(crew, sid)["attempts"] == 0


def test_a_respawned_agent_is_not_nudged_before_its_start_hook_says_which_conversation(
        crew, tmux, tmp_path):
    """Right after crew-respawn the newest turn records are the earlier
    process's (`turn-ended`: not generating), and a Gemini's start hook, slow,
    has not recorded `started` yet: which conversation the pane holds is not
    known, so a due nudge is refused (`starting`), nothing typed, and kept;
    once `started` is recorded, the next tick delivers."""
    opened = str(tmp_path / "start-hook-runs")
    open(opened, "w").close()
    agent = f"env FAKE_START_GATE={opened} {sys.executable} {FAKE} --conversation"
    sess = spawn_fake(crew, tmp_path, "gemini", agent)
    wait_for(lambda: "started" in kinds(sess), what="the first start hook's record")
    conversation = sess.reread().meta["agent_session_id"]
    os.unlink(opened)                         # the respawned agent's start hook is slow
    sess = crash_and_respawn(tmux, sess, f"{agent} --resume {conversation}")
    pane = sess.meta["tmux"]
    tmux.wait_screen(pane, "ready>")
    sid = add("--session", "w1", "--every", "600", "--message", "next words", "--max", "3")
    make_due(crew, sid)
    out = tick()
    assert f"{sid} w1 refused: starting: its start hook has not recorded which" in out, out
    assert "next words" not in tmux.screen(pane)
    assert captain_lines(sess) == []
    s = sched(crew, sid)
    assert (s["attempts"], s["armed"], s["last_code"]) == (0, True, "starting")
    assert nudge_records(sess)[-1][0] == "nudge-refused"
    open(opened, "w").close()                 # its start hook runs
    wait_for(lambda: kinds(sess)[-1] == "started", what="the respawned agent's started")
    assert f"{sid} w1 delivered: attempt 1/3: delivered" in tick()
    wait_for(lambda: captain_lines(sess) == ["next words"], what="the nudge as its input")


def test_a_spent_schedule_left_armed_is_disarmed_never_attempted_past_max(crew, tmux, tmp_path):
    """A tick stopped between counting its last attempt and disarming (killed,
    its machine rebooted) leaves a spent schedule armed: the next due tick
    disarms it; it never types an `attempt 2/1`."""
    sess, pane = agent(crew, tmux, "w1", cwd=str(tmp_path))
    sid = add("--session", "w1", "--every", "60", "--message", "next", "--max", "1")
    path = os.path.join(crew.root, "nudges", sid)
    s = json.load(open(path))
    s["attempts"] = 1                         # counted, then the tick was stopped
    replace(path, json.dumps(s))
    make_due(crew, sid)
    assert f"{sid} w1 disarmed: max: 1 of 1 attempts made" in tick()
    assert nudge_records(sess) == [("nudge-disarmed", f"{sid} max: 1 of 1 attempts made")]
    assert captain_lines(sess) == []
    assert (sched(crew, sid)["armed"], sched(crew, sid)["attempts"]) == (False, 1)
    assert tick() == ""


def test_a_spent_schedule_left_armed_after_a_failed_attempt_is_disarmed_as_spent(
        crew, tmux, tmp_path):
    """The same, its file saying the last attempt failed: nobody was nudged,
    so the disarming is recorded as `nudge-spent` (it wakes the primary)."""
    sess, pane = agent(crew, tmux, "w1", cwd=str(tmp_path))
    sid = add("--session", "w1", "--every", "60", "--message", "next", "--max", "1")
    path = os.path.join(crew.root, "nudges", sid)
    s = json.load(open(path))
    s.update(attempts=1, last_outcome="failed", last_code="discarded")
    replace(path, json.dumps(s))
    make_due(crew, sid)
    assert f"{sid} w1 disarmed: max: 1 of 1 attempts made, the last failed" in tick()
    assert nudge_records(sess) == [("nudge-spent", f"{sid} max: 1 of 1 attempts made,"
                                                   " the last failed")]
    assert captain_lines(sess) == [] and not sched(crew, sid)["armed"]


def _scheduled(crew, tmux, tmp_path, name, command):
    """A pane running *command* (it draws `ready> `), registered idle as
    *name*, and a schedule of 2 attempts at it: (session, pane, schedule id)."""
    pane = tmux.new_window(command, name=name)
    sess = register(crew, name, tmux=pane, cwd=str(tmp_path), pid=tmux.pane_pid(pane))
    sess.append("idle")
    tmux.wait_screen(pane, "ready>")
    return sess, pane, add("--session", name, "--every", "60", "--message", "next", "--max", "2")


@pytest.mark.parametrize("stty,code", [
    # Keys read at once (no line editing) and never shown: read, then dropped.
    ("-echo -icanon", "discarded: the agent read the typed keys and its prompt line stayed"
                      " empty"),
    # A line being edited, unshown: the kernel holds the keys, whether they
    # were dropped cannot be told.
    ("-echo", "failed: the typed text did not show")])
def test_discarded_delivery_counts_and_never_presses_enter(crew, tmux, tmp_path, stty, code):
    # A prompt that never echoes what is typed: the line stays empty.
    sess, pane, sid = _scheduled(crew, tmux, tmp_path, "mute",
                                 f"stty {stty}; printf 'ready> '; exec cat > /dev/null")
    make_due(crew, sid)
    assert f"failed: attempt 1/2: {code}" in tick()
    make_due(crew, sid)
    assert "failed: attempt 2/2" in tick()
    s = sched(crew, sid)
    assert (s["attempts"], s["armed"]) == (2, False)
    # spent with nobody nudged: said as the kind that wakes the primary
    assert [k for k, _ in nudge_records(sess)] == ["nudge-failed", "nudge-failed", "nudge-spent"]
    assert nudge_records(sess)[-1][1] == f"{sid} max: 2 of 2 attempts made, the last failed"


def test_text_shown_otherwise_fails_is_left_there_and_never_typed_again(crew, tmux, tmp_path):
    # A prompt that shows something else than what was typed (upper case);
    # drawn by the program itself, so it reads the keys once the prompt shows.
    shout = (f"{sys.executable} -c 'import os\nos.write(1, b\"ready> \")\n"
             f"while True: os.write(1, os.read(0, 64).upper())'")
    sess, pane, sid = _scheduled(crew, tmux, tmp_path, "shout", f"stty -echo -icanon; exec {shout}")
    make_due(crew, sid)
    assert "failed: attempt 1/2: failed: the typed text did not show" in tick()
    tmux.wait_screen(pane, "ready> NEXT")
    make_due(crew, sid)
    assert "refused: draft" in tick()               # what is left there is never typed over
    assert sched(crew, sid)["attempts"] == 1
    assert tmux.screen(pane).count("NEXT") == 1


def test_matching_on_either_id_and_not_another_conversation(crew, tmux, tmp_path):
    sess, pane = agent(crew, tmux, "w1", cwd=str(tmp_path), session_key="hq-1")
    sid = add("--session-key", "hq-1", "--every", "60", "--message", "hi")
    sess.update_meta(agent_session_id="uuid-1")           # the hook learns the agent's id
    make_due(crew, sid)
    assert "delivered" in tick()
    assert sched(crew, sid)["agent_session_id"] == "uuid-1"      # learned
    wait_for(lambda: captain_lines(sess) == ["hi"], what="the nudge")
    # The conversation ends; the name and key are reused by a new conversation.
    sess.append("ended", "exit")
    tmux("kill-window", "-t", pane)
    register(crew, "w1", tmux=tmux.new_window("sleep 600", name="new"), cwd=str(tmp_path),
             session_key="hq-1", agent_session_id="uuid-2")
    make_due(crew, sid)
    assert "disarmed: refused and disarmed: not-live: no registered session matches" in tick()


def test_overlapping_tick_exits_at_once(crew, tmux, tmp_path):
    sess, pane = agent(crew, tmux, "w1", cwd=str(tmp_path))
    sid = add("--session", "w1", "--every", "60", "--message", "hi")
    make_due(crew, sid)
    before = open(os.path.join(crew.root, "nudges", sid)).read()
    lock = os.path.join(crew.root, "locks", "nudge-tick")
    holder = subprocess.Popen(["flock", "-o", lock, "sleep", "600"], start_new_session=True)
    try:
        wait_for(lambda: subprocess.run(["flock", "-n", lock, "true"]).returncode != 0,
                 what="flock(1) holding the tick lock")
        proc = cmd("nudge-tick", timeout=10)
        assert (proc.returncode, proc.stdout, proc.stderr) == (1, "", "")
        assert open(os.path.join(crew.root, "nudges", sid)).read() == before
        assert captain_lines(sess) == []
    finally:
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait()
    assert "delivered" in tick()


HOLDER = """
import os, subprocess, sys, time
sys.path.insert(0, {lib!r})
from crewfile.nudges import nudge
from crewfile.core.paths import Crew
crew = Crew({root!r})

class Stuck(nudge.World):
    def deliver(self, name, text):
        child = subprocess.Popen(["sleep", "600"])     # a child started mid-tick
        print(child.pid, flush=True)
        time.sleep(600)                                # ... and the tick hangs

lock = nudge.tick_lock(crew)
assert lock is not None
nudge.tick(crew, Stuck(crew))
"""


def test_sigkilled_tick_frees_the_lock_and_its_child_holds_nothing(crew, tmux, tmp_path):
    sess, pane = agent(crew, tmux, "w1", cwd=str(tmp_path))
    sid = add("--session", "w1", "--every", "60", "--message", "hi")
    make_due(crew, sid)
    stuck = subprocess.Popen([sys.executable, "-c", HOLDER.format(lib=LIB, root=crew.root)],
                             stdout=subprocess.PIPE, text=True)
    child = int(stuck.stdout.readline())
    try:
        assert cmd("nudge-tick").returncode == 1          # it is mid-tick
        os.kill(stuck.pid, signal.SIGKILL)
        stuck.wait()
        os.kill(child, 0)                                 # its child lives on ...
        make_due(crew, sid)
        assert cmd("nudge-tick").returncode == 0          # ... and does not hold the lock
        assert sched(crew, sid)["attempts"] == 2          # the killed attempt was counted
    finally:
        os.kill(child, signal.SIGKILL)
        stuck.stdout.close()


def test_watch_delivers_after_turn_ended(crew, tmux, tmp_path, gate):
    sess, pane = agent(crew, tmux, "w1", cwd=str(tmp_path))
    sid = add("--session", "w1", "--every", "600", "--message", "watched nudge")
    gate.start_turn(tmux, pane, sess)
    make_due(crew, sid)
    watcher = subprocess.Popen([sys.executable, os.path.join(REPO, "bin", "nudge-tick"), "--watch"],
                               stdout=subprocess.PIPE, text=True)
    try:
        assert "refused: generating" in watcher.stdout.readline()
        gate.open()                                       # the turn ends; no cron tick runs
        wait_for(lambda: captain_lines(sess)[-1:] == ["watched nudge"], what="the watched nudge")
        assert sched(crew, sid)["attempts"] == 1
    finally:
        watcher.terminate()
        watcher.wait()
        watcher.stdout.close()


@pytest.mark.parametrize("polling", [False, True], ids=["inotify", "polling"])
def test_watch_wakes_for_a_change_made_right_after_its_tick(crew, monkeypatch, polling):
    """A turn that ends as the watcher says its tick (here: while emit runs)
    wakes it at once, not at its next poll (60 s): it watches, then looks.
    (test_watch_delivers_after_turn_ended lost that race under load.)"""
    if polling:
        monkeypatch.setattr(notify, "open_inotify", lambda warn=None: None)
    register(crew, "w1")
    ticks = []

    def emit(outcomes):
        ticks.append(outcomes)
        if len(ticks) == 1:
            Session(crew, "w1").append("turn-ended")
    deadline = time.monotonic() + 30
    nudgewatch.watch(crew, emit, warn=lambda msg: None,
                     stop=lambda: len(ticks) >= 2 or time.monotonic() > deadline)
    assert len(ticks) == 2, "the change made right after the first tick woke no second tick"


def test_watch_names_a_damaged_schedule_once_not_at_each_tick(crew):
    """nudge-tick.md: a damaged schedule is named in one line on stderr when
    first seen damaged, not at every tick."""
    register(crew, "w1")
    with open(os.path.join(crew.ensure_sub(paths.NUDGES), "n-bad"), "w") as f:
        f.write("{not a schedule")
    ticks, said = [], []

    def emit(outcomes):
        ticks.append(outcomes)
        if len(ticks) == 1:
            Session(crew, "w1").append("turn-ended")        # wakes a second tick
    deadline = time.monotonic() + 30
    nudgewatch.watch(crew, emit, warn=said.append,
                     stop=lambda: len(ticks) >= 2 or time.monotonic() > deadline)
    assert len(ticks) == 2
    assert len(said) == 1 and said[0].startswith("skipped ") and "n-bad" in said[0], said


def test_watch_makes_no_pass_for_the_wake_paths_files(crew):
    """wake-send and the rewake waiter open announce.lock and rewake.lock and
    rewrite `announced` in a session directory: none of it is a status log,
    so the watcher waits on. Twice, then a status record: one pass for that."""
    register(crew, "w1")
    sess = Session(crew, "w1")
    ticks, looks, appended = [], [], []

    def wake_paths_look():
        with announce.deciding(sess):       # wake-send's or the waiter's decision
            announce.mark(sess, [])
        locks.acquire(os.path.join(sess.dir, paths.REWAKE_LOCK), timeout=0).release()
        announce.armed(sess)

    def stop():
        """Called before each wait: the first two after the first tick look
        as the wake paths do, the third appends a record, then stop after
        the tick that record wakes."""
        if not ticks or time.monotonic() > deadline:
            return bool(ticks)
        if len(looks) < 2:
            looks.append(len(ticks))
            wake_paths_look()
        elif not appended:
            appended.append(len(ticks))
            sess.append("turn-ended")
        else:
            return len(ticks) > appended[0]
        return False
    deadline = time.monotonic() + 30
    nudgewatch.watch(crew, ticks.append, warn=lambda msg: None, stop=stop)
    assert (looks, appended, len(ticks)) == ([1, 1], [1], 2), "a pass for the wake paths' files"


def test_an_aside_cannot_be_scheduled_and_an_existing_schedule_disarms(crew, tmux, tmp_path):
    sess, pane = agent(crew, tmux, "chat")
    sid = add("--session", "chat", "--every", "60", "--message", "/aside-done")
    sess.update_meta(kind="aside", exempt=True)       # it became an aside after scheduling
    r = cmd("nudge-add", "--session", "chat", "--every", "60", "--message", "go on", "--replace")
    assert r.returncode == 1 and "is an aside" in r.stderr
    make_due(crew, sid)
    tick()
    assert not sched(crew, sid)["armed"]
    assert "captain-done" not in kinds(sess) and "/aside-done" not in tmux.screen(pane)


def nudge_column(name):
    """crew-top --once's NUDGE cell for session *name*."""
    frame = cmd("crew-top", "--once", check=True).stdout.splitlines()
    header = frame[0].split()
    row = next(line.split() for line in frame[1:] if line.split()[:1] == [name])
    return row[header.index("NUDGE")] + (" " + row[header.index("NUDGE") + 1]
                                          if row[header.index("NUDGE")] == "in" else "")


def test_the_view_says_due_exactly_when_the_tick_acts(crew):
    """Issue 30.10: a hand-edited base.mono far ahead; crew-top said `due`
    and nudge-tick never delivered (two computations of "due")."""
    cmd("session-add", "w1", check=True)
    sid = add("--session", "w1", "--every", "60", "--message", "go on")
    path = os.path.join(crew.root, "nudges", sid)
    s = json.load(open(path))
    s["base"]["mono"] += 10 ** 9                     # the hand edit: decades ahead
    replace(path, json.dumps(s))
    assert nudge_column("w1") == "in 1m"             # the tick restarts the floor from now
    assert tick() == ""
    after = sched(crew, sid)
    assert (after["armed"], after["attempts"]) == (True, 0)
    assert after["base"]["mono"] < s["base"]["mono"] - 10 ** 8
    assert nudge_column("w1") in ("in 1m", "in 59s", "in 58s")
    make_due(crew, sid)
    assert nudge_column("w1") == "due"
    tick()
    acted = sched(crew, sid)                           # the tick acted: no pane, so it disarmed
    assert (acted["armed"], acted["last_outcome"]) == (False, "disarmed")
    assert nudge_column("w1").startswith("disarmed:")
