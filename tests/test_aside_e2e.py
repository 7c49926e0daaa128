"""The whole aside story on a real tmux server, the fake agent in the aside's
window, the captain typing at a tmux client attached through a pseudo-terminal:

five captain turns, the third of which has the agent try to conclude on its
own (refused, surfaced); the captain concludes, types once more (the
conclusion is void), concludes again; the agent hands over its report; the
primary reconciles. Then the window is gone, the report and scrollback are
in reports/cur/, the status log tells the story line by line, and run
through `crew-watch --from-start --once | wake-filter` the whole scenario
wakes the primary exactly twice.
"""
import os
import subprocess
import sys

import pytest

from conftest import BIN, REPO, AttachedClient, captain_keys, wait_for
from crewfile.asides import aside
from crewfile.core.logfile import TailStats
from crewfile.session.sessions import Session

AGENT = f"{sys.executable} {os.path.join(REPO, 'tests', 'fake-agent')}"
STORY_SKIPS = ("started", "turn-started", "turn-ended")


def log(crew, name="a1"):
    return Session(crew, name).last_records(10000, TailStats())


def story(crew):
    return [(r.kind, r.text) for r in log(crew) if r.kind not in STORY_SKIPS]


@pytest.fixture
def scenario(crew, tmux, run, tmp_path, request):
    tmux("new-session", "-d", "-s", "crew", "-n", "captain", "-x", "200", "-y", "50")
    r = run("aside-open", "a1", "--topic", "cache design", "--cmd", AGENT,
            "--tmux-session", "crew", env={"CREWFILE_PRIMARY": "firstmate"})
    assert (r.returncode, r.stdout) == (0, "crew:1\n"), r.stderr
    pane = Session(crew, "a1").meta["tmux"]
    tmux.wait_screen(pane, "ready>")
    sess = Session(crew, "a1")
    person = AttachedClient(tmux, pane)
    request.addfinalizer(person.close)

    def turn(text):
        """The captain types one line at a terminal; wait until the agent's turn has ended."""
        ended = sum(r.kind == "turn-ended" for r in log(crew))
        captain_keys(sess, text + "\r", person)
        wait_for(lambda: sum(r.kind == "turn-ended" for r in log(crew)) == ended + 1,
                 what=f"the turn after {text!r}")

    early = tmp_path / "early.md"
    early.write_text("premature: the design is settled\n")
    conclude = f"{sys.executable} {os.path.join(BIN, 'aside-conclude')}"
    turn("let's design the cache")
    turn("what about eviction?")
    turn(f"RUN: {conclude} a1 --report {early}")           # the agent tries on its own
    tmux.wait_screen(pane, "keep the conversation going")
    turn("LRU it is; and the TTL?")
    turn("five minutes")
    turn("/aside-done")
    assert aside.scan(sess).state == aside.CAPTAIN_CONCLUDED
    turn("oh, one more thing: metrics")                   # typed again: the conclusion is void
    assert aside.scan(sess).state == aside.OPEN
    turn("/aside-done ship it")
    person.close()                                        # the captain has gone back
    # The agent hands over its report (as its model would, from its own shell).
    report = "# cache design\nLRU, TTL five minutes, metrics.\n"
    r = run("aside-conclude", "a1", "--report", "-", input=report,
            env={"CREWFILE_SESSION": "a1"})
    assert r.returncode == 0, r.stderr
    new = r.stdout.strip()
    # The primary reconciles, once the agent is back at its prompt.
    tmux.wait_prompt(pane)
    r = run("aside-reconcile", "a1")
    assert r.returncode == 0, r.stderr
    return {"pane": pane, "new": new, "report": report, "early": early,
            "cur": new.replace("/reports/new/", "/reports/cur/")}


def test_the_aside_story(crew, tmux, run, scenario):
    s = scenario
    # The window is gone.
    assert s["pane"] not in tmux("list-panes", "-a", "-F", "#{pane_id}").split()
    assert "a1" not in tmux("list-windows", "-a", "-F", "#{window_name}").split()
    # The report and the scrollback are in place.
    assert open(s["cur"]).read() == s["report"]
    scrollback = open(s["cur"] + ".scrollback").read()
    for said in ("let's design the cache", "what about eviction?", "five minutes",
                 "oh, one more thing: metrics", "/aside-done ship it",
                 "ran, exit 1: aside-conclude: the captain has not concluded this aside;"
                 " keep the conversation going"):
        assert said in scrollback, said
    assert [l.split()[0] for l in run("report-ls").stdout.splitlines()[1:]] == ["cur"]
    # The status log tells the story, line by line.
    early_cmd = f"RUN: {sys.executable} {os.path.join(BIN, 'aside-conclude')} a1 --report {s['early']}"
    assert story(crew) == [
        ("registered", "kind=aside exempt"),
        ("opened", "cache design"),
        ("paused", "awaiting captain"),
        ("captain", "let's design the cache"),
        ("captain", "what about eviction?"),
        ("captain", early_cmd),
        ("problem", "self-conclusion refused"),
        ("captain", "LRU it is; and the TTL?"),
        ("captain", "five minutes"),
        ("captain-done", ""),
        ("captain", "oh, one more thing: metrics"),
        ("captain-done", "ship it"),
        ("concluded", s["new"]),
        ("closed", s["cur"]),
    ]
    # Every captain input was a turn of the agent.
    kinds = [r.kind for r in log(crew)]
    assert kinds.count("turn-started") == kinds.count("turn-ended") == 8
    assert Session(crew, "a1").meta["primary"] == "firstmate"


def test_the_aside_story_wakes_the_primary_exactly_twice(crew, tmux, scenario):
    env = dict(os.environ, PATH=f"{BIN}:{os.path.dirname(sys.executable)}:{os.environ['PATH']}")
    proc = subprocess.run("crew-watch --from-start --once | wake-filter", shell=True, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    wakes = proc.stdout.splitlines()
    assert len(wakes) == 2, proc.stdout
    assert wakes[0].split(" ", 1)[1] == "a1 problem: self-conclusion refused"
    assert wakes[1].split(" ", 1)[1] == f"a1 concluded: {scenario['new']}"
