"""Nudge rules without tmux: clock jumps, schedule files, the commands' exit codes."""
import json
import os

import pytest

from conftest import cmd
from crewfile.nudges import nudge, schedules
from crewfile.session import verdict
from crewfile.session.sessions import current_user
from crewfile.core.errors import BadInput, NotFound, Refused
from crewfile.session.sessions import register


class Clocked(nudge.World):
    """A world whose one session is always live, idle and alone; the clock is ours."""

    def __init__(self, crew, clock, sent):
        super().__init__(crew)
        self.clock, self.sent = clock, sent

    def now(self):
        return dict(self.clock)

    def live(self, name):
        return verdict.LIVE

    def busy(self, name, screen):
        return None

    def deliver(self, name, text):
        self.sent.append((dict(self.clock), text))
        return True, verdict.Answer("delivered")


@pytest.fixture
def setup(crew):
    register(crew, "w1", tmux="%99")
    clock = {"wall": 1.8e9, "mono": 500.0, "boot": "A"}
    sent = []
    schedules.add(crew, 60, "go", session="w1", user="u", now=dict(clock))

    def tick():
        lock = nudge.tick_lock(crew)
        assert lock is not None
        with lock:
            return nudge.tick(crew, Clocked(crew, clock, sent))
    return clock, sent, tick


def advance(clock, seconds):
    clock["wall"] += seconds
    clock["mono"] += seconds


def test_floor(setup):
    clock, sent, tick = setup
    advance(clock, 59)
    tick()
    assert sent == []
    advance(clock, 1)
    tick()
    assert len(sent) == 1
    advance(clock, 59)
    tick()
    assert len(sent) == 1


def test_wall_clock_forwards_within_a_boot_fires_nothing_early(setup):
    clock, sent, tick = setup
    clock["wall"] += 86400
    tick()
    assert sent == []
    advance(clock, 60)
    tick()
    assert len(sent) == 1


def test_wall_clock_backwards_within_a_boot_does_not_stall(setup):
    clock, sent, tick = setup
    clock["wall"] -= 86400 * 365
    advance(clock, 60)
    tick()
    assert len(sent) == 1


def test_clock_forwards_across_a_reboot_fires_at_most_once(setup):
    clock, sent, tick = setup
    clock.update(boot="B", mono=10.0, wall=clock["wall"] + 86400 * 3)   # three days "missed"
    for _ in range(5):
        tick()
    assert len(sent) == 1
    advance(clock, 60)
    tick()
    assert len(sent) == 2


def test_clock_backwards_across_a_reboot_waits_one_floor_at_most(setup):
    clock, sent, tick = setup
    clock.update(boot="B", mono=10.0, wall=clock["wall"] - 86400 * 365)
    tick()
    assert sent == []
    advance(clock, 59)
    tick()
    assert sent == []
    advance(clock, 1)
    tick()
    assert len(sent) == 1


def test_one_schedule_per_user_and_session(crew):
    register(crew, "w1", tmux="%1", session_key="k1", agent_session_id="a1")
    s = schedules.add(crew, 60, "go", session="w1", user="u")
    with pytest.raises(Refused):
        schedules.add(crew, 60, "go", agent_session_id="a1", user="u")     # same session, other id
    other = schedules.add(crew, 60, "go", session_key="k1", user="v")      # another user may
    again = schedules.add(crew, 30, "again", session_key="k1", user="u", replace_existing=True)
    assert again["id"] == s["id"] and again["every"] == 30 and again["attempts"] == 0
    assert sorted(x["id"] for x in nudge.load_all(crew)) == sorted([s["id"], other["id"]])


def test_bad_input(crew):
    register(crew, "w1", tmux="%1")
    for kwargs in ({"every": 0}, {"every": "x"}, {"message": "a\nb"}, {"message": ""},
                   {"max_attempts": 0}):
        args = {"every": 60, "message": "go", "session": "w1", **kwargs}
        with pytest.raises(BadInput):
            schedules.add(crew, **args)
    with pytest.raises(BadInput):
        schedules.add(crew, 60, "go", session="w1", session_key="k")
    with pytest.raises(NotFound):
        schedules.add(crew, 60, "go", session="nobody")
    with pytest.raises(NotFound):
        schedules.add(crew, 60, "go", session_key="nobody")


