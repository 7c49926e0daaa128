"""An aside whose agent is the REAL Codex CLI or the REAL Gemini CLI (from npm,
in .cache/), offline against the stand-in model servers, in a private tmux
server: aside-open starts it (CREWFILE_AGENT_CMD), the agent's own tool call
that tries to conclude is denied (a `problem` record, the aside stays open),
the captain's typed conclusion concludes it (Codex: the `$aside-done` skill
mention; Gemini: the `/aside-done` command, both installed by `crew-hook
--install DIR --agent AGENT`), believed on the CLI's own transcript; the
agent hands its report over and aside-reconcile takes it in and tears the
window down. In Codex also a conclusion sent while the agent works (steered
into the running turn, whose turn_id its prompt hook gets again). The
Enter that sends a conclusion is the captain's key at a real tmux client
attached through a pseudo-terminal (conftest.AttachedClient).

The stand-in models run the shell command of a `RUN: ` line in the newest
user input: the captain's conclusion carries the hand-over as its note on a
line of its own (Codex: Ctrl-J in its composer; Gemini: the command puts
its arguments on a line of their own), as the installed command tells a
real model to do. Skipped when a CLI is not installed (make codex gemini).
"""
import contextlib
import os
import shlex
import shutil
import sys

import pytest

import agent_clis
from agent_rigs import (NOT_CI, codex_home, gemini_settings, pretrust, stand_in_server,
                        stop_codex_daemons, stop_geminis, wait_trusted_start,
                        write_codex_config)
from conftest import REPO, AttachedClient, cmd, last_captain_input, wait_for
from crewfile.asides import aside, evidence
from crewfile.core import logfile
from crewfile.session.prompt import markers_of
from crewfile.session.sessions import Session

CODEX = [b for b in [agent_clis.codex(REPO)] if b]
GEMINI = agent_clis.gemini(REPO)
DEADLINE = 120
PATH = f"{os.path.join(REPO, 'bin')}:{os.environ['PATH']}"
REPORT = "retries: exponential backoff, capped at 30 s"
# By its path: Codex runs its shell tool as a login shell, whose profile sets PATH anew.
HAND_OVER = (f"RUN: printf '{REPORT}\\n' | {sys.executable} {os.path.join(REPO, 'bin')}"
             f"/aside-conclude {{name}} --report -")


def records(crew, name):
    return [(r.kind, r.text) for r in
            Session(crew, name).last_records(200, logfile.TailStats())]


def kinds(crew, name):
    return [k for k, _ in records(crew, name)]


@pytest.fixture
def server(tmp_path):
    """start(script): a stand-in model server from tests/ (agent_rigs); its port."""
    with contextlib.ExitStack() as servers:
        yield lambda script: servers.enter_context(
            stand_in_server(script, tmp_path / f"{script}.log"))


def open_aside(crew, tmux, name, agent_cmd):
    tmux("new-session", "-d", "-s", "crew", "-n", "captain", "-x", "200", "-y", "50")
    r = cmd("aside-open", name, "--topic", "retry policy", "--tmux-session", "crew",
            env={"CREWFILE_AGENT_CMD": agent_cmd})
    assert r.returncode == 0, r.stderr
    return Session(crew, name).meta["tmux"]


def type_enter(tmux, pane, typed, ready=None, person=None, sess=None):
    """Enter, once the screen shows *typed* (and *ready*(screen) holds):
    Enter right behind fast keys is taken as part of a paste (Codex inserts
    a newline instead of sending), or by a completion list still open.
    *person*: the captain at a terminal presses it (for a conclusion: a
    person's key after session *sess*'s newest captain input)."""
    tmux.wait_screen(pane, lambda s: typed[-40:] in s and (ready is None or ready(s)),
                     timeout=DEADLINE)
    if person:
        person.type_after(last_captain_input(sess), b"\r")
    else:
        tmux("send-keys", "-t", pane, "Enter")


def turn(crew, name, tmux, pane, keys, ready=None, draft=None, person=None):
    """The captain types *keys* (literal text, or a list of tmux key names and
    texts) into the aside and presses Enter (at *person*'s terminal, if
    given: a conclusion's); returns once that turn ended.
    *draft* is all the prompt line then holds, when text typed before *keys*
    stands in front of them (a command, a skill mention): an Enter the agent
    did not take is told by the whole draft still standing there."""
    ended = kinds(crew, name).count("turn-ended")
    started = kinds(crew, name).count("turn-started")
    for k in keys if isinstance(keys, list) else [keys]:
        tmux("send-keys", "-t", pane, *(k[1:] if isinstance(k, tuple) else ("-l", k)))
    tmux.wait_screen(pane, lambda s: k[-40:] in s and (ready is None or ready(s)),
                     timeout=DEADLINE)
    sess = Session(crew, name)
    tmux.enter_until_taken(pane, k if draft is None else draft, lambda: kinds(crew, name).count("turn-started") > started,
                           markers_of(sess.meta), timeout=DEADLINE, person=person,
                           after=last_captain_input(sess))
    wait_for(lambda: kinds(crew, name).count("turn-ended") > ended, timeout=DEADLINE,
             what=lambda: f"the turn's end; records {records(crew, name)[-6:]};"
                          f" screen:\n{tmux.screen(pane)}")


