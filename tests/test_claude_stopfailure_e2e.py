"""The account's stop, background tasks and subagents, with the REAL Claude
Code CLI offline in a private tmux server against the stand-in model
(tests/model_server.py), crew-hook installed as users install it.

1. The stand-in answers a turn with 429 `rate_limit_error` (not to be
   retried): Claude Code fires StopFailure and no Stop; crew-hook records
   `account-blocked`, which the wake filter passes once. Every nudge is held
   while the block stands (nothing typed, nothing reaches the model); after
   the hold the nudge goes out once, the turn succeeds and the block lifts.
2. A turn that ends with a background shell still running is `background`,
   not finished: nudges are held until the agent's own follow-up turn ends
   (its prompt, the CLI's task notification, is no captain input).
3. A subagent (Agent tool, run in the background by 2.1.332, within the
   turn by 2.1.197) stopping is a `subagent` record: it never ends the
   parent's turn and never wakes the primary; only the parent's own end
   does, once.

All three pass with 2.1.332 (the default) and with 2.1.197
(CREWFILE_CLAUDE naming its binary).

Without the CLI (make claude-code) these tests are skipped loudly.
"""
import json
import time

from conftest import cmd, make_due, wait_for
from claude_harness import crew_rig as harness_crew_rig
from claude_harness import (kinds, records, require_real_claude, start_registered as start,
                            stop_payloads, user_texts, watched)
from crewfile.core.records import parse_timestamp
from crewfile.session import delivery, verdict
from crewfile.session.sessions import Session
from crewfile.core.logfile import TailStats

NUDGE = "NUDGE-MARK-4291 carry on with the plan"
HOLD = 8            # seconds the block stands ($CREWFILE_ACCOUNT_HOLD for the hook)


def crew_rig(crew, tmux, tmp_path, name="w1", **kwargs):
    return harness_crew_rig(crew, tmux, tmp_path, name,
                            env={"CREWFILE_ACCOUNT_HOLD": str(HOLD)}, **kwargs)


def wakes(crew, name):
    """What wake-filter passes of the session's records, as crew-watch prints them."""
    lines = "".join(f"{r.ts} {name} {r.line().split(' ', 1)[1]}"
                    for r in Session(crew, name).last_records(1000, _stats()))
    p = cmd("wake-filter", input=lines)
    assert (p.returncode, p.stderr) == (0, ""), p.stderr
    return [line.split(" ", 3)[2].rstrip(":") for line in p.stdout.splitlines()]


def _stats():
    return TailStats()


def nudges(crew, name="w1"):
    p = cmd("nudge-tick", "--quiet")
    assert (p.returncode, p.stderr) == (0, ""), p.stderr
    return [(k, t) for k, t in records(crew, name) if k.startswith("nudge")]


def test_a_429_blocks_holds_every_nudge_and_resumes_once(crew, tmux, tmp_path):
    require_real_claude()
    rig = crew_rig(crew, tmux, tmp_path)
    with watched(rig, crew, "w1"):
        start(rig, crew)
        reset = int(time.time()) + 3600
        rig.set_script([f"LIMIT: {reset}"])
        rig.send("start the work")
        blocked = wait_for(lambda: [(t, r) for (k, t), r in zip(
            records(crew, "w1"), Session(crew, "w1").last_records(1000, _stats()))
            if k == "account-blocked"], timeout=60, what="the account-blocked record")
        text, rec = blocked[0]
        error, word, until = text.split(": ", 1)[0].split(" ")
        assert (error, word) == ("rate_limit", "until")
        assert parse_timestamp(until) - parse_timestamp(rec.ts) == HOLD
        assert text.endswith(f": API Error: Request rejected (429) · This request would exceed"
                             f" your rate limit; it resets at {reset}.")
        got = kinds(crew, "w1")
        assert got[got.index("turn-started"):] == ["turn-started", "account-blocked"]
        assert wakes(crew, "w1") == ["account-blocked"]          # one wake

        sess = Session(crew, "w1")
        ok, why = delivery.deliver(sess, "wake-send's line")      # wake-send's way in
        assert (ok, why.code) == (False, delivery.ACCOUNT_BLOCKED)
        add = cmd("nudge-add", "--session", "w1", "--every", "600", "--message", NUDGE)
        assert add.returncode == 0, add.stderr
        sid = add.stdout.strip()
        make_due(crew, sid)
        held = wait_for(lambda: nudges(crew), what="the held nudge's refusal")
        assert held == [("nudge-refused", held[0][1])]
        assert held[0][1].startswith(f"{sid} account-blocked: the account stopped its turn:"
                                     f" rate_limit (API Error: Request rejected (429)")
        assert held[0][1].endswith(f"types nothing into it until {until}")
        assert NUDGE not in rig.screen() and NUDGE not in json.dumps(rig.requests())

        sent = wait_for(lambda: [r for r in nudges(crew) if r[0] == "nudge"], timeout=60,
                        what="the nudge once the block's time passed")
        assert sent == [("nudge", f"{sid} attempt 1/100: delivered")]
        assert time.time() >= parse_timestamp(until)
        wait_for(lambda: "turn-ended" in kinds(crew, "w1"), what="the resumed turn's end")
        for _ in range(3):
            nudges(crew)
        assert [r for r in records(crew, "w1") if r[0] == "nudge"] == sent
        assert user_texts(rig).count(NUDGE) == 1                  # resumed once
        assert verdict.of(sess).account is None                   # a turn succeeded
        assert wakes(crew, "w1") == ["account-blocked", "turn-ended"]


