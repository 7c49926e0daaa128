"""A session is the unit of failure (issue 30): a session that cannot be read
is its own problem alone, said once, while every other session is served.
Commands run bound by file modes (conftest.bound_by_modes), as a user is."""
import os

import pytest

from conftest import bound_by_modes, cmd
from crewfile.sessions import Session, register
from test_faults import Proc


@pytest.fixture
def procs():
    made = []

    def start(*argv):
        p = Proc(*argv, prefix=bound_by_modes())
        made.append(p)
        return p
    yield start
    for p in made:
        p.stop()


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
    watch = procs("crew-watch")
    watch.wait_out(" w1 problem: crew-watch: ")
    Session(crew, "w1").append("note", "while unreadable")     # (we are not bound by modes)
    Session(crew, "w2").append("note", "fresh")
    watch.wait_out(" w2 note: fresh")
    os.chmod(unreadable, 0o700)
    Session(crew, "w1").append("note", "healed")
    watch.wait_out(" w1 note: healed")
    out = watch.out.decode()
    assert lines_of(out, "w1") == [f"problem: crew-watch: cannot open {unreadable}/status:"
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
