"""One voice per session: a session's own cron jobs hold crewfile's nudges,
with the REAL Claude Code CLI offline in a private tmux server against the
stand-in model (tests/model_server.py, its `CRON:`, `DURABLE-CRON:` and
`UNCRON:` directives), crew-hook installed as users install it.

1. The stand-in makes a CronCreate call (session-only): the Stop payload's
   `session_crons` is recorded as `crons`; a due nudge is refused with the
   reason, said once, and nothing is typed (the pane and the requests show
   it nowhere); after CronDelete the next Stop lists none, and the nudge
   goes out once.
2. A durable job (`.claude/scheduled_tasks.json`, which the Stop payload
   does not list) holds the nudge the same way, until it is deleted.
3. An armed `/goal` (seen in the transcript's goal_status lines) holds it
   until `/goal clear`.
4. `nudge-tick --watch` holds it while the cron is armed and types it once
   at the Stop that lists none.

The cron expressions are daily at an hour twelve hours away, so no job
fires during the test.

All four pass with 2.1.332 (the default) and with 2.1.197 (CREWFILE_CLAUDE
naming its binary).

Without the CLI (make claude-code) these tests are skipped loudly.
"""
import contextlib
import json
import os
import subprocess
import sys
import time

from conftest import cmd, make_due, wait_for
from claude_harness import crew_rig as harness_crew_rig
from claude_harness import (BUSY_RE, READY_RE, REPO, kinds, make_rig, recorded_turn, records,
                            require_real_claude, start_registered, stop_payloads, user_texts,
                            watched)
from crewfile.session import ownloop
from crewfile.session.sessions import Session

NUDGE = "NUDGE-MARK-7714 carry on with the plan"
CRON_TOOLS = ("Bash", "CronCreate", "CronDelete")


def crew_rig(crew, tmux, tmp_path):
    return harness_crew_rig(crew, tmux, tmp_path, allowed_tools=CRON_TOOLS)


@contextlib.contextmanager
def registered_w1(crew, tmux, tmp_path):
    """The cron tests' start: w1 (the real claude, cron tools) registered; yields (rig, far_cron())."""
    require_real_claude()
    rig = crew_rig(crew, tmux, tmp_path)
    expr = far_cron()
    with watched(rig, crew, "w1"):
        start_registered(rig, crew)
        yield rig, expr


def far_cron():
    """Daily, at a local hour twelve hours from now: never fires in a test."""
    return f"17 {(time.localtime().tm_hour + 12) % 24} * * *"


def nudges(crew, name="w1"):
    p = cmd("nudge-tick", "--quiet")
    assert (p.returncode, p.stderr) == (0, ""), p.stderr
    return [(k, t) for k, t in records(crew, name) if k.startswith("nudge")]


def idle_with_goal(screen):
    return "/goal active" in screen and READY_RE.search(screen) and not BUSY_RE.search(screen)


def add_due_nudge(crew):
    add = cmd("nudge-add", "--session", "w1", "--every", "600", "--message", NUDGE)
    assert add.returncode == 0, add.stderr
    sid = add.stdout.strip()
    make_due(crew, sid)
    return sid


def held_then_sent(rig, crew, sid, reason, release):
    """The due nudge is refused with *reason*, said once, nothing typed; after
    *release* (a turn that deletes the job), it goes out once."""
    held = nudges(crew)
    assert held == [("nudge-refused", f"{sid} own-loop: {reason}")]
    assert nudges(crew) == held                                   # said once
    assert NUDGE not in rig.screen() and NUDGE not in json.dumps(rig.requests())
    release()
    sent = wait_for(lambda: [r for r in nudges(crew) if r[0] == "nudge"], timeout=60,
                    what="the nudge once the session's own loop is gone")
    assert sent == [("nudge", f"{sid} attempt 1/100: delivered")]
    wait_for(lambda: kinds(crew, "w1")[-1] == "turn-ended", timeout=60,
             what="the nudged turn's end")
    for _ in range(3):
        nudges(crew)
    assert [r for r in records(crew, "w1") if r[0] == "nudge"] == sent
    assert user_texts(rig).count(NUDGE) == 1                      # typed once


def test_a_session_cron_holds_a_crewfile_nudge_until_it_is_deleted(crew, tmux, tmp_path):
    with registered_w1(crew, tmux, tmp_path) as (rig, expr):
        recorded_turn(rig, crew, "w1", "make a cron", [f"CRON: {expr} check the build"])
        wait_for(lambda: "crons" in kinds(crew, "w1"), what="the crons record")
        crons = stop_payloads(rig)[-1]["session_crons"]
        assert [(c["schedule"], c["recurring"], c["prompt"]) for c in crons] == [
            (expr, True, "check the build")]
        job = crons[0]["id"]
        got = records(crew, "w1")
        assert got[-2:] == [("turn-ended", ""), ("crons", f"1 cron ({job} {expr}: check the build)")]
        sess = Session(crew, "w1")
        loop, problem = ownloop.own_loop(sess)
        assert (str(loop), problem) == (
            f"own-loop: the session's own loop is armed: 1 cron ({job} {expr}: check the build)",
            None)
        sid = add_due_nudge(crew)
        held_then_sent(rig, crew, sid, f"the session's own loop is armed: 1 cron ({job} {expr}:"
                                       f" check the build)",
                       lambda: recorded_turn(rig, crew, "w1", "drop the cron", [f"UNCRON: {job}"]))
        assert stop_payloads(rig)[-1]["session_crons"] == []
        assert ownloop.own_loop(sess) == (None, None)


