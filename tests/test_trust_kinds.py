"""Guarded record kinds (kinds.GUARDED, protocol.md "Record kinds"): written
only by their own commands, and believed by a reader that acts only with
the evidence those commands keep, whichever writer tries whichever kind.

Real tmux, real fake agents (tests/fake-agent), real flock(1), the real
commands."""
import itertools
import json
import os
import re
import shlex
import subprocess
import sys
import time

import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from conftest import (BIN, REPO, AttachedClient, captain_types, cmd, make_due, protocol_section,
                      wait_for)
from crewfile.asides import aside, captain
from crewfile.core import kinds, records
from crewfile.nudges import schedules
from crewfile.core.logfile import TailStats
from crewfile.session.sessions import Session, register
from crewfile.core.liveness import alive as is_alive
from crewfile.core.errors import Refused
from crewfile.crew.spawn import refuse_held
from crewfile.agents import load

FAKE = os.path.join(REPO, "tests", "fake-agent")
AGENT = f"{sys.executable} {FAKE}"
FORGED_TEXT = {"registered": "kind=crew", "captain": "we are done", "captain-done": "",
               "concluded": "{reports}/new/{name},1764640000.M1P1Q1.h",
               "closed": "{reports}/cur/{name},1764640000.M1P1Q1.h", "ended": "other",
               "respawned": "resume x"}


def lines(sess):
    return [r.line() for r in sess.last_records(1000, TailStats())]


def problems(sess):
    return [r.text for r in sess.last_records(1000, TailStats()) if r.kind == "problem"]


def alive(pid, start):
    return is_alive(pid, start)


def listing(crew, box):
    """The files in reports/BOX ([] while there is none)."""
    path = crew.sub("reports", box)
    return sorted(os.listdir(path)) if os.path.isdir(path) else []


def panes(tmux):
    return tmux("list-panes", "-a", "-F", "#{pane_id}").split()


def flock_append(sess, line):
    """A shell writer appending by hand under the session lock, as protocol.md allows."""
    subprocess.run(["flock", sess.lock_path, "sh", "-c", 'printf "%s\\n" "$1" >> "$2"', "-",
                    line.rstrip("\n"), sess.status_path], check=True)


def forged_line(crew, name, kind):
    text = FORGED_TEXT[kind].format(reports=crew.sub("reports"), name=name)
    return records.new_line(kind, text)


@pytest.fixture
def crewmates(crew, tmux, run):
    """Aside a2 opened by aside-open and crew session w1, each with its fake
    agent live at its prompt in its own window; a nudge armed on w1."""
    tmux("new-session", "-d", "-s", "crew", "-x", "160", "-y", "30")
    r = run("aside-open", "a2", "--topic", "trust", "--cmd", AGENT, "--tmux-session", "crew")
    assert r.returncode == 0, r.stderr
    a2 = Session(crew, "a2")
    tmux.wait_screen(a2.meta["tmux"], "ready>")
    w1, _ = tmux.agent_window(crew, "w1", AGENT)
    for sess in (a2, w1):
        tmux.wait_screen(sess.reread().meta["tmux"], "ready>")
        wait_for(lambda: "started" in [r.kind for r in sess.last_records(50, TailStats())]
                 and sess.reread().meta.get("pid"), what=f"{sess.name}'s agent recorded")
    sid = cmd("nudge-add", "--session", "w1", "--every", "600", "--max", "50",
              "--message", "go on", check=True).stdout.strip()
    return a2.reread(), w1.reread(), sid


def nothing_acted(crew, tmux, run, a2, w1, sid, report):
    """Every reader that acts, asked after a forged record: no teardown, no
    hand-over, no lifecycle change in a view, no disarm, no respawn."""
    windows = panes(tmux)
    r = run("aside-reconcile", "a2")
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert r.stderr.startswith("aside-reconcile: 'a2' is not concluded: "), r.stderr
    r = run("aside-conclude", "a2", "--report", report)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert listing(crew, "new") == listing(crew, "cur") == []
    assert aside.scan(a2).state in (aside.OPEN, aside.CAPTAIN_CONCLUDED)
    for sess in (a2, w1):
        st = json.loads(run("status-show", sess.name, "--json").stdout)
        assert (st["ended"], st["live"] != "no") == (False, True), st
        assert sess.name in [line.split()[0] for line in run("session-ls").stdout.splitlines()]
    make_due(crew, sid)
    assert run("nudge-tick").returncode == 0
    assert schedules.get(crew, sid)["armed"] is True
    r = run("crew-respawn", "--json")
    actions = {row["action"] for row in json.loads(r.stdout)}
    assert actions.isdisjoint({"respawned", "would-respawn"}), actions
    assert panes(tmux) == windows
    for sess in (a2, w1):
        assert sess.meta["tmux"] in panes(tmux)
        assert alive(sess.meta["pid"], sess.meta["pid_start"])


