"""End to end with the REAL Claude Code CLI, offline in a private tmux server,
against the scripted stand-in model (tests/model_server.py), with
crew-hook installed by `crew-hook --install PROJECT/.claude`.

1. A whole aside: the captain types /aside in the primary (a claude too),
   whose model runs aside-open, which starts claude (CREWFILE_AGENT_CMD); the
   aside's agent is told the rule; captain turns; a notice reaches the model and never the
   screen; the agent trying to conclude by itself (aside-conclude, then
   aside-done) is refused; the captain's /aside-done (installed as a project
   command); the report through aside-conclude; aside-reconcile; of it all,
   only the refusals and the conclusion pass wake-filter.
2. The primary: a wake arriving during a turn makes that turn continue once.

`make test` installs the CLI (make claude-code). Without it these tests are
skipped with a loud message, never silently.
"""
import json
import os
import sys

from conftest import BIN, AttachedClient, cmd, wait_for
from claude_harness import (ClaudeRig, hook_command, kinds, make_rig, primary_claude, records,
                            typed_by, watched, require_real_claude)
from crewfile.wake import inbox
from crewfile.session.sessions import Session, register

NOTICE = "NOTICE-MARK-4711"
WAKE = "WAKE-MARK-0815"


def request_text(rig):
    return "\n".join(json.dumps(r) for r in rig.main_requests())


def turn(rig, crew, name, text, script=None, person=None):
    """One captain turn (typed at *person*'s terminal, if given, else sent with
    send-keys); returns when its turn-ended record is written."""
    ended = kinds(crew, name).count("turn-ended")
    rig.set_script(script or [])
    if person:
        typed_by(person, rig, Session(crew, name), text)
    else:
        rig.turn(text)
    wait_for(lambda: kinds(crew, name).count("turn-ended") > ended, what=f"turn-ended of {text!r}")
    rig.wait_idle()


def test_a_whole_aside_with_the_real_claude_code(crew, tmux, tmp_path):
    with primary_claude(crew, tmux, tmp_path) as (rig, _):      # the primary is a claude too
        # The captain types /aside in the primary; its model runs aside-open.
        turn(rig, crew, "firstmate", "/aside pagination of the v2 API",
             ["RUN: aside-open design --topic 'pagination of the v2 API' --primary "
              "\"$CREWFILE_SESSION\" --tmux-session crew"])
        assert "The captain asked for an aside on: pagination of the v2 API" in request_text(rig)
        aside = Session(crew, "design")
        wait_for(lambda: aside.exists() and "tmux" in Session(crew, "design").meta,
                 what="aside-open's window")
        aside = Session(crew, "design")
        assert aside.meta["kind"] == "aside" and aside.meta["primary"] == "firstmate"
        rig.attach(aside.meta["tmux"])
        wait_for(lambda: "started" in kinds(crew, "design"), what="SessionStart hook")
        meta = Session(crew, "design").meta
        assert meta["agent_session_id"] and meta["transcript_path"].endswith(".jsonl")
        assert meta["cwd"] == str(rig.project)

        # A notice for the aside's model: delivered as a fact, never on screen.
        inbox.post(crew, "design", "job", f"j-1 ended: exit 0 {NOTICE}")
        turn(rig, crew, "design", "what about pagination?")
        assert ("captain", "what about pagination?") in records(crew, "design")
        sent = request_text(rig)
        assert "You never conclude the aside yourself" in sent       # told at SessionStart
        assert "pagination of the v2 API" in sent
        assert f"crewfile notice: job j-1 ended: exit 0 {NOTICE}" in sent
        assert "UserPromptSubmit hook additional context" in sent
        assert inbox.pending(crew, "design") == []
        assert NOTICE not in rig.screen(history=True)
        assert "You never conclude" not in rig.screen(history=True)
        assert not any(k == "captain" and NOTICE in t for k, t in records(crew, "design"))

        # The agent decides on its own that it is settled: refused, twice.
        turn(rig, crew, "design", "I think that covers it",
             ["RUN: echo 'settled' | aside-conclude \"$CREWFILE_SESSION\" --report -"])
        assert ("problem", "self-conclusion refused") in records(crew, "design")
        assert "the captain has not concluded this aside" in request_text(rig)
        turn(rig, crew, "design", "anything else?", ['RUN: aside-done "$CREWFILE_SESSION"'])
        assert ("problem", "self-conclusion refused: the agent ran "
                "'aside-done \"$CREWFILE_SESSION\"'; denied") in records(crew, "design")
        assert "captain-done" not in kinds(crew, "design")
        assert "concluding an aside is the captain's act only" in request_text(rig)
        assert "concluded" not in kinds(crew, "design")

        # The captain concludes at a terminal; the agent hands over its report.
        person = AttachedClient(tmux, aside.meta["tmux"])
        try:
            turn(rig, crew, "design", "/aside-done thanks, ship it",
                 ["RUN: printf 'Decision: cursor pagination.\\n' | "
                  "aside-conclude \"$CREWFILE_SESSION\" --report -"], person)
            wait_for(lambda: "concluded" in kinds(crew, "design"), what="concluded")
        finally:
            person.close()                          # then goes back to the primary
        assert ("captain-done", "thanks, ship it") in records(crew, "design")
        assert "<command-name>/aside-done</command-name>" in request_text(rig)
        assert NOTICE not in rig.screen(history=True)

        rec = cmd("aside-reconcile", "design")
        assert rec.returncode == 0, rec.stderr
        out = dict(line.split(": ", 1) for line in rec.stdout.splitlines())
        with open(out["report"]) as f:
            assert f.read() == "Decision: cursor pagination.\n"
        with open(out["scrollback"]) as f:
            scroll = f.read()
        assert "what about pagination?" in scroll and "/aside-done thanks" in scroll
        assert NOTICE not in scroll
        # closed (a SessionEnd hook of the killed claude may add `ended` after it)
        assert ("closed", out["report"]) in records(crew, "design")
        assert kinds(crew, "design").index("closed") > kinds(crew, "design").index("concluded")
        wait_for(lambda: aside.meta["tmux"] not in tmux("list-panes", "-a", "-F", "#{pane_id}",
                                                         check=False),
                 what="the aside's window to be killed")

        # What of all this would wake the primary: the refusals and the conclusion.
        watch = cmd("crew-watch", "--from-start", "--once")
        woke = cmd("wake-filter", input=watch.stdout).stdout.splitlines()
        from_aside = [line.split(" ", 3)[2].rstrip(":") for line in woke if " design " in line]
        assert from_aside == ["problem", "problem", "concluded"], woke


