"""A session is the unit of failure (issue 30): a session that cannot be read
is its own problem alone, said once, while every other session is served.
Commands run bound by file modes (conftest.bound_by_modes), as a user is."""
import os
import shutil

import pytest

from conftest import bound_by_modes, cmd
from crewfile.session.sessions import Session, register
from test_faults import procs  # noqa: F401 (the fixture: long-running commands, stopped at the end)


@pytest.fixture
def unreadable(crew):
    """w1 and w2 with a record each; w1's directory made mode 000 (restored
    at the end, so that the test's directory can be removed)."""
    register(crew, "w1")
    register(crew, "w2")
    Session(crew, "w1").append("note", "one")
    Session(crew, "w2").append("note", "two")
    w1 = crew.session_dir("w1")
    os.chmod(w1, 0)
    yield w1
    os.chmod(w1, 0o700)


def lines_of(text, name):
    return [l.split(" ", 2)[2] for l in text.splitlines() if l.split(" ")[1] == name]


def test_crew_watch_once_serves_the_others_and_says_the_unreadable_session_once(crew, unreadable):
    p = cmd("crew-watch", "--from-start", "--once", bound=True)
    status = os.path.join(unreadable, "status")
    said = f"crew-watch: {status}: Permission denied"
    assert (p.returncode, p.stderr) == (0, said + "\n")
    assert lines_of(p.stdout, "w2") == ["registered: kind=crew", "note: two"]
    assert lines_of(p.stdout, "w1") == [f"problem: {said}"]


def test_crew_watch_follows_the_others_holds_the_unreadable_one_and_reads_on_when_it_heals(
        crew, unreadable, procs):
    watch = procs("crew-watch", prefix=bound_by_modes())
    watch.wait_out(" w1 problem: crew-watch: ")
    Session(crew, "w1").append("note", "while unreadable")     # (we are not bound by modes)
    Session(crew, "w2").append("note", "fresh")
    watch.wait_out(" w2 note: fresh")
    os.chmod(unreadable, 0o700)
    Session(crew, "w1").append("note", "healed")
    watch.wait_out(" w1 note: healed")
    out = watch.out.decode()
    assert lines_of(out, "w1") == [f"problem: crew-watch: {unreadable}/status:"
                                   f" Permission denied",
                                   "note: while unreadable", "note: healed"]
    assert lines_of(out, "w2") == ["note: fresh"]
    assert watch.err.decode().count("Permission denied") == 1
    assert "crew-watch: w1: readable again; reading on from where it was\n" in watch.err.decode()
    assert watch.running()


@pytest.mark.parametrize("kind", ["link", "fifo", "file"])
def test_crew_watch_says_a_session_of_the_wrong_kind_once_and_serves_the_others(crew, kind):
    register(crew, "w2")
    w1 = crew.session_dir("w1")
    os.makedirs(os.path.dirname(w1), exist_ok=True)
    {"link": lambda: os.symlink("/etc", w1), "fifo": lambda: os.mkfifo(w1),
     "file": lambda: open(w1, "w").close()}[kind]()
    p = cmd("crew-watch", "--from-start", "--once", bound=True)
    why = "a symlink is not followed" if kind == "link" else "not a directory"
    said = f"crew-watch: {w1}: {why}"
    assert (p.returncode, p.stderr) == (0, said + "\n")
    assert lines_of(p.stdout, "w1") == [f"problem: {said}"]
    assert lines_of(p.stdout, "w2") == ["registered: kind=crew"]


def _spoil_session(crew, kind):
    """sessions/w1 made unusable as *kind*; returns what the views say of it."""
    w1 = crew.session_dir("w1")
    if kind == "mode 000":
        os.chmod(w1, 0)
        return f"{w1}: Permission denied"
    shutil.rmtree(w1)
    {"link": lambda: os.symlink("/etc", w1), "fifo": lambda: os.mkfifo(w1),
     "file": lambda: open(w1, "w").close()}[kind]()
    return f"{w1}: " + ("a symlink is not followed" if kind == "link" else "not a directory")


@pytest.mark.parametrize("kind", ["mode 000", "link", "fifo", "file"])
def test_views_mark_an_unusable_session_say_it_and_exit_5(crew, kind):
    register(crew, "w1")
    register(crew, "w2")
    why = _spoil_session(crew, kind)
    try:
        status = cmd("crew-status", bound=True)
        top = cmd("crew-top", "--once", bound=True)
    finally:
        if kind == "mode 000":
            os.chmod(crew.session_dir("w1"), 0o700)
    assert (status.returncode, status.stdout, status.stderr) == (
        5, "1 idle 1 damaged\n", f"crew-status: {why}\n")
    assert (top.returncode, top.stderr) == (5, f"crew-top: {why}\n")
    rows = {l.split()[0]: l.split() for l in top.stdout.splitlines()[1:3]}
    assert rows["w1"][:4] == ["w1", "?", "damaged", "?"]
    assert top.stdout.splitlines()[1].endswith(f"error: {why}")
    assert rows["w2"][:3] == ["w2", "crew", "idle(live?)"]


def _spoil_part(crew, part):
    """A part of the crew (`reports`, `crew-up/lock fifo`) made the wrong kind of file."""
    name, _, variant = part.partition(" ")
    path = os.path.join(crew.root, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.isdir(path):
        os.rmdir(path)
    {"dir": lambda: os.mkdir(path), "fifo": lambda: os.mkfifo(path),
     "link": lambda: os.symlink("/etc/passwd", path),
     "": lambda: open(path, "w").close()}[variant]()


@pytest.mark.parametrize("part, why, where", [
    ("nudges", "not a directory", "NUDGE"), ("jobs", "not a directory", "JOBS"),
    ("reports", "not a directory", "reports"), ("reports/new", "not a directory", "reports"),
    ("crew-up/lock dir", "{}: Is a directory", "crew-up"),
    ("crew-up/lock fifo", "not a regular file", "crew-up"),
    ("crew-up/lock link", "a symlink is not followed", "crew-up")])
def test_crew_top_shows_what_it_can_and_marks_a_crew_part_it_cannot_read(crew, part, why, where):
    register(crew, "w1")
    os.makedirs(os.path.join(crew.root, "reports"), exist_ok=True)
    path = os.path.join(crew.root, part.split(" ")[0])
    _spoil_part(crew, part)
    said = why.format(path) if "{}" in why else f"{path}: {why}"
    top = cmd("crew-top", "--once", bound=True)
    assert (top.returncode, top.stderr) == (5, f"crew-top: {said}\n")
    lines = top.stdout.splitlines()
    header, w1 = lines[0].split(), lines[1].split()
    assert w1[:3] == ["w1", "crew", "idle(live?)"]
    if where in header:
        assert w1[header.index(where)] == "?"
    else:
        assert f"{where}: ? ({said})" in lines
    status = cmd("crew-status", bound=True)
    assert (status.returncode, status.stdout, status.stderr) == (0, "1 idle\n", "")