@pytest.fixture
def report(tmp_path):
    path = tmp_path / "report.md"
    path.write_text("the agent's own idea of a report\n")
    return str(path)


# --- the reproduction --------------------------------------------------------

def test_status_append_closed_is_refused_and_written_nowhere(crew, tmux, run, crewmates):
    a2, _, _ = crewmates
    before = lines(a2)
    r = run("status-append", "a2", "closed", "x")
    assert (r.returncode, r.stdout, r.stderr) == (
        1, "", "status-append: closed records are written only by aside-reconcile;"
               " aside-open (a window not opened)\n")
    after = lines(a2)
    assert after[:len(before)] == before and len(after) == len(before) + 1
    assert after[-1][24:] == (" problem: record refused: status-append may not write closed"
                              " records\n")
    assert a2.meta["tmux"] in panes(tmux) and alive(a2.meta["pid"], a2.meta["pid_start"])


def test_a_closed_appended_by_hand_does_not_tear_the_aside_down(crew, tmux, run, crewmates):
    a2, _, _ = crewmates
    flock_append(a2, records.new_line("closed", "x"))
    meta = open(a2.meta_path).read()
    before = lines(a2)
    r = run("aside-reconcile", "a2")
    assert (r.returncode, r.stdout, r.stderr) == (
        1, "", "aside-reconcile: 'a2' is not concluded: the captain has not concluded this aside\n")
    after = lines(a2)
    assert after[:len(before)] == before and len(after) == len(before) + 1
    forged = a2.last_records(1000, TailStats())[len(before) - 1]
    assert forged.kind == "closed"
    assert after[-1][24:] == (f" problem: record not believed: closed of {forged.ts}: it names"
                              f" no report, and a window is recorded\n")
    assert open(a2.meta_path).read() == meta and not os.path.exists(crew.sub("reports"))
    assert a2.meta["tmux"] in panes(tmux) and alive(a2.meta["pid"], a2.meta["pid_start"])
    # Said once: a rerun refuses the same way and writes nothing more.
    assert run("aside-reconcile", "a2").returncode == 1
    assert lines(a2) == after
    # One wake: the problem (an aside's forged `closed` itself wakes no one).
    watch, wake = (shlex.quote(os.path.join(BIN, c)) for c in ("crew-watch", "wake-filter"))
    r = subprocess.run(f"{sys.executable} {watch} --from-start --once | {sys.executable} {wake}",
                       shell=True, capture_output=True, text=True, timeout=60)
    assert [l[25:] for l in r.stdout.splitlines() if l[25:].startswith("a2 ")] == [
        "a2 " + after[-1][25:].rstrip("\n")]


def test_the_asides_own_agent_cannot_close_it(crew, tmux, run, crewmates):
    a2, _, _ = crewmates
    pane = a2.meta["tmux"]
    line = records.new_line("closed", "x").rstrip("\n")
    command = (f"{shlex.quote(os.path.join(BIN, 'status-append'))} a2 closed x;"
               f" flock {shlex.quote(a2.lock_path)} sh -c 'printf \"%s\\n\" \"$1\" >> \"$2\"'"
               f" - {shlex.quote(line)} {shlex.quote(a2.status_path)}")
    tmux("send-keys", "-t", pane, "-l", f"RUN: {command}")
    tmux("send-keys", "-t", pane, "Enter")
    tmux.wait_screen(pane, "agent: ran, exit 0")
    assert "record refused: status-append may not write closed records" in problems(a2)
    r = run("aside-reconcile", "a2")
    assert r.returncode == 1 and "is not concluded" in r.stderr
    assert [p for p in problems(a2) if p.startswith("record not believed: closed of ")]
    assert pane in panes(tmux) and alive(a2.meta["pid"], a2.meta["pid_start"])


