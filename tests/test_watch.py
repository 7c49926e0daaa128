"""crew-watch: event lines, the start-up race, queue overflow, rotation,
cursor restarts, sessions coming and going, stale and lost."""
from concurrent.futures import ThreadPoolExecutor
import json
import os
import random
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time

import pytest

from conftest import BIN, REPO, wait_for
from crewfile.core import logwrite, records
from crewfile.core.paths import Crew
from crewfile.session.sessions import Session, register
from crewfile.wake.watch import Watcher


class Out:
    """Collects what a Watcher writes; lines() as text."""

    def __init__(self):
        self.chunks, self.warnings = [], []

    def __call__(self, data):
        self.chunks.append(data)

    def lines(self):
        return b"".join(self.chunks).decode().splitlines()

    def kinds(self):
        return [(l.split(" ")[1], l.split(" ")[2].rstrip(":")) for l in self.lines()]


def catches_sigterm(pid):
    """True once the process has a handler for SIGTERM (/proc/PID/status SigCgt)."""
    with open(f"/proc/{pid}/status") as f:
        mask = next(l for l in f if l.startswith("SigCgt:")).split()[1]
    return bool(int(mask, 16) & (1 << (signal.SIGTERM - 1)))


def watcher(crew, **kw):
    out = Out()
    w = Watcher(crew, out=out, warn=out.warnings.append, **kw)
    return w, out


def step_until(w, pred, timeout=10):
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError("the watcher never produced what was expected")
        w.step(max_wait=0.05)


def at(crew, name, t, kind, text=""):
    """Append a record with an explicit time."""
    s = Session(crew, name)
    logwrite.append(s.status_path, s.lock_path, [records.format_line(records.timestamp(t), kind, text)])


# -- format and modes ----------------------------------------------------------

def test_event_line_is_the_record_with_the_session_inserted(crew, run):
    register(crew, "w1")
    Session(crew, "w1").append("blocked", "needs a\nsecond line $(x)")
    p = run("crew-watch", "--from-start", "--once")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert [l.split(" ", 2)[1:] for l in lines] == [
        ["w1", "registered: kind=crew"], ["w1", "blocked: needs a\\nsecond line $(x)"]]
    log = open(Session(crew, "w1").status_path).read().splitlines()
    assert [l[:24] + l[24:] for l in log] == [l[:24] + l[24 + 3:] for l in lines]


def test_once_without_from_start_starts_at_the_end(crew, run):
    register(crew, "w1")
    Session(crew, "w1").append("idle")
    p = run("crew-watch", "--once")
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "")


def test_json_lines_one_object_per_event_text_unescaped(crew, run):
    register(crew, "w1")
    Session(crew, "w1").append("blocked", "needs a\nsecond line")
    p = run("crew-watch", "--from-start", "--once", "--json-lines")
    assert p.returncode == 0, p.stderr
    objs = [json.loads(l) for l in p.stdout.splitlines()]
    assert [(o["session"], o["kind"], o["text"]) for o in objs] == [
        ("w1", "registered", "kind=crew"), ("w1", "blocked", "needs a\nsecond line")]
    plain = run("crew-watch", "--from-start", "--once").stdout.splitlines()
    assert [o["ts"] for o in objs] == [l.split()[0] for l in plain]


def test_from_start_replays_rotated_files_oldest_first(crew, run, monkeypatch):
    monkeypatch.setenv("CREWFILE_ROTATE_BYTES", "16384")
    register(crew, "w1")
    s = Session(crew, "w1")
    for i in range(600):
        s.append("note", f"n{i:04d} " + "x" * 60)
    assert os.path.exists(s.status_path + ".2")
    p = run("crew-watch", "--from-start", "--once")
    notes = [l.split(": ", 1)[1][:5] for l in p.stdout.splitlines() if " note: " in l]
    assert notes == [f"n{i:04d}" for i in range(600)]


def test_from_start_skips_an_older_log_file_that_is_a_link_and_reads_the_rest(crew, run):
    # Found by test_fuzz_crew: a `status.1` replaced by a link made the whole
    # session a problem, and its records in `status` were never told.
    register(crew, "w1")
    s = Session(crew, "w1")
    s.append("blocked", "still told")
    os.symlink("meta", s.status_path + ".1")
    p = run("crew-watch", "--from-start", "--once")
    assert p.returncode == 0, p.stderr
    said = [l for l in p.stdout.splitlines() if " problem: " in l]
    assert len(said) == 1 and "status.1: a symlink is not followed: skipped" in said[0], p.stdout
    assert any(l.endswith(" w1 blocked: still told") for l in p.stdout.splitlines()), p.stdout
    assert p.stderr.count("status.1") == 1, p.stderr