def the_agent_cannot_conclude(crew, tmux, name, pane):
    """Its real shell tool call naming aside-done is denied before it runs."""
    turn(crew, name, tmux, pane, f"RUN: aside-done {name}")
    got = records(crew, name)
    assert ("problem", f"self-conclusion refused: the agent ran 'aside-done {name}'; denied") in got
    assert "captain-done" not in kinds(crew, name)
    assert aside.scan(Session(crew, name)).state == aside.OPEN


def the_captain_concludes_and_the_window_goes(crew, tmux, name, pane, evidence_kind):
    wait_for(lambda: "concluded" in kinds(crew, name), timeout=DEADLINE,
             what=lambda: f"concluded; records {records(crew, name)[-6:]}")
    sess = Session(crew, name)
    done = [r for r in sess.last_records(200, logfile.TailStats()) if r.kind == "captain-done"]
    assert len(done) == 1 and done[0].text == HAND_OVER.format(name=name)    # the note
    ev = evidence.evidence_of(sess, done[0])
    assert evidence_kind(ev.partition(" keys ")[0]) and ev.split(" keys ")[1].isdigit(), ev
    assert evidence.verdict(sess, done[0], aside.scan(sess).since) is None  # the CLI's own transcript agrees
    report = [t for k, t in records(crew, name) if k == "concluded"][-1]
    with open(report) as f:
        assert f.read() == REPORT + "\n"
    r = cmd("aside-reconcile", name, "--wait", str(DEADLINE), timeout=DEADLINE + 30)
    assert r.returncode == 0, (r.stderr, tmux("capture-pane", "-p", "-e", "-t", pane))
    assert r.stdout.startswith(f"report: {report.replace('/new/', '/cur/')}\n")
    assert "closed" in kinds(crew, name)       # (a turn may still end after it)
    wait_for(lambda: pane not in tmux("list-panes", "-a", "-F", "#{pane_id}", check=False),
             what="the aside's window killed")
    with open(report.replace("/new/", "/cur/") + ".scrollback") as f:
        assert f"aside-conclude {name}" in f.read()        # the conversation is kept


@pytest.fixture
def codex_aside(crew, tmux, server, tmp_path):
    """open(name): an aside whose agent is the real Codex, its hooks and the
    $aside-done skill installed; its pane, once Codex waits for the captain."""
    if not CODEX:
        pytest.skip("Codex CLI not installed in .cache/codex-VERSION")
    port = server("responses_server.py")
    home = codex_home()

    def open_codex(name):
        work = tmp_path / "work"
        write_codex_config(home, port, work)
        r = cmd("crew-hook", "--install", home, "--agent", "codex")
        assert r.returncode == 0 and "skills/aside-done/SKILL.md" in r.stdout, r.stderr
        work.mkdir()
        # Its hooks trusted as Codex keeps a captain's `Trust all and continue`
        # (its review answered once in this test session; no bypass flag).
        pretrust(tmux, home, str(work))
        # The agent writes its report into the crew directory, outside its
        # workspace: the sandbox gets it as a writable root (--add-dir, which
        # Codex ignores unless the sandbox is workspace-write).
        agent = (f"cd {shlex.quote(str(work))} && exec env CODEX_HOME={home} HOME={home}"
                 f" FAKE_KEY=x PATH={shlex.quote(PATH)} {CODEX[0]}"
                 f" -a never -s workspace-write --add-dir {shlex.quote(crew.root)}")
        pane = open_aside(crew, tmux, name, agent)
        wait_trusted_start(tmux, pane)
        return pane
    try:
        yield open_codex
    finally:
        stop_codex_daemons(home)
        shutil.rmtree(home, ignore_errors=True)


def mention_aside_done(tmux, pane):
    """The captain mentions the installed skill: `$aside` offers it, Enter takes it."""
    tmux("send-keys", "-t", pane, "-l", "$aside")
    type_enter(tmux, pane, "[Skill]")
    tmux.wait_screen(pane, "\u203a $aside-done", timeout=DEADLINE)


def test_an_aside_with_codex_concluded_by_the_captains_skill_mention(crew, tmux, codex_aside,
                                                                     request):
    pane = codex_aside("cx")
    the_agent_cannot_conclude(crew, tmux, "cx", pane)
    assert Session(crew, "cx").meta["agent"] == "codex"
    # `/aside-done` is no command in Codex: it says so and sends nothing.
    tmux("send-keys", "-t", pane, "-l", "/aside-done")
    type_enter(tmux, pane, "\u203a /aside-done")
    tmux.wait_screen(pane, "Unrecognized command '/aside-done'", timeout=DEADLINE)
    tmux("send-keys", "-t", pane, "End")            # it left the cursor at the start
    tmux("send-keys", "-t", pane, "-N", str(len("/aside-done")), "BSpace")
    tmux.wait_screen(pane, "Ask Codex", timeout=DEADLINE)
    person = AttachedClient(tmux, pane)         # the captain comes to the terminal (as below)
    request.addfinalizer(person.close)
    mention_aside_done(tmux, pane)
    turn(crew, "cx", tmux, pane, [("", "C-j"), HAND_OVER.format(name="cx")],
         draft="$aside-done " + HAND_OVER.format(name="cx"), person=person)
    the_captain_concludes_and_the_window_goes(crew, tmux, "cx", pane, lambda ev: ev == "prompt -")


