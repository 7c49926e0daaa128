"""With the real Claude Code CLI as a primary: the tokens of its wake turns,
counted from its own transcript, against what reached the stand-in model.

Turns: one typed by the captain; wake-send's announcement, typed by
wake-send itself through delivery (a wake turn); one typed by the captain
whose Stop hook then carried a wake and continued it with a tool call (the
rest of that turn is a wake turn). The stand-in model answers every request
with usage 10 in + 2 out, so each main-loop request is 12 tokens, and a
request belongs to a wake turn when the newest prompt it carries is the
announcement or the Stop hook's wakes."""
import json
import sys

from conftest import cmd, wait_for
from claude_harness import kinds, make_rig, require_real_claude, watched
from crewfile.wake import inbox, words
from crewfile.views import tokens
from crewfile.session.sessions import Session, register

PER_REQUEST = 12


def newest_prompt(req):
    """The text of the newest user message that is not a tool's result."""
    for m in reversed(req.get("messages") or []):
        if m.get("role") != "user":
            continue
        c = m.get("content")
        if isinstance(c, str):
            return c
        if any(isinstance(b, dict) and b.get("type") == "tool_result" for b in c or []):
            continue
        return "\n".join(b.get("text", "") for b in c or [] if isinstance(b, dict))
    return ""


def test_wake_turns_of_a_real_claude_primary(crew, tmux, tmp_path):
    require_real_claude()
    register(crew, "w2", kind="crew")
    rig = make_rig(tmp_path, tmux, env={"CREWFILE_SESSION": "firstmate",
                                        "CREWFILE_DIR": crew.root, "CREWFILE_TMUX": tmux.sock})
    with watched(rig, crew, "firstmate"):
        pane = tmux.new_window(rig.prepare(), name="firstmate", session="crew")
        register(crew, "firstmate", kind="primary", tmux=pane)
        rig.attach(pane)
        wait_for(lambda: "started" in kinds(crew, "firstmate"), what="SessionStart hook")

        def ended(n):
            wait_for(lambda: kinds(crew, "firstmate").count("turn-ended") >= n, what="turn-ended")
            rig.wait_ready()

        rig.turn("hello from the captain")
        ended(1)
        line = "2026-11-29T23:00:00.000Z w2 problem: needs a database"
        sent = cmd("wake-send", "firstmate", "--window", "0.01", input=line + "\n")
        # typed, or (Claude Code's asyncRewake hook armed) announced with no keystroke
        assert "holding" not in sent.stderr, sent.stderr
        ended(2)
        go = tmp_path / "go"
        rig.set_script([f"HOLD: {go}", "RUN: echo from-the-wake"])
        rig.send("a long one")
        # posted once the turn's request reached the model: its prompt hook's
        # drain is over, so the wake waits for the Stop hook
        wait_for(lambda: any("a long one" in newest_prompt(r) for r in rig.main_requests()),
                 what="turn 3's request")
        inbox.post(crew, "firstmate", "wake", "2026-11-29T23:00:01.000Z w2 done: shipped")
        go.write_text("")
        ended(3)

        requests = rig.main_requests()
        say = words.DEFAULT_SAY.format(n="1 wake", count=1, primary="firstmate", **{"from": "w2"})
        woken = [r for r in requests
                 if say in newest_prompt(r) or words.WAKE_HEADER in newest_prompt(r)]
        prompts = json.dumps([newest_prompt(r)[:80] for r in requests])
        # the announcement's answer, the tool call, its answer
        assert len(woken) >= 3, prompts
        total, waked = PER_REQUEST * len(requests), PER_REQUEST * len(woken)

        path = Session(crew, "firstmate").meta["transcript_path"]
        # Claude Code appends its transcript from a queue drained on a timer
        # (FLUSH_INTERVAL_MS=100 in 2.x): the last message can land after the
        # Stop hook ran and the box is back, later still on a loaded machine.
        seen = []

        def counted():
            seen[:] = [tokens.read(path)]
            return seen[0].total >= total
        wait_for(counted, timeout=60, every=0.1,
                 what=lambda: (f"the transcript to count {total} tokens (has"
                               f" {seen[0].total}); requests: {prompts}"))
        t = seen[0]
        assert (t.total, t.wake) == (total, waked), prompts
        top = cmd("crew-top", "--once").stdout
        assert (f"wake turns: {tokens.share(waked, total)} of firstmate's tokens"
                f" ({waked} of {total})") in top, top
        print(f"{len(requests)} requests, {total} tokens, {waked} in wake turns", file=sys.stderr)
        assert cmd("crew-status").stdout.endswith(f" {total} tok\n")
