"""Fault isolation (issue 12, findings 10-12): a stuck lock holder, inotify
exhausted or missing, a watcher whose directory is replaced. Real flock(1)
holders, real stopped processes, real inotify instances, real processes."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import REPO, cmd, wait_for
from crewfile import spool
from crewfile.logfile import TailStats
from crewfile.sessions import Session, register

LIB = os.path.join(REPO, "lib")


def records(sess):
    return [(r.kind, r.text) for r in sess.last_records(1000, TailStats())]


class Holder:
    """`flock LOCK sleep 600`: a shell writer that hangs with the lock held."""

    def __init__(self, path):
        self.proc = subprocess.Popen(["flock", path, "sleep", "600"], start_new_session=True)
        self.path = path
        wait_for(self._held, what=f"flock(1) holding {path}")

    def _held(self):
        from crewfile.locks import is_held
        return is_held(self.path)

    def stop(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)     # flock(1) and the sleep holding its fd
        except ProcessLookupError:
            pass
        self.proc.wait()


@pytest.fixture
def holders():
    made = []

    def hold(path):
        h = Holder(path)
        made.append(h)
        return h
    yield hold
    for h in made:
        h.stop()


def hook(event, session, timeout=15, **fields):
    payload = {"hook_event_name": event, "session_id": "agent-1", **fields}
    return cmd("crew-hook", input=json.dumps(payload), env={"CREWFILE_SESSION": session},
               timeout=timeout)


def test_finding10_stuck_lock_hook_keeps_records_in_order_exactly_once(crew, holders):
    """A hook whose session lock is held by a hung shell writer returns (well
    within Claude Code's 10 s hook timeout: the subprocess timeout fails the
    test otherwise), names the holder, and loses nothing: once the lock frees
    every record is in the log, in order, once."""
    sess = register(crew, "a")
    holder = holders(sess.lock_path)
    out = hook("UserPromptSubmit", "a", prompt="first")
    assert out.returncode == 0
    assert f"held by pid {holder.proc.pid} (flock)" in out.stderr
    assert len(out.stderr.splitlines()) == 1
    assert hook("Stop", "a").returncode == 0
    assert hook("UserPromptSubmit", "a", prompt="second").returncode == 0
    assert records(sess) == [("registered", "kind=crew")]      # held up, not lost
    holder.stop()
    want = [("registered", "kind=crew"), ("captain", "first"), ("turn-started", ""),
            ("turn-ended", ""), ("captain", "second"), ("turn-started", "")]
    wait_for(lambda: records(sess) == want, what="the flusher to append the spool")
    wait_for(lambda: not spool._entries(spool.spool_dir(sess.dir)), what="an empty spool")
    sess.append("idle")                       # the next writer appends no repeat
    assert records(sess) == want + [("idle", "")]


def test_finding10_stopped_holder_is_named_and_the_next_writer_flushes(crew, tmp_path):
    sess = register(crew, "a")
    code = ("import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR);"
            " fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); os.kill(os.getpid(), 19)")
    proc = subprocess.Popen([sys.executable, "-c", code, sess.lock_path], stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"held\n"
        out = hook("Stop", "a")
        assert out.returncode == 0
        assert f"held by pid {proc.pid} (python" in out.stderr and ", stopped)" in out.stderr
    finally:
        proc.kill()
        proc.wait()
    wait_for(lambda: ("turn-ended", "") in records(sess), what="the kept turn-ended")


def _live_agent(crew, tmux, name, cwd):
    from test_nudge import agent
    return agent(crew, tmux, name, cwd=cwd)


def test_finding10_nudge_tick_skips_a_stuck_session_and_goes_on(crew, tmux, tmp_path, holders):
    from test_nudge import add, make_due, nudge_records
    a, _ = _live_agent(crew, tmux, "a", str(tmp_path / "ta"))
    b, _ = _live_agent(crew, tmux, "b", str(tmp_path / "tb"))
    sa = add("--session", "a", "--every", "600", "--message", "go on")
    sb = add("--session", "b", "--every", "600", "--message", "go on")
    make_due(crew, sa)
    make_due(crew, sb)
    holder = holders(a.lock_path)
    out = cmd("nudge-tick", timeout=30)
    assert out.returncode == 0, out.stderr
    lines = {line.split()[1]: line for line in out.stdout.splitlines()}
    assert f"a refused: lock-stuck: {a.lock_path} is held by pid {holder.proc.pid}" in lines[sa]
    assert "b delivered" in lines[sb]
    assert nudge_records(b) == [("nudge", f"{sb} attempt 1/100: delivered")]
    assert len(out.stderr.splitlines()) == 1 and "spool" in out.stderr   # the refusal record, kept
    holder.stop()
    wait_for(lambda: [k for k, _ in nudge_records(a)] == ["nudge-refused"],
             what="the kept refusal record")


def test_finding10_wake_send_keeps_wakes_while_the_primary_lock_is_stuck(crew, holders):
    register(crew, "boss", kind="primary")
    register(crew, "w1")
    boss = Session(crew, "boss")
    holder = holders(boss.lock_path)
    lines = "".join(f"2026-11-30T10:00:0{i}.000Z w1 turn-ended: n{i}\n" for i in range(5))
    out = cmd("wake-send", "boss", "--quiet", "--window", "0.01", input=lines, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("\n") == 1 and f"held by pid {holder.proc.pid}" in out.stderr
    holder.stop()
    inbox = os.path.join(boss.dir, "inbox")

    def texts():
        try:
            return [line.split(" ", 3)[3] for line in open(inbox).read().splitlines()]
        except FileNotFoundError:
            return []
    wait_for(lambda: len(texts()) == 5, what="five kept wakes")
    assert texts() == [line for line in lines.splitlines()]


def test_finding10_spool_recovery_after_a_killed_flusher_is_exactly_once(crew):
    """A flusher killed after its write but before removing the entry (and
    one killed mid-write) leave a journal; the next holder neither doubles
    nor loses the record."""
    sess = register(crew, "a")
    d = spool.spool_dir(sess.dir)
    os.makedirs(d)
    before = os.path.getsize(sess.status_path)
    ino = os.stat(sess.status_path).st_ino
    line = b"2026-11-30T10:00:00.000Z note: kept\n"
    entry = os.path.join(d, "00000000000000000001.1.1.status")
    with open(entry, "wb") as f:
        f.write(line)
    with open(os.path.join(d, spool.JOURNAL), "w") as f:
        json.dump({"entry": os.path.basename(entry), "ino": ino, "off": before}, f)
    with open(sess.status_path, "ab") as f:          # the write landed, then the kill
        f.write(line)
    sess.append("idle")
    assert [k for k, _ in records(sess)] == ["registered", "note", "idle"]
    # Killed mid-write: half the entry landed.
    before = os.path.getsize(sess.status_path)
    with open(entry, "wb") as f:
        f.write(line)
    with open(os.path.join(d, spool.JOURNAL), "w") as f:
        json.dump({"entry": os.path.basename(entry), "ino": ino, "off": before}, f)
    with open(sess.status_path, "ab") as f:
        f.write(line[:10])
    sess.append("idle")
    assert [k for k, _ in records(sess)] == ["registered", "note", "idle", "note", "idle"]
    assert os.listdir(d) == []