def test_a_durable_cron_in_scheduled_tasks_json_holds_a_nudge_too(crew, tmux, tmp_path):
    with registered_w1(crew, tmux, tmp_path) as (rig, expr):
        recorded_turn(rig, crew, "w1", "make a durable cron", [f"DURABLE-CRON: {expr} survive restarts"])
        tasks = json.loads((rig.project / ".claude" / "scheduled_tasks.json").read_text())["tasks"]
        assert [(t["cron"], t["prompt"], t["recurring"]) for t in tasks] == [
            (expr, "survive restarts", True)]
        job = tasks[0]["id"]
        assert stop_payloads(rig)[-1]["session_crons"] == []      # the file alone says it
        assert "crons" not in kinds(crew, "w1")
        sid = add_due_nudge(crew)
        held_then_sent(rig, crew, sid, f"the session's own loop is armed: 1 durable cron ({job}"
                                       f" {expr}: survive restarts)",
                       lambda: recorded_turn(rig, crew, "w1", "drop the durable cron", [f"UNCRON: {job}"]))
        tasks = json.loads((rig.project / ".claude" / "scheduled_tasks.json").read_text())["tasks"]
        assert tasks == []


def test_an_armed_goal_holds_a_nudge_until_it_is_cleared(crew, tmux, tmp_path):
    require_real_claude()
    # Every answer, the goal's evaluator's too, is "not met": the goal stays
    # armed (Claude Code stops going on after a few unmet checks, still armed).
    rig = make_rig(tmp_path, tmux, env={"CREWFILE_SESSION": "w1", "CREWFILE_DIR": crew.root,
                                        "CREWFILE_TMUX": tmux.sock},
                   fake_reply='{"ok": false, "reason": "not yet"}')
    with watched(rig, crew, "w1"):
        start_registered(rig, crew)
        stops = len(stop_payloads(rig))
        rig.send("/goal the file done.txt exists")
        sess = Session(crew, "w1")
        # 2.1.332 says "Goal paused" after a few unmet checks, 2.1.197 nothing:
        # both leave the prompt ready with "/goal active" on the status line.
        wait_for(lambda: (len(stop_payloads(rig)) > stops and kinds(crew, "w1")[-1] == "turn-ended"
                          and idle_with_goal(rig.screen())), timeout=90,
                 what="the goal's turns ended, the goal still armed")
        assert str(ownloop.own_loop(sess)[0]) == ("own-loop: the session's own loop is armed:"
                                                 " a goal (the file done.txt exists)")
        sid = add_due_nudge(crew)

        def clear():
            rig.send("/goal clear")
            wait_for(lambda: ownloop.own_loop(sess) == (None, None), timeout=30,
                     what="the goal cleared in the transcript")
        held_then_sent(rig, crew, sid, "the session's own loop is armed: a goal (the file"
                                       " done.txt exists)", clear)


def test_the_watching_tick_sends_the_held_nudge_once_the_cron_is_deleted(crew, tmux, tmp_path):
    with registered_w1(crew, tmux, tmp_path) as (rig, expr):
        recorded_turn(rig, crew, "w1", "make a cron", [f"CRON: {expr} check the build"])
        job = stop_payloads(rig)[-1]["session_crons"][0]["id"]
        sid = add_due_nudge(crew)
        watcher = subprocess.Popen([sys.executable, os.path.join(REPO, "bin", "nudge-tick"),
                                    "--watch"], stdout=subprocess.PIPE, text=True)
        try:
            assert watcher.stdout.readline().endswith(
                f" {sid} w1 refused: own-loop: the session's own loop is armed: 1 cron"
                f" ({job} {expr}: check the build)\n")
            assert NUDGE not in rig.screen()
            rig.set_script([f"UNCRON: {job}"])
            rig.send("drop the cron")
            sent = wait_for(lambda: [t for k, t in records(crew, "w1") if k == "nudge"],
                            timeout=60, what="the nudge after the Stop that lists no cron")
            assert sent == [f"{sid} attempt 1/100: delivered"]
            wait_for(lambda: kinds(crew, "w1")[-1] == "turn-ended", timeout=60,
                     what="the nudged turn's end")
            assert user_texts(rig).count(NUDGE) == 1
        finally:
            watcher.terminate()
            watcher.wait()
            watcher.stdout.close()
