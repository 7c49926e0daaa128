"""The account's stop and the work inside a session (issue 32, parts 3 and 4).

crew-hook turns Claude Code's StopFailure into `account-blocked` (or
`turn-failed`), a Stop with running background tasks into `background`, and
SubagentStop / TeammateIdle / TaskCompleted into `subagent`; the verdict's
one rule holds every typing while the block stands, and the wake filter
passes the block once and never the work inside a session.

Payload shapes: Claude Code 2.1.332 (tests/CLAUDE_FINDINGS.md).
"""
import json
import os
import subprocess
import sys
import time

from conftest import REPO, cmd, make_due, wait_for
from crewfile.core import logfile
from crewfile.core.records import parse_timestamp, timestamp
from crewfile.session import delivery, verdict
from crewfile.session.sessions import Session, register
from crewfile.wake.wakefilter import Filter

SID = "5683c0de-0000-4000-8000-0000000000a2"
FAKE = os.path.join(REPO, "tests", "fake-agent")
LIMITED = "API Error: Request rejected (429) · This request would exceed your rate limit"


def payload(event, **fields):
    base = {"session_id": SID, "transcript_path": f"/tmp/h/.claude/projects/-p/{SID}.jsonl",
            "cwd": "/tmp", "hook_event_name": event}
    base.update(fields)
    return json.dumps(base)


def hook(run, data, name="w1", env=None):
    return run("crew-hook", input=data, env=dict({"CREWFILE_SESSION": name}, **(env or {})))


def records(crew, name="w1"):
    return [(r.kind, r.text) for r in Session(crew, name).last_records(100, logfile.TailStats())]


# ---------------------------------------------------------------- the hook

def test_a_rate_limit_stop_is_a_block_until_the_hold_ends(crew, run):
    register(crew, "w1")
    before = time.time()
    p = hook(run, payload("StopFailure", error="rate_limit", last_assistant_message=LIMITED),
             env={"CREWFILE_ACCOUNT_HOLD": "90"})
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "")
    kind, text = records(crew)[-1]
    assert kind == "account-blocked"
    error, until, rest = text.split(" ", 2)[0], text.split(" ")[2].rstrip(":"), text
    assert (error, text.split(" ")[1]) == ("rate_limit", "until")
    assert before + 90 - 1 <= parse_timestamp(until) <= time.time() + 90
    assert rest.endswith(": " + LIMITED)


def test_the_hold_counts_from_the_records_own_timestamp(crew):
    """The until is the record's timestamp plus the hold, to the millisecond,
    even on a clock that moves between two readings (a loaded machine)."""
    register(crew, "w1")
    moving = ("import itertools, runpy, sys, time\n"
              "tick = itertools.count(int(time.time() * 1000), 3)\n"
              "time.time = lambda: next(tick) / 1000\n"
              "sys.argv = [sys.argv[1]]\n"
              "runpy.run_path(sys.argv[0], run_name='__main__')\n")
    p = subprocess.run([sys.executable, "-c", moving, os.path.join(REPO, "bin", "crew-hook")],
                       input=payload("StopFailure", error="rate_limit").encode(),
                       capture_output=True, timeout=60,
                       env=dict(os.environ, CREWFILE_SESSION="w1", CREWFILE_ACCOUNT_HOLD="90"))
    assert (p.returncode, p.stderr) == (0, b"")
    rec = Session(crew, "w1").last_records(1, logfile.TailStats())[-1]
    assert rec.kind == "account-blocked"
    until = rec.text.split(" ")[2]
    assert parse_timestamp(until) - parse_timestamp(rec.ts) == 90


def test_a_billing_stop_lifts_only_with_a_turn_that_succeeds(crew, run):
    register(crew, "w1")
    p = hook(run, payload("StopFailure", error="billing_error",
                          last_assistant_message="Credit balance is too low"))
    assert (p.returncode, p.stderr) == (0, "")
    assert records(crew)[-1] == ("account-blocked", "billing_error until -: Credit balance is too low")


def test_an_error_of_the_turn_alone_is_turn_failed(crew, run):
    register(crew, "w1")
    hook(run, payload("StopFailure", error="max_output_tokens"))
    hook(run, payload("StopFailure", error="rate limit; rm -rf /"))   # not a word: unknown
    got = records(crew)
    assert got[-2] == ("turn-failed", "max_output_tokens")
    assert got[-1][0] == "account-blocked" and got[-1][1].startswith("unknown until 2")


def test_a_stop_with_background_tasks_running_is_not_finished(crew, run):
    register(crew, "w1")
    tasks = [{"id": "b1", "type": "shell", "status": "running", "description": "sleep",
              "command": "sleep 300"},
             {"id": "b2", "type": "subagent", "status": "pending", "description": "review"}]
    p = hook(run, payload("Stop", stop_hook_active=False, background_tasks=tasks))
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "")
    assert records(crew)[-1] == ("background", "turn ended, 2 background tasks running"
                                               " (shell: sleep 300; subagent: review)")
    v = verdict.of(Session(crew, "w1"))
    assert (v.generating, v.background) == (verdict.YES, verdict.YES)
    hook(run, payload("Stop", stop_hook_active=False, background_tasks=[]))
    assert records(crew)[-1] == ("turn-ended", "")


