"""Claude Code compacting its conversation inside a running turn, with the
REAL CLI offline in a private tmux server against the stand-in model
(tests/model_server.py), crew-hook installed as users install it.

Two ways into it (tests/CLAUDE_FINDINGS.md, "Auto-compact"): a tool call's
reply reports 990,000 input tokens, past the ~967k threshold (`BIG:`), or the
API refuses the tool result's request as `prompt is too long` (`TOOLONG:`).
A release that compacts there goes on with the turn from the summary; one
that does not either goes on (past the threshold) or fails the turn (refused).
Whatever hooks fire, the session must read as generating until the turn's own
Stop: a nudge or a wake typed then would land in a working agent.

Without the CLI (make claude-code) this test is skipped loudly.
"""
import json
import shlex

import pytest

from agent_rigs import COMPACTION_EVENTS as EVENTS, logged_hook_events
from conftest import wait_for
from claude_harness import crew_rig, kinds, require_real_claude, start_registered as start
from claude_harness import watched
from crewfile.session import verdict
from crewfile.session.sessions import Session

# Releases measured not to compact inside a turn (CLAUDE_FINDINGS.md): past the
# threshold they send the next request as it is; refused, they fail the turn.
NO_COMPACTION_IN_A_TURN = {"2.1.197"}
BEFORE = [("SessionStart", "startup"), ("UserPromptSubmit", ""), ("PreToolUse", ""),
          ("PostToolUse", "")]
COMPACTION = [("PreCompact", "auto"), ("SessionStart", "compact"), ("PostCompact", "auto")]


def compacted_by_then(log):
    """The hooks logged so far, once the compaction's last one (PostCompact) is."""
    events = logged_hook_events(log)
    return events if ("PostCompact", "auto") in events else None


def is_compaction(req):
    return "CRITICAL: Respond with TEXT ONLY" in json.dumps(req)


def generating(crew):
    return verdict.of(Session(crew, "w1")).generating


@pytest.mark.parametrize("verb", ["BIG", "TOOLONG"])
def test_a_compaction_mid_turn_leaves_the_session_generating(crew, tmux, tmp_path, verb):
    require_real_claude()
    rig = crew_rig(crew, tmux, tmp_path)
    log = tmp_path / "events.jsonl"
    q = shlex.quote(str(log))
    rig.settings = {"hooks": {e: [{"hooks": [{"type": "command",
                                              "command": f"cat >> {q}; echo >> {q}"}]}]
                              for e in EVENTS}}
    with watched(rig, crew, "w1"):
        start(rig, crew)
        gate = tmp_path / "end-of-reply"
        rig.set_script([f"{verb}: echo one", f"HOLD: {gate}"])
        rig.send("work on it")
        if rig.version() in NO_COMPACTION_IN_A_TURN:
            return no_compaction(rig, crew, log, verb)
        # the reply after the compaction is streaming (HOLD): the turn goes on
        wait_for(lambda: any("continued from a previous conversation" in json.dumps(r)
                             for r in rig.main_requests()),
                 timeout=120, what="the turn going on after the compaction")
        assert not rig.stops.exists()                   # the turn has not ended
        mid = wait_for(lambda: compacted_by_then(log), what="the compaction's hooks")
        wait_for(lambda: "compacted" in kinds(crew, "w1"), what="crew-hook's record of it")
        assert mid[mid.index(("PreCompact", "auto")):] == COMPACTION, mid
        assert kinds(crew, "w1")[-1] == "compacted"
        assert "turn-ended" not in kinds(crew, "w1")
        assert generating(crew) == verdict.YES
        gate.touch()
        wait_for(lambda: "turn-ended" in kinds(crew, "w1"), timeout=60, what="the turn's end")
        assert logged_hook_events(log)[len(mid):] == [("Stop", "")]
        assert generating(crew) == verdict.NO


def no_compaction(rig, crew, log, verb):
    """A release that does not compact inside a turn: past the threshold the
    turn goes on to its end; refused, it fails. Either way the turn's end is
    recorded once, and no compaction request is sent."""
    end = "turn-failed" if verb == "TOOLONG" else "turn-ended"
    wait_for(lambda: end in kinds(crew, "w1"), timeout=60, what=f"the turn's {end}")
    turn = kinds(crew, "w1")
    assert turn[turn.index("turn-started"):] == ["turn-started", end]
    if verb == "TOOLONG":
        assert logged_hook_events(log) == BEFORE + [("PreCompact", "auto")]
        assert "Context limit reached" in rig.screen()
    else:
        assert logged_hook_events(log) == BEFORE + [("Stop", "")]
    assert generating(crew) == verdict.NO
    assert not any(is_compaction(r) for r in rig.main_requests())