def test_bad_options(crew, run):
    p = run("crew-watch", "--stale", "0")
    assert p.returncode == 2 and p.stderr.startswith("crew-watch: bad --stale '0'")
    open(crew.root + ".cur", "w").write("not json")
    p = run("crew-watch", "--once", "--cursor", crew.root + ".cur")
    assert p.returncode == 2 and "is not a crew-watch cursor" in p.stderr


def test_malformed_and_partial_lines(crew):
    register(crew, "w1")
    s = Session(crew, "w1")
    w, out = watcher(crew)
    w.begin()
    with open(s.status_path, "ab") as f:
        f.write(b"garbage here\n2026-11-29T22:01:17.123Z idle\n2026-11-29T22:01:18.000Z pro")
    step_until(w, lambda: len(out.lines()) == 1)
    assert out.warnings and "malformed" in out.warnings[0]
    with open(s.status_path, "ab") as f:
        f.write(b"blem: half then whole\n")
    step_until(w, lambda: len(out.lines()) == 2)
    assert out.lines()[1] == "2026-11-29T22:01:18.000Z w1 problem: half then whole"
    w.close()


def test_a_log_put_back_after_a_link_stood_in_its_place_is_read_on_not_again(crew, tmp_path):
    """status moved aside and a link put in its place, then moved back: said
    as w1's problem while it cannot be read, then read on from where it was:
    no record of it is emitted twice, and the rotation warning is said once."""
    register(crew, "w1")
    s = Session(crew, "w1")
    for i in range(3):
        s.append("turn-ended", f"old {i}")
    w, out = watcher(crew, from_start=True, probe_every=0.05)
    w.begin()
    step_until(w, lambda: len(out.lines()) == 4)
    os.rename(s.status_path, s.status_path + ".aside")
    os.symlink(str(tmp_path / "elsewhere"), s.status_path)
    step_until(w, lambda: any("a symlink is not followed" in line for line in out.lines()))
    for _ in range(5):
        w.step(max_wait=0.06)                   # probes: it is read again, in vain
    os.unlink(s.status_path)
    os.rename(s.status_path + ".aside", s.status_path)
    s.append("turn-ended", "new")
    step_until(w, lambda: out.lines()[-1].endswith("turn-ended: new"))
    emitted = [line for line in out.lines() if "turn-ended: " in line]
    assert [line.split(" ", 2)[2] for line in emitted] == [
        "turn-ended: old 0", "turn-ended: old 1", "turn-ended: old 2", "turn-ended: new"]
    assert sum("rotated past" in warning for warning in out.warnings) <= 1
    w.close()


# -- the start-up race -------------------------------------------------------------

WRITER = r"""
import sys, time
sys.path.insert(0, sys.argv[1])
from crewfile.core.paths import Crew
from crewfile.session.sessions import Session
for line in sys.stdin:
    root, name, delay, marker = line.split()
    end = time.perf_counter() + float(delay)
    while time.perf_counter() < end:
        pass
    Session(Crew(root), name).append("note", marker)
    sys.stdout.write("ok\n"); sys.stdout.flush()
"""