def test_subagents_teammates_and_tasks_are_not_the_session(crew, run):
    register(crew, "w1")
    hook(run, payload("Stop", stop_hook_active=False))
    for event, fields in (("SubagentStop", {"agent_id": "a7", "agent_type": "Explore",
                                            "agent_transcript_path": "/tmp/x.jsonl",
                                            "stop_hook_active": False}),
                          ("TeammateIdle", {"teammate_name": "ana", "team_name": "t"}),
                          ("TaskCompleted", {"task_id": "3", "task_subject": "tests"})):
        p = hook(run, payload(event, **fields))
        assert (p.returncode, p.stdout, p.stderr) == (0, "", "")
    assert records(crew)[-4:] == [("turn-ended", ""), ("subagent", "SubagentStop Explore a7"),
                                  ("subagent", "TeammateIdle ana"),
                                  ("subagent", "TaskCompleted 3: tests")]
    hook(run, payload("UserPromptSubmit", prompt="go"))
    hook(run, payload("SubagentStop", agent_id="a8", agent_type="Explore"))
    v = verdict.of(Session(crew, "w1"))
    assert v.generating == verdict.YES          # the parent's turn still runs


def test_the_clis_task_notification_starts_a_turn_but_is_nobodys_words(crew, run):
    register(crew, "w1")
    note = ("<task-notification>\n<task-id>b9</task-id>\n<status>completed</status>\n"
            "</task-notification>")
    p = hook(run, payload("UserPromptSubmit", prompt=note, prompt_id="p-1"))
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "")
    assert records(crew)[1:] == [("turn-started", "")]


# ---------------------------------------------------------------- the verdict's rule

def test_the_block_stands_until_its_time_or_a_turn_that_succeeds(crew):
    sess = register(crew, "w1")
    now = time.time()
    sess.append("turn-started")
    sess.append("account-blocked", f"rate_limit until {timestamp(now + 60)}: {LIMITED}")
    v = verdict.of(sess, now=now)
    assert v.generating == verdict.NO
    assert v.account.code == verdict.ACCOUNT_BLOCKED
    assert v.account.detail == (f"the account stopped its turn: rate_limit ({LIMITED}); crewfile"
                                f" types nothing into it until {timestamp(now + 60)}")
    assert verdict.of(sess, now=now + 61).account is None          # its time passed
    sess.append("turn-started", "a resume")
    assert verdict.of(sess, now=now).account is not None            # a start is no success
    sess.append("turn-ended")
    assert verdict.of(sess, now=now).account is None                # a turn succeeded


def test_a_block_no_time_lifts_stands_until_a_turn_succeeds(crew):
    sess = register(crew, "w1")
    sess.append("account-blocked", "billing_error until -: Credit balance is too low")
    far = time.time() + 10 * 365 * 86400
    assert verdict.of(sess, now=far).account.detail.endswith("until a turn succeeds")
    sess.append("account-blocked", "rate_limit until yesterday")     # unreadable: stands
    assert verdict.of(sess, now=far).account is not None
    sess.append("turn-ended")
    assert verdict.of(sess, now=far).account is None


# ---------------------------------------------------------------- the filter

def test_the_filter_wakes_once_for_a_block_never_for_work_inside(crew):
    register(crew, "w1")
    register(crew, "a1", kind="aside", exempt=True)
    t = timestamp()
    lines = [f"{t} w1 turn-started", f"{t} w1 account-blocked: rate_limit until {t}: x",
             f"{t} w1 account-blocked: rate_limit until {t}: x",
             f"{t} w1 background: turn ended, 1 background task running (shell: x)",
             f"{t} w1 subagent: SubagentStop Explore a7", f"{t} w1 turn-failed: invalid_request",
             f"{t} a1 account-blocked: billing_error until -", f"{t} a1 turn-failed: unknown"]
    warned = []
    out = Filter(crew, warn=warned.append).feed(("\n".join(lines) + "\n").encode())
    assert out.decode().splitlines() == [lines[1], lines[5], lines[6]]
    assert warned == []


# ---------------------------------------------------------------- held typing, one resume

def agent(crew, tmux, name):
    sess, pane = tmux.agent_window(crew, name, FAKE)
    tmux.wait_screen(pane, "ready>")
    wait_for(lambda: "started" in [k for k, _ in records(crew, name)], what="started")
    return sess, pane


