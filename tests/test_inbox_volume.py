"""A huge inbox costs a view what a small one does (issue 30, item 5).

A pending inbox of many megabytes: crew-status and crew-top count at most
inbox.COUNT_LIMIT bytes of it and say `N+`; the hook's Stop asks whether a
wake waits by reading up to the first one. What was drained is kept out of
the way, in inbox.read and its rotations, and is still known by its id, so
a wake replayed after a restart is not posted twice.
"""
import os

from crewfile.core import records
from crewfile.session.sessions import Session, register
from crewfile.wake import inbox


def fill(path, kind, n, size=200):
    """Append *n* notices of *kind* straight to *path*, as posts would."""
    line = records.format_line(records.timestamp(0), kind, "id " + "x" * size).encode()
    with open(path, "ab") as f:
        f.write(line * n)
    return len(line)


def test_a_count_reads_at_most_its_limit_and_says_there_is_more(crew):
    register(crew, "boss", kind="primary")
    path = os.path.join(Session(crew, "boss").dir, "inbox")
    width = fill(path, "wake", 1000)
    assert inbox.count(crew, "boss", "wake") == (1000, False)
    # a limit that ends inside the 101st line: 100 counted, and more
    assert inbox.count(crew, "boss", "wake", limit=width * 100 + 5) == (100, True)
    # a limit exactly at the end of the file: nothing more
    assert inbox.count(crew, "boss", "wake", limit=width * 1000) == (1000, False)
    # the limit spans the files where notices wait, oldest first
    os.rename(path, path + inbox.TAKING)
    fill(path, "wake", 10)
    assert inbox.count(crew, "boss", "wake", limit=width * 1005) == (1005, True)
    assert inbox.count(crew, "boss", "wake") == (1010, False)


def test_crew_status_on_a_huge_inbox_says_at_least_how_many(crew, run):
    register(crew, "boss", kind="primary")
    path = os.path.join(Session(crew, "boss").dir, "inbox")
    width = fill(path, "wake", (inbox.COUNT_LIMIT * 3) // 200)
    assert os.path.getsize(path) > 2 * inbox.COUNT_LIMIT
    p = run("crew-status")
    assert p.returncode == 0, p.stderr
    assert p.stdout == f"1 idle {inbox.COUNT_LIMIT // width}+ wakes\n"
    assert p.stderr == ""
    # every notice is still there, and drained whole, once
    taken, garbage = inbox.drain(crew, "boss")
    assert (len(taken), garbage) == ((inbox.COUNT_LIMIT * 3) // 200, 0)
    assert run("crew-status").stdout == "1 idle\n"


def test_has_reads_up_to_the_first_notice_of_its_kind(crew):
    register(crew, "boss", kind="primary")
    path = os.path.join(Session(crew, "boss").dir, "inbox")
    assert not inbox.has(crew, "boss", "wake")
    fill(path, "job", 20000)
    assert not inbox.has(crew, "boss", "wake")
    fill(path, "wake", 1)
    assert inbox.has(crew, "boss", "wake")
    with open(path, "ab") as f:        # a wake still being written is not one yet
        f.write(b"garbage\n")
    assert inbox.has(crew, "boss", "wake")


def test_what_was_read_is_kept_out_of_the_way_and_still_known(crew, monkeypatch):
    """Drained notices go to inbox.read, rotated like a status log: the
    pending files hold only what waits, and the ids of what was drained
    still answer wake-send's check for repeats."""
    monkeypatch.setenv("CREWFILE_ROTATE_BYTES", str(64 << 10))
    register(crew, "boss", kind="primary")
    sdir = Session(crew, "boss").dir
    posted = []
    for round_ in range(6):
        posted += inbox.post_many(crew, "boss", [("wake", f"e{round_}-{i}", "x" * 100)
                                                 for i in range(100)])
        taken, garbage = inbox.drain(crew, "boss")
        assert (len(taken), garbage) == (100, 0)
        assert not any(os.path.exists(os.path.join(sdir, "inbox" + s))
                       for s in ("", inbox.TAKING, inbox.MOVING))
    assert os.path.exists(os.path.join(sdir, "inbox.read.1"))
    assert os.path.getsize(os.path.join(sdir, "inbox.read")) <= 64 << 10
    known = inbox.ids(crew, "boss")
    assert set(posted) <= known
    assert inbox.count(crew, "boss") == (0, False)


def test_peek_reads_each_file_forward_oldest_first(crew, run):
    """inbox-drain --peek on a big pending inbox: every notice, oldest
    first across inbox.taking, inbox.moving and inbox; garbage, a line too
    long to be a record and a last partial line left out; nothing taken."""
    register(crew, "boss", kind="primary")
    path = os.path.join(Session(crew, "boss").dir, "inbox")
    for suffix, first in ((inbox.TAKING, 0), (inbox.MOVING, 1), ("", 2)):
        with open(path + suffix, "ab") as f:
            for i in range(first, 30000, 3):
                f.write(records.format_line(records.timestamp(0), "wake", f"n{i} text {i}").encode())
            f.write(b"garbage\n" + records.timestamp(0).encode() + b" wake: long "
                    + b"y" * records.MAX_LINE + b"\n")
            f.write(records.format_line(records.timestamp(0), "wake", "cut")[:-3].encode())
    p = run("inbox-drain", "--peek", "boss")
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""
    ids = [line.split(" ")[2] for line in p.stdout.splitlines()]
    want = [f"n{i}" for first in (0, 1, 2) for i in range(first, 30000, 3)]
    assert ids == want
    assert inbox.count(crew, "boss", limit=None) == (30000, False)