def test_a_turn_ended_with_a_background_shell_running_is_not_finished(crew, tmux, tmp_path):
    require_real_claude()
    rig = crew_rig(crew, tmux, tmp_path)
    gate = tmp_path / "background-may-end"
    with watched(rig, crew, "w1"):
        start(rig, crew)
        line = f"while [ ! -e {gate} ]; do sleep 0.1; done"
        rig.set_script([f"BG: {line}"])
        rig.send("run it in the background")
        wait_for(lambda: "background" in kinds(crew, "w1"), timeout=60, what="background")
        text = [t for k, t in records(crew, "w1") if k == "background"][0]
        assert text == f"turn ended, 1 background task running (shell: {line[:80]})"
        assert "turn-ended" not in kinds(crew, "w1")
        assert wakes(crew, "w1") == []                            # not finished: no wake
        add = cmd("nudge-add", "--session", "w1", "--every", "600", "--message", NUDGE)
        sid = add.stdout.strip()
        make_due(crew, sid)
        held = wait_for(lambda: nudges(crew), what="the held nudge")
        assert held[0] == ("nudge-refused", f"{sid} background-tasks: its turn ended with"
                                            " background tasks running; it goes on by itself"
                                            " when they end")
        gate.touch()                                             # the agent goes on by itself
        wait_for(lambda: "turn-ended" in kinds(crew, "w1"), timeout=60,
                 what="the follow-up turn's end")
        wait_for(lambda: [r for r in nudges(crew) if r[0] == "nudge"], timeout=60,
                 what="the nudge after the background work")
        assert wakes(crew, "w1")[0] == "turn-ended"
        # The follow-up turn starts with the CLI's task notification as its
        # prompt: a turn, never the captain's words.
        captain = [t for k, t in records(crew, "w1") if k == "captain"]
        assert captain == ["run it in the background", NUDGE]


def test_a_subagents_stop_does_not_wake_the_primary(crew, tmux, tmp_path):
    require_real_claude()
    rig = crew_rig(crew, tmux, tmp_path, allowed_tools=("Bash", "Agent"))
    with watched(rig, crew, "w1"):
        start(rig, crew)
        rig.set_script(["AGENT: look around the project"])
        rig.send("ask a subagent")
        wait_for(lambda: "subagent" in kinds(crew, "w1"), timeout=60, what="SubagentStop")
        # 2.1.332 runs the subagent in the background: the parent's Stop lists
        # it as running, and the CLI's own follow-up turn ends with a second
        # Stop. 2.1.197 ran it in the turn: one Stop. Either way, wait for the
        # Stop that lists nothing running, and for crew-hook's record of each.
        ends = lambda: [k for k in kinds(crew, "w1") if k in ("background", "turn-ended")]  # noqa
        wait_for(lambda: (stop_payloads(rig) and not stop_payloads(rig)[-1].get("background_tasks")
                          and len(ends()) == len(stop_payloads(rig))), timeout=60,
                 what="the parent's last Stop, recorded")
        running = [p for p in stop_payloads(rig) if p.get("background_tasks")]
        assert ends() == ["background"] * len(running) + ["turn-ended"]
        sub = [t for k, t in records(crew, "w1") if k == "subagent"]
        assert len(sub) == 1 and sub[0].startswith("SubagentStop general-purpose ")
        assert kinds(crew, "w1")[-1] == "turn-ended"
        assert wakes(crew, "w1") == ["turn-ended"]                # the subagent woke nobody
