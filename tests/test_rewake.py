"""The keystroke-free wake's waiter (crew-hook --rewake, crewfile.wake.rewake)
and wake-send beside it, with real processes, flock and inotify (the real
Claude Code: tests/test_rewake_e2e.py)."""
import contextlib
import json
import os
import signal
import subprocess
import sys

from conftest import wait_for
from crewfile.core import locks, logfile, paths
from crewfile.session.delivery import DRAFT, UNCONFIRMED, Answer
from crewfile.session.sessions import Session, register
from crewfile.views import tokens
from crewfile.wake import announce, inbox
from crewfile.wake.wakesend import Sender

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOOK = os.path.join(REPO, "bin", "crew-hook")
TS = "2026-11-29T22:01:17.123Z"
SAID = "crewfile: 1 wake waiting from w1; run: inbox-drain boss"


def primary(crew, turn="turn-ended"):
    sess = register(crew, "boss", kind="primary")
    sess.append("turn-started")
    if turn:
        sess.append(turn)
    return Session(crew, "boss")


def waiter(crew, name="boss", wait=None, shell=False):
    """crew-hook --rewake as the CLI starts it (the payload on stdin)."""
    env = dict(os.environ, CREWFILE_DIR=crew.root, CREWFILE_SESSION=name)
    if wait is not None:
        env["CREWFILE_REWAKE_WAIT"] = str(wait)
    payload = json.dumps({"hook_event_name": "Stop", "session_id": "s-1"})
    argv = [sys.executable, HOOK, "--rewake"]
    if shell:   # a parent that is not the waiter: what the agent is to it
        argv = ["sh", "-c", " ".join(argv) + "; :"]
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env, text=True)
    p.stdin.write(payload)
    p.stdin.close()
    p.stdin = None
    return p


def finish(p, timeout=30):
    out, err = p.communicate(timeout=timeout)
    return p.returncode, out, err


def lock_path(crew):
    return os.path.join(crew.session_dir("boss"), paths.REWAKE_LOCK)


def holder_pid(crew):
    words = locks.holder(lock_path(crew))
    assert words.startswith("pid "), words
    return int(words.split()[1])


@contextlib.contextmanager
def lock_held(path):
    """The body runs while another process holds the flock on *path*; that
    process is killed and reaped after it, whatever happens."""
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, os, sys, time\n"
                               "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
                               "fcntl.flock(fd, fcntl.LOCK_EX)\ntime.sleep(600)", path])
    try:
        wait_for(lambda: locks.is_held(path), what=f"{path} held")
        yield
    finally:
        holder.kill()
        holder.wait()


def test_a_wake_is_announced_on_stderr_with_exit_2_and_stays_pending(crew):
    sess = primary(crew)
    p = waiter(crew)
    wait_for(lambda: announce.armed(sess), what="the waiter armed")
    nid = inbox.post(crew, "boss", "wake", f"{TS} w1 done: shipped")
    code, out, err = finish(p)
    assert (code, out, err) == (2, "", SAID + "\n")
    assert announce.announced(sess) == {nid}
    assert [n.id for n in inbox.pending(crew, "boss")] == [nid]     # read only by a drain
    assert not announce.armed(sess)
    # the turn it starts runs from now: wake-send types nothing into it
    newest = sess.last_records(1, logfile.TailStats())[-1]
    assert (newest.kind, newest.text) == ("turn-started", "rewake")


def test_any_other_session_returns_at_once(crew):
    register(crew, "w1", kind="crew")
    assert finish(waiter(crew, "w1")) == (0, "", "")


def test_a_second_waiter_returns_while_one_is_armed(crew):
    sess = primary(crew)
    first = waiter(crew)
    wait_for(lambda: announce.armed(sess), what="the waiter armed")
    assert finish(waiter(crew)) == (0, "", "")
    first.send_signal(signal.SIGTERM)
    assert finish(first) == (0, "", "")
    assert not announce.armed(sess)


def test_it_holds_while_a_turn_runs_and_ends_at_its_deadline(crew):
    sess = primary(crew, turn=None)                 # turn-started: generating
    inbox.post(crew, "boss", "wake", f"{TS} w1 done: shipped")
    assert finish(waiter(crew, wait=1)) == (0, "", "")
    assert announce.announced(sess) == set()
    sess.append("turn-ended")
    assert finish(waiter(crew, wait=1))[:2] == (2, "")


def test_it_holds_while_the_accounts_block_stands(crew):
    sess = primary(crew, turn="account-blocked")
    sess.append("account-blocked", "billing_error until -: Credit balance is too low")
    inbox.post(crew, "boss", "wake", f"{TS} w1 done: shipped")
    assert finish(waiter(crew, wait=1)) == (0, "", "")
    assert announce.announced(sess) == set()
    sess.append("account-blocked", "rate_limit until 2020-01-01T00:00:00.000Z: lifted")
    assert finish(waiter(crew, wait=1)) == (2, "", SAID + "\n")


def test_what_was_announced_is_not_announced_again(crew):
    sess = primary(crew)
    nid = inbox.post(crew, "boss", "wake", f"{TS} w1 done: shipped")
    announce.mark(sess, [nid])
    assert finish(waiter(crew, wait=1)) == (0, "", "")
    inbox.post(crew, "boss", "wake", f"{TS} w2 done: more")
    code, _, err = finish(waiter(crew, wait=5))
    assert code == 2 and err == "crewfile: 2 wakes waiting from w1, w2; run: inbox-drain boss\n"


