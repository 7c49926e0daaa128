"""With the real Claude Code CLI: a primary with a backlog of wakes receives
every one inline, exactly once, over several turns; nothing is marked read
that did not reach the model (the stand-in model's request log).

Also the measurement behind hook.INLINE_LIMIT: a hook's additionalContext of
INLINE_LIMIT characters reaches the model inline; one more and Claude Code
saves it to a file and passes a preview."""
import json
import re
import sys

from conftest import wait_for
from claude_harness import ClaudeRig, kinds, make_rig, require_real_claude, watched
from crewfile.hooks import hook
from crewfile.wake import inbox
from crewfile.session.sessions import register

TS = "2026-11-29T22:01:17.123Z"


def test_400_pending_wakes_reach_the_model_inline_each_exactly_once(crew, tmux, tmp_path):
    require_real_claude()
    register(crew, "firstmate", kind="primary")
    for i in range(400):
        inbox.post(crew, "firstmate", "wake", f"{TS} w{i} done: shipped ITEM-{i:03d}-END")
    rig = make_rig(tmp_path, tmux, env={"CREWFILE_SESSION": "firstmate",
                                        "CREWFILE_DIR": crew.root})
    with watched(rig, crew, "firstmate"):
        rig.start()
        turns = 0
        while inbox.pending(crew, "firstmate"):
            assert turns < 40, "the backlog never emptied"
            rig.turn("go on")
            wait_for(lambda: kinds(crew, "firstmate")[-1] == "turn-ended", what="turn-ended")
            turns += 1
            # what is read is exactly what the model has been sent so far
            sent = json.dumps(rig.main_requests())
            with open(crew.session_dir("firstmate") + "/inbox.read") as f:
                read = re.findall(r"ITEM-(\d{3})-END", f.read())
            assert set(read) <= set(re.findall(r"ITEM-(\d{3})-END", sent))
        assert turns >= 2
        requests = rig.main_requests()
        everything = json.dumps(requests)
        assert "persisted-output" not in everything and "Output too large" not in everything
        # the newest request carries the whole conversation: each wake in it once
        last = json.dumps(requests[-1])
        counts = {i: last.count(f"ITEM-{i:03d}-END") for i in range(400)}
        assert set(counts.values()) == {1}, {i: c for i, c in counts.items() if c != 1}
        print(f"400 wakes over {turns} turns, {len(requests)} model requests", file=sys.stderr)


def test_inline_limit_is_what_claude_code_shows_inline(tmp_path, tmux):
    require_real_claude()
    size = tmp_path / "size"
    script = tmp_path / "hook.py"
    script.write_text(
        "import json, sys\nsys.stdin.read()\n"
        f"n = int(open({str(size)!r}).read())\n"
        "body = ('MARK-%d ' % n).ljust(n - 4, 'x') + ' END'\n"
        "print(json.dumps({'hookSpecificOutput': {'hookEventName': 'UserPromptSubmit',"
        " 'additionalContext': body}}))\n")
    settings = {"hooks": {"UserPromptSubmit": [{"hooks": [
        {"type": "command", "command": f"{sys.executable} {script}"}]}]}}
    rig = ClaudeRig(tmp_path, tmux.sock, settings, script=[])
    try:
        rig.start()
        for n, inline in [(hook.INLINE_LIMIT, True), (hook.INLINE_LIMIT + 1, False)]:
            size.write_text(str(n))
            before = len(rig.main_requests())
            rig.turn(f"size {n}")
            new = json.dumps(rig.main_requests()[before:][-1]["messages"][-1])
            assert f"MARK-{n} " in new
            assert ("persisted-output" not in new) == inline, new[:400]
    finally:
        rig.stop()