def test_matches():
    meta = {"name": "w1", "session_key": "k1", "agent_session_id": "a1"}
    assert nudge.matches({"session_key": "k1"}, meta)
    assert nudge.matches({"agent_session_id": "a1"}, meta)
    assert nudge.matches({"session_key": "k1", "agent_session_id": "a1"}, meta)
    assert not nudge.matches({"session_key": "k1", "agent_session_id": "a2"}, meta)
    assert not nudge.matches({"session": "w1", "session_key": "k2"}, meta)
    assert nudge.matches({"session": "w1"}, meta)
    assert not nudge.matches({"session": "w2"}, meta)


def test_trees(tmp_path):
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "a" / "b").mkdir(parents=True)
    (tmp_path / "plain" / "in").mkdir(parents=True)
    os.symlink(repo / "a", tmp_path / "link")
    assert verdict.tree_of(str(repo / "a" / "b")) == str(repo)
    assert verdict.tree_of(str(tmp_path / "link")) == str(repo)
    assert verdict.tree_of(str(tmp_path / "plain" / "in")) == str(tmp_path / "plain" / "in")
    assert verdict.tree_of(None) is None
    assert verdict.overlap("/a/b", "/a") and verdict.overlap("/a", "/a/b") and verdict.overlap("/a", "/a")
    assert not verdict.overlap("/a/b", "/a/bc")


def test_commands(crew):
    assert cmd("session-add", "w1", "--tmux", "%1").returncode == 0
    p = cmd("nudge-add", "--session", "w1", "--every", "60", "--message", "-n go; on")
    assert p.returncode == 0, p.stderr
    sid = p.stdout.strip()
    p = cmd("nudge-add", "--session", "w1", "--every", "60", "--message", "again")
    assert p.returncode == 1 and p.stderr.startswith("nudge-add: ") and sid in p.stderr
    assert cmd("nudge-add", "--session", "w1", "--every", "60", "--message", "again",
               "--replace").stdout.strip() == sid
    p = cmd("nudge-add", "--session", "w1", "--every", "0", "--message", "x", "--replace")
    assert p.returncode == 2 and "--every" in p.stderr
    p = cmd("nudge-add", "--session", "w1", "--message", "x")
    assert p.returncode == 2
    p = cmd("nudge-add", "--session", "nope", "--every", "5", "--message", "x")
    assert p.returncode == 3
    ls = cmd("nudge-ls").stdout.splitlines()
    assert ls[0].split() == ["ID", "USER", "SESSION", "EVERY", "ATTEMPTS", "ARMED", "LAST",
                             "OUTCOME", "UNTIL", "OWN", "REASON"]
    assert ls[1].split()[:8] == [sid, current_user(), "w1", "60s",
                                 "0/100", "yes", "-", "-"]
    [obj] = json.loads(cmd("nudge-ls", "--json").stdout)
    assert obj["message"] == "again" and obj["id"] == sid
    assert cmd("nudge-rm", "nosuch").returncode == 3
    assert cmd("nudge-rm", sid).returncode == 0
    assert json.loads(cmd("nudge-ls", "--json").stdout) == []


def test_unreadable_schedule_is_skipped_and_named(crew):
    register(crew, "w1", tmux="%1")
    schedules.add(crew, 60, "go", session="w1")
    with open(os.path.join(crew.root, "nudges", "ngarbage"), "w") as f:
        f.write("{not json")
    p = cmd("nudge-ls")
    assert p.returncode == 5 and "ngarbage" in p.stderr and len(p.stdout.splitlines()) == 3
    assert "error: " in p.stdout.splitlines()[-1]
    assert cmd("nudge-tick").returncode == 5


def test_no_pane_registered_disarms(crew):
    register(crew, "w1", pid=os.getpid())
    s = schedules.add(crew, 1, "go", session="w1")
    path = os.path.join(crew.root, "nudges", s["id"])
    s["base"]["mono"] -= 5
    s["base"]["wall"] -= 5
    open(path, "w").write(json.dumps(s))
    out = cmd("nudge-tick").stdout
    assert "disarmed: refused and disarmed: not-live: no tmux pane" in out