def test_codex_a_conclusion_sent_while_the_agent_works_counts(crew, tmux, codex_aside,
                                                               tmp_path, request):
    """Enter while Codex works steers the message into the running turn, and
    its prompt hook gets that turn's id again: the conclusion still counts."""
    pane = codex_aside("cx")
    go = tmp_path / "go"
    ended = kinds(crew, "cx").count("turn-ended")
    tmux("send-keys", "-t", pane, "-l", f"HOLD: {go}")
    type_enter(tmux, pane, f"HOLD: {go}")
    tmux.wait_screen(pane, "esc to interrupt", timeout=DEADLINE)      # it works
    # Codex shows it at once and runs its prompt hook a moment later: the
    # captain's next key counts only after that prompt's record.
    wait_for(lambda: "turn-started" in kinds(crew, "cx"), timeout=DEADLINE,
             what="the HOLD prompt recorded")
    # The captain comes to the terminal only now: a client attached while
    # Codex starts had it redraw its start screen over the prompt (seen).
    person = AttachedClient(tmux, pane)
    request.addfinalizer(person.close)
    mention_aside_done(tmux, pane)
    tmux("send-keys", "-t", pane, "C-j")
    tmux("send-keys", "-t", pane, "-l", HAND_OVER.format(name="cx"))
    type_enter(tmux, pane, HAND_OVER.format(name="cx"), person=person, sess=Session(crew, "cx"))
    wait_for(lambda: "captain-done" in kinds(crew, "cx"), timeout=DEADLINE,
             what=lambda: f"captain-done; records {records(crew, 'cx')[-6:]}")
    assert kinds(crew, "cx").count("turn-ended") == ended                # still the same turn
    go.touch()
    the_captain_concludes_and_the_window_goes(crew, tmux, "cx", pane, lambda ev: ev == "prompt -")


@pytest.fixture
def gemini_home(tmp_path):
    """The HOME of the Gemini CLI a test starts; after it, every Gemini
    process run with that HOME is ended (its launcher outlives the window
    and the tmux server: seen here, a launcher and its child left running
    with parent 1 after the test)."""
    home = tmp_path / "home"
    yield home
    stop_geminis(str(home))


@pytest.mark.skipif(not GEMINI, reason="Gemini CLI not installed in .cache/gemini-VERSION")
def test_an_aside_with_gemini_concluded_by_the_captains_command(crew, tmux, server, gemini_home,
                                                                 request):
    port = server("gemini_server.py")
    home = gemini_home
    work = home.parent / "work"
    # Its shell tool allowed without a dialog, as a user allows it in
    # settings.json (a YOLO -y pane: test_gemini_e2e).
    gemini_settings(str(home), tools={"allowed": ["run_shell_command"]})
    r = cmd("crew-hook", "--install", str(home / ".gemini"), "--agent", "gemini")
    assert r.returncode == 0 and "commands/aside-done.toml" in r.stdout, r.stderr
    work.mkdir()
    # Gemini CLI runs non-interactively under CI variables (agent_rigs.NOT_CI).
    agent = (f"cd {shlex.quote(str(work))} && exec {NOT_CI} HOME={home} GEMINI_API_KEY=x"
             f" GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:{port} GEMINI_CLI_TRUST_WORKSPACE=true"
             f" PATH={shlex.quote(PATH)} {GEMINI} -m gemini-2.5-flash")
    pane = open_aside(crew, tmux, "gm", agent)
    tmux.wait_screen(pane, "Type your message", timeout=DEADLINE)
    person = AttachedClient(tmux, pane)
    request.addfinalizer(person.close)

    the_agent_cannot_conclude(crew, tmux, "gm", pane)
    assert Session(crew, "gm").meta["agent"] == "gemini"
    # As a person types it: the command, its line in the completion list,
    # then the note, and Enter once the list has closed (an Enter the list
    # takes runs the command without the note, or not at all).
    tmux("send-keys", "-t", pane, "-l", "/aside-done")
    listed = "Conclude this aside"                          # the command's description
    tmux.wait_screen(pane, listed, timeout=DEADLINE)
    turn(crew, "gm", tmux, pane, " " + HAND_OVER.format(name="gm"),
         ready=lambda screen: listed not in screen,
         draft="/aside-done " + HAND_OVER.format(name="gm"), person=person)
    the_captain_concludes_and_the_window_goes(crew, tmux, "gm", pane,
                                              lambda ev: ev == "prompt -")