def test_a_forged_ended_on_a_live_agent_is_not_believed(crew, tmux, run, crewmates):
    _, w1, sid = crewmates
    flock_append(w1, records.new_line("ended", "retired"))
    st = json.loads(run("status-show", "w1", "--json").stdout)
    assert (st["ended"], st["live"], st["why"]) == (False, "unknown", "end-not-believed")
    make_due(crew, sid)
    out = run("nudge-tick").stdout
    assert "disarmed" not in out and schedules.get(crew, sid)["armed"] is True
    # Once the agent is really gone, the same record is believed.
    tmux("kill-pane", "-t", w1.meta["tmux"])
    wait_for(lambda: not alive(w1.meta["pid"], w1.meta["pid_start"]), what="the agent's exit")
    st = json.loads(run("status-show", "w1", "--json").stdout)
    assert (st["ended"], st["live"], st["why"]) == (True, "no", "ended")


def test_a_forged_ended_does_not_spare_a_busy_agent_crew_retires_checks(crew, tmux, run,
                                                                       crewmates, tmp_path):
    _, w1, _ = crewmates
    pane, hold = w1.meta["tmux"], tmp_path / "hold"
    tmux("send-keys", "-t", pane, "-l", f"HOLD: {hold}")
    tmux("send-keys", "-t", pane, "Enter")
    wait_for(lambda: lines(w1)[-1][25:] == "turn-started\n", what="the agent's turn")
    flock_append(w1, records.new_line("ended", "retired"))
    r = run("crew-retire", "w1")
    assert (r.returncode, r.stderr) == (1, "crew-retire: w1 is busy: no turn record says whether"
                                           " it is generating (--force cuts it off)\n")
    assert pane in panes(tmux) and alive(w1.meta["pid"], w1.meta["pid_start"])
    hold.touch()


@pytest.mark.parametrize("kind", sorted(kinds.GUARDED))
def test_status_appends_stdin_modes_refuse_every_guarded_kind(crew, run, kind):
    sess = register(crew, "w1")
    before = lines(sess)
    r = run("status-append", "w1", "-", input=f"note: one\n{kind}: forged\nnote: two\n")
    writers = kinds.GUARDED[kind][0]
    why = (f"{kind} records are the captain's acts: written only by the agent's prompt hook,"
           f" aside-say and aside-done" if kind in ("captain", "captain-done")
           else f"{kind} records are written only by {writers}")
    assert (r.returncode, r.stderr) == (2, f"status-append: stdin line 2: {why}\n")
    got = [(l[25:].partition(": ")[0], l[25:].partition(": ")[2].rstrip("\n"))
           for l in lines(sess)[len(before):]]
    assert [k for k, _ in got] == ["note", "problem", "note"], got
    assert got[1][1].endswith(f": status-append may not write {kind} records")
    r = run("status-append", "w1", kind, "-", input="forged\n")     # refused before stdin is read
    assert (r.returncode, r.stderr) == (1, f"status-append: {why}\n")
    assert [l[25:].partition(":")[0] for l in lines(sess)[len(before) + 3:]] == ["problem"]


def test_a_forged_ended_frees_no_tree(crew, tmux, tmp_path):
    tree = os.path.realpath(tmp_path)
    w3, pane = tmux.agent_window(crew, "w3", AGENT, cwd=tree)
    tmux.wait_screen(pane, "ready>")
    wait_for(lambda: w3.reread().meta.get("pid"), what="w3's agent recorded")
    flock_append(w3, records.new_line("ended", "retired"))
    with pytest.raises(Refused) as held:
        refuse_held(crew, tree)
    assert str(held.value) == f"the tree {tree} is held: w3 is live in {tree}"


def post_tool_use(run, name):
    payload = {"session_id": "s", "cwd": "/tmp", "hook_event_name": "PostToolUse",
               "tool_name": "Bash", "tool_input": {"command": "true"}}
    r = run("crew-hook", input=json.dumps(payload), env={"CREWFILE_SESSION": name})
    assert (r.returncode, r.stderr) == (0, "")


