"""crew-watch against what a log may hold (issue 30): a line far too long
written while it follows, records dated ahead of its clock, a backlog of
many megabytes beside a session with something fresh to say."""
import time

from crewfile.core import records
from crewfile.session.sessions import Session, register
from test_watch import at, step_until, watcher


def test_a_10_mb_line_appended_while_following_is_said_once(crew):
    register(crew, "w1")
    w, out = watcher(crew)
    w.begin()
    piece = b"x" * 65536
    with open(Session(crew, "w1").status_path, "ab") as log:
        log.write(records.format_line(records.timestamp(0), "note", "").encode()[:25])
        for _ in range(160):                    # 10 MiB, read as it grows
            log.write(piece)
            log.flush()
            w.step(max_wait=0)
        log.write(b"\n")
    Session(crew, "w1").append("note", "after")
    step_until(w, lambda: out.lines())
    assert [l.split(" ", 2)[2] for l in out.lines()] == ["note: after"]
    path = Session(crew, "w1").status_path
    assert out.warnings == [f"w1: {path}: skipped an overlong line"]
    w.close()


def test_a_record_dated_in_the_future_still_goes_stale(crew):
    """Its age is measured from when crew-watch read it, on its own clock."""
    register(crew, "w1")
    w, out = watcher(crew, stale_after=0.3)
    w.begin()
    at(crew, "w1", time.time() + 3600, "turn-started")
    step_until(w, lambda: len(out.lines()) == 2)
    assert [l.split(" ")[2] for l in out.lines()] == ["turn-started", "stale:"]
    w.close()


def test_a_clock_set_back_does_not_hold_stale_off(crew):
    """The watcher's clock an hour behind the record's: as if set back after it."""
    register(crew, "w1")
    w, out = watcher(crew, stale_after=0.3, now=lambda: time.time() - 3600)
    w.begin()
    Session(crew, "w1").append("turn-started")
    step_until(w, lambda: len(out.lines()) == 2)
    assert [l.split(" ")[2] for l in out.lines()] == ["turn-started", "stale:"]
    stamp = out.lines()[1].split(" ")[0]
    assert stamp < out.lines()[0].split(" ")[0]       # stamped on the watcher's clock
    w.close()


def _backlog(crew, name, size):
    """*size* bytes of valid records appended to NAME's log as a shell
    writer appends them: no lock, no rotation. Returns how many."""
    line = records.format_line(records.timestamp(time.time() - 3600), "note", "x" * 40).encode()
    n = size // len(line)
    with open(Session(crew, name).status_path, "ab") as log:
        log.write(line * n)
    return n


def test_a_backlog_is_read_a_round_at_a_time_and_never_delays_another_session(crew):
    """8 MB waiting in w1: every write is bounded (memory does not follow the
    log's size), and w2's fresh record goes out at the next step, long before
    w1's backlog is done."""
    register(crew, "w1")
    register(crew, "w2")
    w, out = watcher(crew, from_start=True)
    n = _backlog(crew, "w1", 8 << 20)
    w.begin()
    Session(crew, "w2").append("problem", "fresh")
    w.step(max_wait=0)
    lines = out.lines()
    assert lines[-1].split(" ", 1)[1] == "w2 problem: fresh"
    assert sum(1 for l in lines if " w1 note: " in l) < n / 4
    while w.backlog:
        w.step(max_wait=0)
    notes = [l for l in out.lines() if " w1 note: " in l]
    assert len(notes) == n and len(set(notes)) == 1
    assert max(len(c) for c in out.chunks) < 1 << 20
    w.close()


def test_crew_watch_once_writes_a_backlog_in_bounded_rounds(crew):
    register(crew, "w1")
    w, out = watcher(crew, from_start=True)
    n = _backlog(crew, "w1", 4 << 20)
    w.run_once()
    assert sum(1 for l in out.lines() if " w1 note: " in l) == n
    assert len(out.chunks) > 4 and max(len(c) for c in out.chunks) < 1 << 20