def test_the_waiter_ends_with_its_agent(crew):
    sess = primary(crew)
    sh = waiter(crew, shell=True)
    wait_for(lambda: announce.armed(sess), what="the waiter armed")
    pid = holder_pid(crew)
    assert pid != sh.pid
    os.kill(sh.pid, signal.SIGKILL)     # the agent (its parent here) dies, no signal to it
    sh.wait(timeout=30)
    sh.stdout.close()
    sh.stderr.close()
    wait_for(lambda: not os.path.exists(f"/proc/{pid}") or
             open(f"/proc/{pid}/stat").read().split(") ")[1][0] == "Z", what="the waiter gone")
    assert not announce.armed(sess)


def typing_into(said):
    """A deliver for Sender that always types, each text appended to *said*."""
    return lambda sess, text: (said.append(text) or True, Answer("delivered"))


def shipped(crew, deliver):
    """wake-send for the boss, its clock stopped, typing with *deliver*, one
    wake (w1 done: shipped) taken and flushed to the inbox."""
    s = Sender(crew, "boss", clock=lambda: 0.0, deliver=deliver)
    s.wake(f"{TS} w1 done: shipped")
    s.flush()
    return s


def test_wake_send_types_nothing_while_armed_and_types_once_it_is_not(crew):
    sess = primary(crew)
    said, logged = [], []
    s = Sender(crew, "boss", clock=lambda: 0.0, log=logged.append, deliver=typing_into(said))
    with lock_held(lock_path(crew)):
        s.wake(f"{TS} w1 done: shipped")
        assert s.flush()
        assert s.tick() is False and said == []
        assert s.tick() is False and said == []
        assert logged == ["boss's keystroke-free wake is armed: it announces 1 wake(s)"]
    assert s.tick() is True and said == [SAID]
    assert announce.announced(sess) == {n.id for n in inbox.pending(crew, "boss")}


def test_wake_send_does_not_type_what_the_channel_announced(crew):
    sess = primary(crew)
    said = []
    s = shipped(crew, typing_into(said))
    announce.mark(sess, [n.id for n in inbox.pending(crew, "boss")])
    assert s.tick() is False and said == []


def typed_then(code, meanwhile):
    """A deliver for Sender: takes deliver.lock and types (as delivery.deliver
    does), lets go of it, runs *meanwhile* (what another process does next),
    then answers *code*: the order in which a waiter arming at the turn's end
    meets a typed announcement it could not see through deliver.lock."""
    def deliver(sess, text):
        with locks.hold(os.path.join(sess.dir, paths.DELIVER_LOCK), 0):
            pass                                # typed, Enter pressed
        meanwhile()
        return code == "delivered", Answer(code)
    return deliver


def test_a_typed_announcement_unconfirmed_is_not_announced_again_by_the_waiter(crew):
    """Enter pressed, the prompt line cleared, the typed turn's record late
    (unconfirmed): deliver.lock is let go while the primary's records still
    say idle. A waiter deciding then must see the typed announcement."""
    sess = primary(crew)
    said = []

    def waiter_decides():
        said.append(finish(waiter(crew, wait=1))[:2])   # one whole waiter, decided
    s = shipped(crew, typed_then(UNCONFIRMED, waiter_decides))
    assert s.tick() is False
    assert said == [(0, "")]                    # the waiter announced nothing
    nid = inbox.pending(crew, "boss")[0].id
    assert announce.announced(sess) == {nid}
    assert finish(waiter(crew, wait=1))[:2] == (0, "")      # nor does the next one


def test_a_typed_announcement_refused_leaves_the_wakes_to_the_waiter(crew):
    """The other way round: the typing refused (a draft), a waiter that armed
    meanwhile announces once the typed attempt is over: no wake is lost."""
    sess = primary(crew)
    armed = []

    def waiter_arms():
        armed.append(waiter(crew, wait=60))
        wait_for(lambda: announce.armed(sess), what="the waiter armed")
    s = shipped(crew, typed_then(DRAFT, waiter_arms))
    try:
        assert s.tick() is False
        assert finish(armed[0]) == (2, "", SAID + "\n")
    finally:
        for p in armed:                         # a waiter not finished: killed, reaped
            p.kill()
            p.wait()
    assert announce.announced(sess) == {n.id for n in inbox.pending(crew, "boss")}


def test_wake_send_decides_nothing_while_the_waiter_decides(crew):
    """announce.lock held (here by another process, as the waiter holds it while it
    decides and records): wake-send types nothing, and types once it is free."""
    primary(crew)
    said = []
    s = shipped(crew, typing_into(said))
    path = os.path.join(crew.session_dir("boss"), paths.ANNOUNCE_LOCK)
    with lock_held(path):
        assert s.tick() is False and said == []
    assert s.tick() is True and said == [SAID]


def test_a_turn_the_waiter_woke_counts_as_a_wake_turn(tmp_path):
    """crew-top's wake share: the woken turn starts with Claude Code's task
    notification carrying the announcement (2.1.332's transcript, as seen in
    tests/test_rewake_e2e.py); a notification of anything else is no wake."""

    def prompt(text):
        return json.dumps({"type": "user", "message": {"role": "user", "content": text}},
                          separators=(",", ":"))        # as Claude Code writes it

    def msg(mid, n):
        return json.dumps({"type": "assistant", "message": {
            "id": mid, "role": "assistant", "content": [{"type": "text", "text": "ok"}],
            "usage": {"input_tokens": n, "output_tokens": 0}}}, separators=(",", ":"))

    def notification(said):
        return prompt("<task-notification>\n<summary>Stop hook feedback</summary>\n"
                      "</task-notification>\n<system-reminder>\nStop hook blocking error from"
                      f" command \"Stop\": {said}\n\n</system-reminder>")
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join([
        prompt("hello"), msg("a", 100),
        notification(SAID), msg("b", 10),
        prompt("captain"), msg("c", 1000),
        notification("background task 7 finished"), msg("d", 5000)]) + "\n")
    t = tokens.read(str(path))
    assert (t.total, t.wake) == (6110, 10)