def test_the_agents_own_hook_says_a_forged_end_once_right_after_the_tool(crew, run, crewmates):
    a2, w1, _ = crewmates
    flock_append(w1, records.new_line("ended", "retired"))
    flock_append(a2, records.new_line("closed", "x"))
    ended = w1.last_records(1, TailStats())[0]
    closed = a2.last_records(1, TailStats())[0]
    for _ in range(2):                       # every tool call asks; the problem is said once
        post_tool_use(run, "w1")
        post_tool_use(run, "a2")
    assert problems(w1) == [f"record not believed: ended of {ended.ts}: its agent process"
                            f" {w1.meta['pid']} is live"]
    said = [f"record not believed: closed of {closed.ts}: it names no report, and a window"
            f" is recorded"]
    assert problems(a2) == said
    assert run("aside-reconcile", "a2").returncode == 1       # the reader: said already
    assert problems(a2) == said


def test_the_table_is_the_one_protocol_md_and_the_page_give():
    rows = re.findall(r"^\| `([a-z-]+)` \| (.*?) \|", protocol_section("Record kinds"), re.M)
    assert [k for k, _ in rows] == list(kinds.GUARDED)
    page = open(os.path.join(REPO, "docs", "commands", "status-append.md"), encoding="utf-8").read()
    listed = re.search(r"\(see \[Record kinds\]\([^)]*\): ([`a-z, -]+)\)", " ".join(page.split()))
    assert listed.group(1).replace("`", "").split(", ") == list(kinds.GUARDED)


def test_a_forged_end_lets_no_one_register_over_a_live_agent(crew, tmux, run, crewmates):
    a2, w1, _ = crewmates
    flock_append(w1, records.new_line("ended", "retired"))
    flock_append(a2, records.new_line("closed", "x"))
    metas = [open(s.meta_path).read() for s in (a2, w1)]
    r = run("session-add", "w1", "--kind", "primary")
    assert (r.returncode, r.stderr) == (1, f"session-add: session 'w1' is already registered, and"
                                           f" its `ended` record is not believed: its agent"
                                           f" process {w1.meta['pid']} is live\n")
    r = run("aside-open", "a2", "--cmd", AGENT, "--tmux-session", "crew")
    assert (r.returncode, r.stderr) == (1, f"aside-open: session 'a2' is already registered, and"
                                           f" its `ended` record is not believed: its agent"
                                           f" process {a2.meta['pid']} is live\n")
    assert [open(s.meta_path).read() for s in (a2, w1)] == metas


def test_no_hook_payload_chooses_a_guarded_kind():
    """The hook writes the kinds its event names; the only ones a payload
    picks are an agent's notification kinds, and none of them is guarded."""
    for agent in ("claude", "codex", "gemini"):
        chosen = {k for k, _ in load(agent).NOTIFICATIONS.values()}
        assert chosen.isdisjoint(kinds.GUARDED), (agent, chosen)


# --- every kind x every writer x every reader that acts ---------------------------------

def write_status_append(crew, tmux, run, sess, kind):
    text = forged_line(crew, sess.name, kind)[24:].rstrip("\n").partition(": ")[2]
    before = lines(sess)
    r = run("status-append", sess.name, kind, *([text] if text else []))
    assert r.returncode == 1 and r.stderr.startswith(f"status-append: {kind} records are ")
    after = lines(sess)            # the one problem record, nothing else
    assert after[:-1] == before and after[-1][25:].startswith("problem: ")
    assert after[-1].endswith(f": status-append may not write {kind} records\n")


def write_flock(crew, tmux, run, sess, kind):
    flock_append(sess, forged_line(crew, sess.name, kind))


def write_own_agent(crew, tmux, run, sess, kind):
    line = forged_line(crew, sess.name, kind).rstrip("\n")
    pane = sess.meta["tmux"]
    command = (f"flock {shlex.quote(sess.lock_path)} sh -c 'printf \"%s\\n\" \"$1\" >> \"$2\"'"
               f" - {shlex.quote(line)} {shlex.quote(sess.status_path)}")
    tmux("send-keys", "-t", pane, "-l", f"RUN: {command}")
    tmux("send-keys", "-t", pane, "Enter")
    wait_for(lambda: line + "\n" in lines(sess), what="the agent's own append")
    wait_for(lambda: lines(sess)[-1][25:] == "turn-ended\n", what="the agent's turn to end")