def test_primary_continues_its_turn_for_a_wake(crew, tmux, tmp_path):
    require_real_claude()
    register(crew, "firstmate", kind="primary")
    rig = make_rig(tmp_path, tmux, env={"CREWFILE_SESSION": "firstmate",
                                        "CREWFILE_DIR": crew.root})
    with watched(rig, crew, "firstmate"):
        rig.start()
        gate = tmp_path / "end-of-reply"
        rig.set_script([f"HOLD: {gate}"])
        rig.send("how is the crew?")
        # The turn's request reached the model: UserPromptSubmit's hook is over
        # (a wake posted before its drain would go with the prompt instead).
        wait_for(lambda: any("how is the crew?" in json.dumps(r) for r in rig.main_requests()),
                 what="the turn's request at the model")
        inbox.post(crew, "firstmate", "wake", f"w2 blocked: needs a database {WAKE}")
        gate.touch()                                   # the reply ends; Stop fires
        wait_for(lambda: "turn-ended" in kinds(crew, "firstmate"), what="turn-ended")
        got = kinds(crew, "firstmate")
        assert got[got.index("turn-started"):] == ["turn-started", "turn-ended"]
        assert inbox.pending(crew, "firstmate") == []
        continued = [r for r in rig.main_requests() if WAKE in json.dumps(r)]
        assert continued and "Stop hook additional context: crewfile wake:" in json.dumps(
            continued[0])
        assert "Stop hook error" not in rig.screen(history=True)


def test_permission_dialog_is_waiting_and_a_crew_session_registers_itself(crew, tmux, tmp_path):
    require_real_claude()
    path = f"{os.path.dirname(sys.executable)}:{BIN}:{os.environ['PATH']}"
    rig = ClaudeRig(tmp_path, tmux.sock, {}, script=[], allowed_tools=(),
                    env={"PATH": path, "CREWFILE_SESSION": "w1", "CREWFILE_DIR": crew.root})
    rig.project.mkdir(parents=True, exist_ok=True)
    cmd("crew-hook", "--install", rig.project / ".claude", "--command", hook_command(), check=True)
    with watched(rig, crew, "w1"):
        rig.start()
        wait_for(lambda: Session(crew, "w1").exists() and "started" in kinds(crew, "w1"),
                 what="w1 registered by its SessionStart hook")
        assert Session(crew, "w1").meta["kind"] == "crew"
        rig.send("RUN: touch made-by-the-agent")
        wait_for(lambda: ("waiting", "permission") in records(crew, "w1"), timeout=40,
                 what="the permission_prompt notification")
        st = cmd("status-show", "w1", "--json")
        state = json.loads(st.stdout)
        assert state["generating"] == "yes" and state["waiting"] is True
        rig.keys("Enter")                       # the captain allows it (first choice)
        wait_for(lambda: kinds(crew, "w1")[-1] == "turn-ended", what="turn-ended")
        assert kinds(crew, "w1")[-3:] == ["waiting", "turn-started", "turn-ended"]
        assert records(crew, "w1")[-2] == ("turn-started", "permission answered")
        assert (rig.project / "made-by-the-agent").exists()