def test_a_record_written_while_the_watcher_starts_is_emitted_1000_trials(tmp_path):
    """A separate process appends at a random moment of start-up (subscribe,
    cursor, scan), half with a cursor (the output must be exactly the new
    record: no gap, no replay), half from the start (exactly once)."""
    a, b = Crew(str(tmp_path / "a")), Crew(str(tmp_path / "b"))
    register(a, "w")
    register(b, "w")
    cursor = str(tmp_path / "cursor")
    Watcher(a, cursor=cursor, from_start=True, out=lambda d: None).run_once()
    writer = subprocess.Popen([sys.executable, "-c", WRITER, os.path.join(REPO, "lib")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    rng = random.Random(1)
    closer = ThreadPoolExecutor(16)     # closing an inotify fd takes the kernel ~8 ms
    closing = []
    try:
        for i in range(1000):
            crew, kw = (a, {"cursor": cursor}) if i % 2 else (b, {"from_start": True})
            if not i % 2:
                os.truncate(Session(b, "w").status_path, 0)     # keep the replay short
            marker = f"m{i}"
            w, out = watcher(crew, **kw)
            writer.stdin.write(f"{crew.root} w {rng.uniform(0, 0.0008):.6f} {marker}\n".encode())
            writer.stdin.flush()
            w.begin()
            assert writer.stdout.readline() == b"ok\n"
            try:
                step_until(w, lambda: any(l.endswith(" " + marker) for l in out.lines()), timeout=3)
            except AssertionError:
                raise AssertionError(f"trial {i}: {marker} never emitted; got {out.lines()}")
            closing.append(closer.submit(w.close))
            if len(closing) > 64:       # stay under the per-user limit of inotify instances
                closing.pop(0).result()
            got = [l for l in out.lines() if l.endswith(" " + marker)]
            assert len(got) == 1, (i, out.lines())
            if i % 2:
                assert out.lines() == got, f"trial {i}: replayed {out.lines()}"
    finally:
        writer.stdin.close()
        writer.wait()
        closer.shutdown()


@pytest.mark.parametrize("moment", ["before-scan", "after-scan"])
def test_subscribe_before_scan_both_windows(crew, moment):
    """Deterministic: a record lands right after subscribing and before the
    scan, or right after the scan and before the first wait."""
    register(crew, "w")
    w, out = watcher(crew, from_start=True)
    scan = w._scan

    def hooked():
        if moment == "before-scan":
            Session(crew, "w").append("note", "race")
            register(crew, "new")
        events = scan()
        if moment == "after-scan":
            Session(crew, "w").append("note", "race")
            register(crew, "new")
        return events
    w._scan = hooked
    w.begin()
    w._scan = scan
    step_until(w, lambda: len(out.lines()) == 3, timeout=3)
    assert sorted(out.kinds()) == [("new", "registered"), ("w", "note"), ("w", "registered")]
    w.close()


# -- overflow, rotation ----------------------------------------------------------------

def test_inotify_queue_overflow_rescans_every_record_exactly_once(crew):
    limit = int(open("/proc/sys/fs/inotify/max_queued_events").read())
    register(crew, "a")
    register(crew, "b")
    w, out = watcher(crew)
    w.begin()
    sa, sb = Session(crew, "a"), Session(crew, "b")
    n = limit // 2 + 1000          # alternating sessions: consecutive events never merge
    for i in range(n):
        sa.append("note", f"a{i}")
        sb.append("note", f"b{i}")
    step_until(w, lambda: len(out.lines()) >= 2 * n, timeout=30)
    w.step(max_wait=0.1)
    assert w.overflows >= 1, "the flood did not overflow the queue: the test proves nothing"
    texts = [l.rsplit(" ", 1)[1] for l in out.lines()]
    assert sorted(texts) == sorted([f"a{i}" for i in range(n)] + [f"b{i}" for i in range(n)])
    assert [t for t in texts if t[0] == "a"] == [f"a{i}" for i in range(n)]
    w.close()


def test_rotation_mid_stream_no_lost_or_doubled_event(crew, monkeypatch):
    monkeypatch.setenv("CREWFILE_ROTATE_BYTES", "16384")
    monkeypatch.setenv("CREWFILE_ROTATE_KEEP", "3")
    register(crew, "w")
    s = Session(crew, "w")
    w, out = watcher(crew)
    w.begin()
    stop = threading.Event()

    def follow():
        while not stop.is_set():
            w.step(max_wait=0.02)
    t = threading.Thread(target=follow)
    t.start()
    try:
        n = 2000
        for i in range(n):
            s.append("note", f"{i:05d} " + "y" * 80)
            if i % 100 == 0:           # a watcher that keeps up (never more than ~2 files behind)
                wait_for(lambda: len(out.lines()) >= i - 200, what="the watcher to keep up")
        wait_for(lambda: len(out.lines()) >= n, what="all records")
    finally:
        stop.set()
        t.join()
    w.close()
    got = [l.split(": ", 1)[1][:5] for l in out.lines()]
    assert got == [f"{i:05d}" for i in range(n)]
    assert os.path.exists(s.status_path + ".3") and not out.warnings


def test_rotations_while_not_reading_are_finished_in_order(crew, monkeypatch):
    monkeypatch.setenv("CREWFILE_ROTATE_BYTES", "16384")
    register(crew, "w")
    s = Session(crew, "w")
    w, out = watcher(crew)
    w.begin()
    for i in range(100):
        s.append("note", f"{i:05d} " + "z" * 80)
    w.step(max_wait=0.1)
    ino = os.stat(s.status_path).st_ino
    for i in range(100, 500):                 # several rotations before the next read
        s.append("note", f"{i:05d} " + "z" * 80)
    assert os.stat(s.status_path + ".2").st_ino == ino or os.stat(s.status_path + ".3").st_ino == ino
    step_until(w, lambda: len(out.lines()) >= 500)
    assert [l.split(": ", 1)[1][:5] for l in out.lines()] == [f"{i:05d}" for i in range(500)]
    w.close()


# -- cursor -------------------------------------------------------------------------------

def test_cursor_restart_continues_exactly_after_the_last_event(crew, run, tmp_path):
    cursor = str(tmp_path / "cur")
    register(crew, "w1")
    s = Session(crew, "w1")
    s.append("turn-started")
    env = dict(os.environ, CREWFILE_DIR=crew.root)
    proc = subprocess.Popen([sys.executable, os.path.join(BIN, "crew-watch"), "--from-start",
                             "--cursor", cursor], stdout=subprocess.PIPE, env=env)
    first = [proc.stdout.readline(), proc.stdout.readline()]
    s.append("turn-ended")
    first.append(proc.stdout.readline())
    wait_for(lambda: os.path.exists(cursor) and
             json.load(open(cursor))["sessions"]["w1"]["off"] == os.path.getsize(s.status_path),
             what="the cursor saved")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(10) == 0
    assert [l.split()[2] for l in first] == [b"registered:", b"turn-started", b"turn-ended"]
    # while it is down: more records, a new session
    s.append("idle")
    register(crew, "w2")
    Session(crew, "w2").append("blocked", "db")
    p = run("crew-watch", "--once", "--cursor", cursor)
    assert [l.split(" ", 1)[1] for l in p.stdout.splitlines()] == [
        "w1 idle", "w2 registered: kind=crew", "w2 blocked: db"]
    assert run("crew-watch", "--once", "--cursor", cursor).stdout == ""


def test_cursor_survives_a_rotation_while_down(crew, run, tmp_path, monkeypatch):
    monkeypatch.setenv("CREWFILE_ROTATE_BYTES", "16384")
    cursor = str(tmp_path / "cur")
    register(crew, "w")
    s = Session(crew, "w")
    for i in range(50):
        s.append("note", f"{i:05d} " + "q" * 80)
    assert len(run("crew-watch", "--from-start", "--once", "--cursor", cursor).stdout.splitlines()) == 51
    for i in range(50, 400):
        s.append("note", f"{i:05d} " + "q" * 80)
    got = run("crew-watch", "--once", "--cursor", cursor).stdout.splitlines()
    assert [l.split(": ", 1)[1][:5] for l in got] == [f"{i:05d}" for i in range(50, 400)]


# -- sessions coming and going ------------------------------------------------------------------

def test_sessions_appearing_and_ending_while_it_runs(crew):
    register(crew, "old")
    w, out = watcher(crew)
    w.begin()
    register(crew, "new")
    Session(crew, "new").append("turn-started")
    step_until(w, lambda: len(out.lines()) == 2)
    Session(crew, "new").append("ended", "exit")
    Session(crew, "old").append("closed")
    step_until(w, lambda: len(out.lines()) == 4)
    assert out.kinds() == [("new", "registered"), ("new", "turn-started"),
                           ("new", "ended"), ("old", "closed")]
    # a session directory removed by hand: forgotten, no crash; re-created: read anew
    shutil.rmtree(crew.session_dir("new"))
    w.step(max_wait=0.1)
    register(crew, "new")
    step_until(w, lambda: len(out.lines()) == 5)
    assert out.kinds()[-1] == ("new", "registered")
    w.close()


def test_poll_mode_follows_without_inotify(crew):
    register(crew, "w")
    w, out = watcher(crew, poll=0.05)
    w.begin()
    assert w.dirwatch is None
    Session(crew, "w").append("blocked")
    register(crew, "w2")
    step_until(w, lambda: len(out.lines()) == 2)
    assert sorted(out.kinds()) == [("w", "blocked"), ("w2", "registered")]


# -- synthesized: stale, lost ------------------------------------------------------------------

def test_stale_from_a_replayed_silence(crew, run):
    register(crew, "w")
    t0 = time.time() - 7200
    at(crew, "w", t0, "turn-started")
    at(crew, "w", t0 + 700, "turn-ended")
    at(crew, "w", t0 + 800, "idle")
    at(crew, "w", t0 + 2000, "turn-started")        # long idle while not generating: not stale
    at(crew, "w", t0 + 2100, "turn-ended")
    p = run("crew-watch", "--from-start", "--once", "--stale", "600")
    stale = [l for l in p.stdout.splitlines() if " stale:" in l]
    assert stale == [f"{records.timestamp(t0 + 600)} w stale: silent for 10m since turn-started"]
    lines = p.stdout.splitlines()
    assert lines[lines.index(stale[0]) + 1].split()[2] == "turn-ended"    # in time order


def test_stale_live_once_per_silence(crew):
    register(crew, "w")
    s = Session(crew, "w")
    w, out = watcher(crew, stale_after=0.3)
    w.begin()
    s.append("turn-started")
    step_until(w, lambda: ("w", "stale") in out.kinds())
    end = time.monotonic() + 0.5
    while time.monotonic() < end:
        w.step(max_wait=0.05)
    assert out.kinds().count(("w", "stale")) == 1
    s.append("note", "still working")                 # a new silence
    step_until(w, lambda: out.kinds().count(("w", "stale")) == 2)
    s.append("turn-ended")
    end = time.monotonic() + 0.5
    while time.monotonic() < end:
        w.step(max_wait=0.05)
    assert out.kinds().count(("w", "stale")) == 2
    w.close()


def test_lost_when_the_tmux_window_is_killed(crew, tmux):
    pane = tmux.new_window("sleep 600", name="w")
    pane_e = tmux.new_window("sleep 600", name="e")
    tmux.new_window("sleep 600", name="keep")          # the server stays up
    register(crew, "w", tmux=pane)
    register(crew, "e", tmux=pane_e)
    Session(crew, "w").append("turn-started")
    Session(crew, "e").append("ended", "exit")
    w, out = watcher(crew, probe_every=0.1)
    w.begin()
    w.step(max_wait=0.2)
    assert out.lines() == []
    tmux("kill-window", "-t", pane)
    tmux("kill-window", "-t", pane_e)
    step_until(w, lambda: ("w", "lost") in out.kinds())
    end = time.monotonic() + 0.5
    while time.monotonic() < end:
        w.step(max_wait=0.1)
    assert out.kinds() == [("w", "lost")]
    assert out.lines()[0].endswith(f"w lost: tmux pane {pane} is gone")
    w.close()


def test_lost_is_not_repeated_after_a_restart_with_a_cursor(crew, tmux, tmp_path, run):
    pane = tmux.new_window("sleep 600", name="w")
    register(crew, "w", tmux=pane)
    tmux("kill-window", "-t", pane)
    cursor = str(tmp_path / "cur")
    p = run("crew-watch", "--once", "--cursor", cursor)
    assert p.stdout.split(" ", 1)[1].startswith(("w lost: no tmux server on ",
                                                  f"w lost: tmux pane {pane} is gone")), p
    assert run("crew-watch", "--once", "--cursor", cursor).stdout == ""


def test_sigterm_mid_stream_and_restarts_neither_lose_nor_repeat(crew, tmp_path):
    """A writer floods; the watcher is stopped with SIGTERM at random points
    and restarted from its cursor four times: the outputs joined are every
    record exactly once, in order."""
    register(crew, "w")
    cursor = str(tmp_path / "cur")
    env = dict(os.environ, CREWFILE_DIR=crew.root, CREWFILE_ROTATE_BYTES="65536")
    n = 3000
    argv = [sys.executable, os.path.join(BIN, "crew-watch"), "--cursor", cursor]
    subprocess.run(argv + ["--from-start", "--once"], env=env, stdout=subprocess.DEVNULL, check=True)
    writer = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; sys.path.insert(0, %r)\n"
        "from crewfile.core.paths import Crew\nfrom crewfile.session.sessions import Session\n"
        "s = Session(Crew(%r), 'w')\n"
        "for i in range(%d):\n"
        "    s.append('note', '%%05d' %% i)\n"
        "    if i %% 50 == 0: time.sleep(0.005)\n") % (os.path.join(REPO, "lib"), crew.root, n)],
        env=env)
    got = []
    rng = random.Random(2)
    err = tmp_path / "err"
    # Deadlines, generous (a loaded machine: an interpreter's start-up can
    # take many seconds); not timing assertions.
    try:
        for _ in range(4):
            out = tmp_path / "out"
            with open(out, "wb") as f, open(err, "wb") as e:
                proc = subprocess.Popen(argv, env=env, stdout=f, stderr=e)
                # Before its handler exists the process has done nothing (the
                # interpreter is starting): signal it from then on, at a
                # random point in its stream.
                wait_for(lambda: catches_sigterm(proc.pid) or proc.poll() is not None,
                         timeout=120, what="crew-watch's SIGTERM handler")
                time.sleep(rng.uniform(0.0, 0.3))
                proc.send_signal(signal.SIGTERM)
                assert proc.wait(120) == 0, err.read_text()
            got += out.read_text().splitlines()
    finally:
        writer.wait(300)
    got += subprocess.run(argv + ["--once"], env=env, capture_output=True, text=True,
                          check=True).stdout.splitlines()
    assert [l.rsplit(" ", 1)[1] for l in got] == ["%05d" % i for i in range(n)]


