"""The count of pending notices a view shows (issue 30: a pending inbox of
many megabytes must not make crew-status slow)."""
from crewfile.core import records
from crewfile.session.sessions import Session, register
from crewfile.wake import inbox


def test_the_inbox_count_agrees_with_the_pending_notices(crew):
    """inbox.count (crew-status's wakes, crew-top's WAKES) counts what
    pending() lists, without making a notice of each: other kinds, garbage,
    a line too long to be a record and a partial last line are not counted."""
    register(crew, "boss", kind="primary")
    for i in range(3000):
        inbox.post(crew, "boss", "wake" if i % 3 else "job", f"n{i} w1 problem: ts wake: x")
    path = Session(crew, "boss").dir + "/inbox"
    wake = records.format_line(records.timestamp(0), "wake", "id1 ").encode()
    with open(path, "ab") as f:
        f.write(b"garbage wake: line\n" + wake[:-1] + b"y" * (2 << 20) + b"\n")
        f.write(wake * 2 + wake[:30])
    waiting = inbox.pending(crew, "boss")
    assert inbox.count(crew, "boss", limit=None) == (len(waiting), False) == (3002, False)
    assert inbox.count(crew, "boss", "wake", limit=None) == (sum(n.kind == "wake" for n in waiting), False) \
        == (2002, False)
    assert inbox.count(crew, "boss", "job", limit=None) == (1000, False)