def test_every_typing_is_held_while_blocked_and_the_nudge_goes_once_after(crew, tmux, run):
    sess, pane = agent(crew, tmux, "w1")
    # A block far off first, so the held refusal does not race the clock; then
    # a newer block (the newest counts) that lifts in a moment.
    sess.append("account-blocked", f"rate_limit until {timestamp(time.time() + 3600)}: {LIMITED}")
    ok, why = delivery.deliver(sess, "keep going")
    assert (ok, why.code) == (False, delivery.ACCOUNT_BLOCKED)
    add = cmd("nudge-add", "--session", "w1", "--every", "600", "--message", "NUDGE-31 resume")
    assert add.returncode == 0, add.stderr
    sid = add.stdout.strip()
    make_due(crew, sid)

    def tick():
        p = cmd("nudge-tick")
        assert (p.returncode, p.stderr) == (0, ""), p.stderr
        return [(k, t) for k, t in records(crew) if k.startswith("nudge")]

    got = wait_for(lambda: tick() or None, timeout=20, what="the held nudge's refusal")
    assert got[0][0] == "nudge-refused" and got[0][1].startswith(f"{sid} account-blocked: ")
    for _ in range(3):
        assert tick() == got                       # held, and said once
    assert "captain" not in [k for k, _ in records(crew)]       # nothing typed
    until = time.time() + 2
    sess.append("account-blocked", f"rate_limit until {timestamp(until)}: {LIMITED}")
    got = wait_for(lambda: [r for r in tick() if r[0] == "nudge"] or None, timeout=30,
                   what="the nudge once the block's time passed")
    assert got == [("nudge", f"{sid} attempt 1/100: delivered")]
    sent = [r for r in records(crew) if r[0] == "nudge"]
    kinds = lambda: [k for k, _ in records(crew)]       # noqa: E731
    wait_for(lambda: "turn-ended" in kinds()[kinds().index("captain"):],
             what="the resumed turn's end")
    for _ in range(3):
        tick()               # the schedule's floor holds: the resume is not typed again
    assert [r for r in records(crew) if r[0] == "nudge"] == sent     # resumed once
    assert [t for k, t in records(crew) if k == "captain"] == ["NUDGE-31 resume"]
    assert verdict.of(sess).account is None        # the turn succeeded


def test_watch_sends_the_held_nudge_when_the_block_lifts(crew, tmux):
    """No record marks the moment a block lifts: --watch ticks at it, not at
    its next poll (60 s)."""
    sess, pane = agent(crew, tmux, "w1")
    sess.append("account-blocked", f"rate_limit until {timestamp(time.time() + 3600)}: x")
    add = cmd("nudge-add", "--session", "w1", "--every", "600", "--message", "watched resume")
    assert add.returncode == 0, add.stderr
    sid = add.stdout.strip()
    make_due(crew, sid)
    watcher = subprocess.Popen([sys.executable, os.path.join(REPO, "bin", "nudge-tick"),
                                "--watch"], stdout=subprocess.PIPE, text=True)
    try:
        assert f"{sid} w1 refused: account-blocked: " in watcher.stdout.readline()
        sess.append("account-blocked", f"rate_limit until {timestamp(time.time() + 2)}: x")
        sent = wait_for(lambda: [t for k, t in records(crew) if k == "nudge"], timeout=30,
                        what="the held nudge when the block lifts")
        assert sent == [f"{sid} attempt 1/100: delivered"]
        assert [t for k, t in records(crew) if k == "captain"] == ["watched resume"]
    finally:
        watcher.terminate()
        watcher.wait()
        watcher.stdout.close()


def test_watch_does_not_wake_itself_while_a_refusal_stands(crew, tmux):
    """Each tick opens sessions/NAME/lock; inotify reports its close. Counted
    as a change, every tick woke the next (some forty a second) for as long
    as the block stood. Watched for a while once settled: no tick."""
    from inotify_simple import INotify, flags  # optional: inotify_simple may be absent (the other tests here need none)
    sess, pane = agent(crew, tmux, "w1")
    sess.append("account-blocked", "billing_error until -: Credit balance is too low")
    add = cmd("nudge-add", "--session", "w1", "--every", "600", "--message", "held")
    sid = add.stdout.strip()
    make_due(crew, sid)
    spy = INotify()
    spy.add_watch(sess.dir, flags.CLOSE_WRITE)
    watcher = subprocess.Popen([sys.executable, os.path.join(REPO, "bin", "nudge-tick"),
                                "--watch"], stdout=subprocess.PIPE, text=True)
    try:
        assert f"{sid} w1 refused: account-blocked: " in watcher.stdout.readline()
        # The refusal's own schedule write wakes one more tick; then it settles.
        settling = []
        while len(settling) < 100:
            got = spy.read(timeout=1000)
            if not got:
                break
            settling += got
        assert len(settling) <= 10, f"{len(settling)} lock opens: the watcher wakes itself"
        opened = [e.name for e in spy.read(timeout=2000)]
        assert opened == []                        # no tick since: nothing changed
    finally:
        watcher.terminate()
        watcher.wait()
        watcher.stdout.close()
        spy.close()