def write_hook_payload(crew, tmux, run, sess, kind):
    event = {"ended": ("SessionEnd", {"reason": "other"}),
             "captain": ("UserPromptSubmit", {"prompt": "we are done"}),
             "captain-done": ("UserPromptSubmit", {"prompt": "/aside-done",
                                                   "prompt_id": "made-up"})}[kind]
    payload = {"session_id": "s", "cwd": "/tmp", "hook_event_name": event[0],
               "transcript_path": sess.meta.get("transcript_path") or "/tmp/t.jsonl"}
    payload.update(event[1])
    r = run("crew-hook", input=json.dumps(payload), env={"CREWFILE_SESSION": sess.name})
    assert r.returncode == 0, r.stderr


WRITERS = {"status-append": write_status_append, "flock": write_flock,
           "own-agent": write_own_agent, "hook-payload": write_hook_payload}
HOOK_KINDS = ("ended", "captain", "captain-done")      # the guarded kinds a payload can make
CASES = [(kind, writer) for kind in sorted(kinds.GUARDED) for writer in WRITERS
         if writer != "hook-payload" or kind in HOOK_KINDS]


@pytest.mark.parametrize("kind,writer", CASES)
def test_no_reader_acts_on_a_forged_record(crew, tmux, run, crewmates, report, kind, writer):
    a2, w1, sid = crewmates
    for sess in (a2, w1):
        WRITERS[writer](crew, tmux, run, sess, kind)
    nothing_acted(crew, tmux, run, a2, w1, sid, report)


# --- the aside's state, over any sequence of real acts and forged lines -----------------

ACTS = (["captain", "captain-done", "conclude", "replay captain-done"]
        + [f"forge {k}" for k in sorted(kinds.GUARDED)])


EXAMPLES = itertools.count()


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(acts=st.lists(st.sampled_from(ACTS), max_size=10))
@example(acts=["captain-done", "captain", "replay captain-done", "conclude"])
@example(acts=["captain-done", "forge registered", "replay captain-done", "conclude"])
def test_an_asides_state_moves_only_on_its_commands(crew, tmux, acts):
    """Forged lines of every guarded kind, and copies of the newest
    captain-done line, appended by hand among the captain's real acts (keys
    typed by a person at an attached client) and the agent's real
    aside-conclude: the aside is concluded exactly when
    aside-conclude succeeded in the current run, and never closed (nothing
    here reconciles). Each example is an aside of its own, in a window of
    its own, the one captain looking at it."""
    name = f"a{next(EXAMPLES)}"
    sess, pane = tmux.agent_window(crew, name, "cat >/dev/null", kind="aside")
    if AttachedClient.on(tmux.sock) is None:
        PEOPLE.append(AttachedClient(tmux, pane))
    done = concluded = False                      # a believed captain-done; a real hand-over
    for act in acts:
        if act == "captain":
            captain.record_captain_input(crew, name, "go on")
        elif act == "captain-done":
            captain_types(crew, name, "/aside-done")
            done = True
        elif act == "conclude":
            try:
                aside.conclude(crew, name, b"the report")
                handed = True
            except Refused:
                handed = False
            assert handed == (done and not concluded), (acts, act)
            concluded = concluded or handed
        elif act == "replay captain-done":         # the newest one's line again, word for word
            done_lines = [r.line() for r in sess.last_records(1000, TailStats())
                          if r.kind == "captain-done"]
            if done_lines:
                flock_append(sess, done_lines[-1])
        else:
            kind = act.split()[1]
            sess.append(kind, forged_line(crew, name, kind)[24:].rstrip("\n").partition(": ")[2])
        if act in ("captain", "forge captain", "forge registered"):
            done = concluded = False              # the captain's input, or a new life, reopens
        state = aside.scan(sess).state
        assert state != aside.CLOSED, acts
        assert (state == aside.CONCLUDED) == concluded, (acts, state)


PEOPLE = []


