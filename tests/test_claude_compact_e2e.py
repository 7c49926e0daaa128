"""Claude Code compacting its conversation inside a running turn, with the
REAL CLI offline in a private tmux server against the stand-in model
(tests/model_server.py), crew-hook installed as users install it.

A tool call's reply reports 990,000 input tokens (past the ~967k threshold,
tests/CLAUDE_FINDINGS.md "Auto-compact"): the CLI compacts before its next
request and goes on with the turn from the summary. Whatever hooks fire for
the compaction, the session must read as generating until the turn's own
Stop: a nudge or a wake typed then would land in a working agent.

Without the CLI (make claude-code) this test is skipped loudly.
"""
import json
import shlex

from agent_rigs import COMPACTION_EVENTS as EVENTS, logged_hook_events
from conftest import wait_for
from claude_harness import crew_rig, kinds, require_real_claude, start_registered as start
from claude_harness import watched
from crewfile.session import verdict
from crewfile.session.sessions import Session


def compacted_by_then(log):
    """The hooks logged so far, once the compaction's last one (PostCompact) is."""
    events = logged_hook_events(log)
    return events if ("PostCompact", "auto") in events else None


def test_a_compaction_mid_turn_leaves_the_session_generating(crew, tmux, tmp_path):
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
        rig.set_script(["BIG: echo one", f"HOLD: {gate}"])
        rig.send("work on it")
        # the reply after the compaction is streaming (HOLD): the turn goes on
        wait_for(lambda: any("continued from a previous conversation" in json.dumps(r)
                             for r in rig.main_requests()),
                 timeout=120, what="the turn going on after the compaction")
        assert not rig.stops.exists()                   # the turn has not ended
        mid = wait_for(lambda: compacted_by_then(log), what="the compaction's hooks")
        wait_for(lambda: "compacted" in kinds(crew, "w1"), what="crew-hook's record of it")
        assert mid[mid.index(("PreCompact", "auto")):] == [
            ("PreCompact", "auto"), ("SessionStart", "compact"), ("PostCompact", "auto")], mid
        assert kinds(crew, "w1")[-1] == "compacted"
        assert "turn-ended" not in kinds(crew, "w1")
        assert verdict.of(Session(crew, "w1")).generating == verdict.YES
        gate.touch()
        wait_for(lambda: "turn-ended" in kinds(crew, "w1"), timeout=60, what="the turn's end")
        assert logged_hook_events(log)[len(mid):] == [("Stop", "")]
        assert verdict.of(Session(crew, "w1")).generating == verdict.NO