def test_a_signal_whose_exception_was_lost_still_ends_the_step(crew):
    """The handler's KeyboardInterrupt can be lost (Python drops one raised
    inside a finalizer), and a signal caught just before poll(2) does not
    interrupt it: the byte the signal wrote to the wakeup pipe alone ends
    the wait and the step raises, as a handled stop does."""
    register(crew, "w")
    w, out = watcher(crew)
    r, signalled = os.pipe2(os.O_NONBLOCK)
    try:
        w.stop_fd = r
        w.begin()
        os.write(signalled, bytes([signal.SIGTERM]))
        with pytest.raises(KeyboardInterrupt):
            w.step(max_wait=1)      # without the pipe: a quiet return, no stop
        assert w.stop_after_batch
    finally:
        w.close()
        os.close(r)
        os.close(signalled)


def test_following_into_a_pipe_whose_reader_is_gone_exits_141_at_once(crew):
    """The next stage of a pipe died: crew-watch ends now (its supervisor
    restarts the pipe), not at the next record, which may never come."""
    register(crew, "w")
    env = dict(os.environ, CREWFILE_DIR=crew.root)
    r, w = os.pipe()
    proc = subprocess.Popen([sys.executable, os.path.join(BIN, "crew-watch")], env=env,
                            stdout=w, stderr=subprocess.PIPE)
    os.close(w)
    os.close(r)             # no record is ever written: only the reader's end can end it
    try:
        assert proc.wait(120) == 141
        assert proc.stderr.read() == b""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()


