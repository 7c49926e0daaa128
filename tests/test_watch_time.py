"""crew-watch against what a log may hold (issue 30): a line far too long
written while it follows, records dated ahead of its clock."""
from crewfile import records
from crewfile.sessions import Session, register
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