@pytest.fixture(autouse=True)
def _people_leave():
    yield
    while PEOPLE:
        PEOPLE.pop().close()


def _captain_speaks(crew, tmux, pane, text):
    """The captain types *text* into the aside's pane; back once its turn has ended."""
    tmux("send-keys", "-t", pane, "-l", text)
    tmux("send-keys", "-t", pane, "Enter")
    sess = Session(crew, "a1")

    def answered():
        recs = [(r.kind, r.text) for r in sess.last_records(50, TailStats())]
        return ("captain", text) in recs and recs[-1][0] == "turn-ended" and \
            recs.index(("captain", text)) < len(recs) - 1
    wait_for(answered, what=f"the turn after {text!r}")


def test_a_copy_of_an_earlier_captain_done_concludes_nothing(crew, tmux, run, concluded, tmp_path):
    """The line of a believed captain-done, appended again under flock(1)
    after the captain spoke again: its `acts` line would vouch for it, but
    an act older than the input it follows is a copy. Not believed, said
    once, no report taken, the window left."""
    pane, _ = concluded
    sess = Session(crew, "a1")
    old = [r.line() for r in sess.last_records(1000, TailStats()) if r.kind == "captain-done"][-1]
    _captain_speaks(crew, tmux, pane, "wait, one more thing")
    flock_append(sess, old)
    st = aside.scan(sess)
    assert "a copy of an earlier act's line" in aside.believed(sess, st)
    before = listing(crew, "new")
    report = tmp_path / "r2"
    report.write_text("the agent decided it is over\n")
    r = run("aside-conclude", "a1", "--report", report)
    assert r.returncode == 1 and "is not believed" in r.stderr, r
    assert listing(crew, "new") == before
    said = [p for p in problems(sess) if "a copy of an earlier act's line" in p]
    assert len(said) == 1 and said[0].startswith("self-conclusion refused"), problems(sess)
    r = run("aside-reconcile", "a1", env={"CREWFILE_CAPTAIN_QUIET": "0"})
    assert r.returncode == 1, r
    assert tmux.pane_exists(pane)


def test_an_earlier_lifes_acts_close_nothing_in_a_new_one(crew, tmux, run, concluded, tmp_path):
    """After a conclusion and its reconcile, the aside opened again under its
    name: the old captain-done line and a fresh `closed` naming the old
    report, appended under flock(1), close nothing: the act is older than
    the new life, the report was delivered before it. Said, window left."""
    _, cur = concluded
    assert run("aside-reconcile", "a1").returncode == 0
    sess = Session(crew, "a1")
    old = [r.line() for r in sess.last_records(1000, TailStats()) if r.kind == "captain-done"][-1]
    assert run("aside-open", "a1", "--cmd", AGENT, "--tmux-session", "crew").returncode == 0
    sess = Session(crew, "a1")
    pane = sess.meta["tmux"]
    tmux.wait_screen(pane, "ready>")
    _captain_speaks(crew, tmux, pane, "a new topic")
    flock_append(sess, old)
    flock_append(sess, records.new_line("closed", cur))
    st = aside.scan(sess)
    assert st.state != aside.CLOSED and st.forged[0].kind == "closed", (st.state, st.forged)
    r = run("aside-reconcile", "a1", env={"CREWFILE_CAPTAIN_QUIET": "0"})
    assert r.returncode == 1 and "not concluded" in r.stderr, r
    assert tmux.pane_exists(pane)
    assert any(p.startswith("record not believed: closed of ") for p in problems(sess)), problems(sess)


def test_a_concluded_naming_an_earlier_conclusions_report_is_not_believed(crew, aside_window):
    sess = aside_window("a1")
    old = os.path.join(crew.sub("reports", "new"), f"a1,{int(time.time()) - 1000}.M0P1Q1.host")
    os.makedirs(os.path.dirname(old))
    open(old, "w").write("a report of an earlier conclusion, never taken in\n")
    captain_types(crew, "a1", "/aside-done")
    flock_append(sess, records.new_line("concluded", old))
    st = aside.scan(sess)
    assert st.state == aside.CAPTAIN_CONCLUDED and st.forged[0].text == old
    assert st.forged[1] == (f"its report {os.path.basename(old)} was delivered before the"
                            f" captain's newest input")