def test_a_cursor_named_as_a_device_or_a_link_is_never_renamed_over(crew, run, tmp_path):
    """--cursor names a path the user chose, read before it is ever written: a
    link or a device is refused there, and left as it was (as root, a rename
    onto /dev/null once replaced the node: crew-timeline's output, now
    written as the shell's `>` writes)."""
    register(crew, "w1")
    Session(crew, "w1").append("turn-started")
    target = tmp_path / "cursor.json"
    link = tmp_path / "cursor.link"
    os.symlink(target, link)
    p = run("crew-watch", "--from-start", "--once", "--cursor", str(link))
    assert (p.returncode, p.stderr) == (
        2, f"crew-watch: cursor {link}: {link}: a symlink is not followed\n")
    assert os.path.islink(link) and not os.path.lexists(target)
    if os.geteuid() != 0:
        pytest.skip("SKIPPED LOUDLY: mknod needs root; the device case is not tested")
    device = tmp_path / "null"
    os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))      # /dev/null's numbers
    before = os.lstat(device)
    p = run("crew-watch", "--from-start", "--once", "--cursor", str(device))
    assert (p.returncode, p.stderr) == (
        2, f"crew-watch: cursor {device}: {device}: not a regular file\n")
    after = os.lstat(device)
    assert stat.S_ISCHR(after.st_mode) and (after.st_ino, after.st_rdev) == (
        before.st_ino, before.st_rdev), p.stderr
