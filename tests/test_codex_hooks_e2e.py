"""Codex CLI 0.171's own hooks beyond a turn (issue 32, "and Codex where it
applies"): its subagents, its session's end, the account's stop.

With the real Codex offline against tests/responses_server.py (the rig of
tests/test_codex_e2e.py), and the payloads it sent, hand-fed through
`crew-hook --agent codex` as Codex runs it. What was seen (Codex 0.171.0):
- `SPAWN:` makes the stand-in call spawn_agent (multi_agent_v1, on by
  default): Codex fires SubagentStart, then runs the session's hooks for the
  subagent's own turn with the parent's session_id and the subagent's
  agent_id (its UserPromptSubmit carries the spawn message as the prompt),
  then SubagentStop. Before this they were recorded as the captain's words
  and a turn of the session's own.
- A 429 (any code) fires no hook at all: no Stop, no other event. The screen
  says `■ exceeded retry limit, last status: 429 Too Many Requests` (for
  insufficient_quota: `■ Quota exceeded. Check your plan and billing
  details.`); the rollout (transcript_path) ends the turn with a
  task_complete event whose `error` says so. crewfile's records stay at
  `turn-started`: the session reads as generating, and nothing is typed
  into it.
- `codex exec` fires SessionEnd (reason `other`) as it ends; /exit in the
  interactive UI (after a finished turn) fires none:
  the UI says "Disconnected from this task. Any running work continues."
  (its thread lives on in the app-server daemon); the process is gone, so
  the liveness probe is what ends the session.
"""
import json
import time

import pytest

from agent_rigs import pretrust, wait_trusted_start
from crewfile.core import logfile
from crewfile.session import delivery, verdict
from crewfile.session.sessions import Session, register
from crewfile.wake.wakefilter import Filter
from test_codex_e2e import BINARY, DEADLINE, _codex_window, _wait, rig, trusted  # noqa: F401

SID = "01a2352c-c370-7342-8923-e1572a2ecdba"
AGENT = "01a2352c-c9d8-7e40-98bb-58b4216c7816"
TURN, SUB_TURN = "01a2352c-c4ee-7ce3-9035-6c178132caba", "01a2352c-c9e8-7a81-b028-7534dd6ffb7f"
needs_codex = pytest.mark.skipif(not BINARY, reason="Codex CLI not installed in .cache/codex-VERSION")


def payload(event, **fields):
    """A Codex 0.171.0 payload as seen (tests/test_codex_hooks_e2e.py's docstring)."""
    base = {"session_id": SID, "transcript_path": f"/h/sessions/rollout-{SID}.jsonl",
            "cwd": "/tmp", "hook_event_name": event, "model": "gpt-test",
            "permission_mode": "default"}
    base.update(fields)
    return json.dumps(base)


def hook(run, data, name="w1"):
    return run("crew-hook", "--agent", "codex", input=data, env={"CREWFILE_SESSION": name})


def records(crew, name="w1"):
    return [(r.kind, r.text) for r in Session(crew, name).last_records(100, logfile.TailStats())]


def test_a_codex_subagents_events_are_not_the_sessions_turn(crew, run):
    """The payloads Codex sent for a spawned subagent, in the order seen: the
    subagent's prompt is no captain input and starts no turn; its stop ends
    none; the parent's own Stop alone ends the turn."""
    register(crew, "w1")
    hook(run, payload("UserPromptSubmit", turn_id=TURN, prompt="SPAWN: say hi"))
    seen = [payload("SubagentStart", turn_id=SUB_TURN, agent_id=AGENT, agent_type="default"),
            payload("UserPromptSubmit", turn_id=SUB_TURN, agent_id=AGENT, agent_type="default",
                    prompt="say hi"),
            payload("PostToolUse", turn_id=SUB_TURN, agent_id=AGENT, agent_type="default",
                    tool_name="exec_command", tool_input={"cmd": "true"}, tool_response="",
                    tool_use_id="call_2"),
            payload("SubagentStop", turn_id=SUB_TURN, agent_id=AGENT, agent_type="default",
                    stop_hook_active=False, last_assistant_message="ok",
                    agent_transcript_path=f"/h/sessions/rollout-{AGENT}.jsonl")]
    for data in seen:
        p = hook(run, data)
        assert (p.returncode, p.stdout, p.stderr) == (0, "", "")
    assert records(crew)[1:] == [
        ("captain", "SPAWN: say hi"), ("turn-started", ""),
        ("subagent", f"SubagentStart default {AGENT}"),
        ("subagent", f"UserPromptSubmit default {AGENT}"),
        ("subagent", f"SubagentStop default {AGENT}")]
    assert verdict.of(Session(crew, "w1")).generating == verdict.YES    # the parent's turn runs
    # the records as crew-watch emits them: the wake filter passes none
    events = "".join(f"{r.ts} w1 {r.kind}: {r.text}\n" for r in Session(crew, "w1").last_records(
        3, logfile.TailStats()))
    warned = []
    assert events.count(" subagent: ") == 3
    assert Filter(crew, warn=warned.append).feed(events.encode()) == b"" and warned == []
    p = hook(run, payload("Stop", turn_id=TURN, stop_hook_active=False,
                          last_assistant_message="ok"))
    assert (p.returncode, p.stderr) == (0, "")
    assert records(crew)[-1] == ("turn-ended", "")


def test_a_codex_session_end_is_believed_only_with_the_agent_gone(crew, run):
    """SessionEnd (seen at `codex exec`'s end, reason `other`; not at the
    interactive /exit) writes `ended` as Claude's does (one naming a
    subagent: `subagent`), which readers believe only when the
    liveness probe finds the agent gone (core/kinds.py)."""
    register(crew, "w1")
    p = hook(run, payload("SessionEnd", reason="other", agent_id=AGENT, agent_type="default"))
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "")
    assert records(crew)[-1] == ("subagent", f"SessionEnd default {AGENT}")   # not the session's
    p = hook(run, payload("SessionEnd", reason="other"))
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "")
    assert records(crew)[-1] == ("ended", "other")


@needs_codex
def test_a_real_codex_subagent_is_recorded_as_work_inside_the_session(trusted):
    """`codex exec` whose model spawns a subagent (spawn_agent): one captain
    input, one turn ended, the subagent's start and prompt as `subagent`
    records. (exec ends with the parent's turn, not waiting for the
    subagent: its SubagentStop came in the interactive UI, seen, and in exec
    only when the subagent was quicker.)"""
    rig = trusted
    register(rig.crew, "w1")
    out = rig.codex("w1", "SPAWN: say hi from the subagent")
    got = rig.kinds("w1")
    subagent = [t for k, t in got if k == "subagent"]
    assert [k for k, _ in got if k in ("captain", "turn-started", "turn-ended")] == [
        "captain", "turn-started", "turn-ended"], (got, out)
    assert ("captain", "SPAWN: say hi from the subagent") in got
    assert subagent and subagent[0].startswith("SubagentStart default "), got
    agent_id = subagent[0].split()[-1]
    assert f"UserPromptSubmit default {agent_id}" in subagent, got
    assert set(subagent) <= {f"SubagentStart default {agent_id}",
                             f"UserPromptSubmit default {agent_id}",
                             f"SubagentStop default {agent_id}"}, got
    spawned = [r for r in rig.requests() if any(
        i.get("type") == "function_call_output" and agent_id in json.dumps(i)
        for i in r.get("input") or ())]
    assert spawned, "the parent's model saw the subagent's id"


@needs_codex
def test_a_429_fires_no_codex_hook_and_the_session_is_never_typed_into(rig, tmux):
    """The stand-in answers 429 (rate_limit_exceeded, then insufficient_quota):
    Codex says so on its screen and fires no hook, so crewfile learns nothing
    and the session stays `turn-started`: the verdict reads it as generating
    and delivery refuses it; the rollout has the turn's error."""
    env = {k: rig.env[k] for k in ("PATH", "CODEX_HOME", "HOME", "FAKE_KEY", "CREWFILE_DIR")}
    env["CREWFILE_SESSION"] = "cx"
    pretrust(tmux, rig.env["CODEX_HOME"], rig.work)
    pane = _codex_window(tmux, rig, f"cd {rig.work} && {BINARY[0]}", env)
    wait_trusted_start(tmux, pane)
    sess = Session(rig.crew, "cx")
    for n, (code, said) in enumerate(
            (("rate_limit_exceeded", "exceeded retry limit, last status: 429 Too Many Requests"),
             ("insufficient_quota", "Quota exceeded. Check your plan and billing details.")), 1):
        prompt = f"FAIL: {code}"
        tmux("send-keys", "-t", pane, "-l", prompt)
        tmux.wait_screen(pane, prompt)
        # Codex drops a key typed early in its start (seen): Enter until the turn starts
        _enter_until(tmux, pane, lambda: sess.exists() and [
            k for k, _ in rig.kinds("cx")].count("turn-started") >= n, rig)
        tmux.wait_screen(pane, said, timeout=DEADLINE)
        tmux.wait_screen(pane, "Ask Codex", timeout=DEADLINE)
        assert rig.kinds("cx")[-2:] == [("captain", prompt), ("turn-started", "")]
    v = verdict.of(sess.reread())
    assert v.generating == verdict.YES
    ok, why = delivery.deliver(sess.reread(), "hello from crewfile", quiet=0)
    assert (ok, why.code) == (False, delivery.GENERATING)
    assert "hello from crewfile" not in tmux.screen(pane)
    with open(sess.meta["transcript_path"]) as f:
        ends = [json.loads(line)["payload"] for line in f if '"task_complete"' in line]
    assert [e["error"]["message"] for e in ends] == [
        "exceeded retry limit, last status: 429 Too Many Requests",
        "Quota exceeded. Check your plan and billing details."], ends


def _enter_until(tmux, pane, test, rig):
    """Enter, again while *test*() fails (a key typed early in Codex's start
    may be dropped: seen), each time after waiting for it with a deadline."""
    for _ in range(10):
        tmux("send-keys", "-t", pane, "Enter")
        try:
            _wait_short(test)
            return
        except TimeoutError:
            continue
    raise AssertionError(f"the prompt never started a turn: {rig.kinds('cx')}\n"
                         f"{tmux.screen(pane)}")


def _wait_short(test, timeout=3.0):
    deadline = time.monotonic() + timeout
    while not test():
        if time.monotonic() > deadline:
            raise TimeoutError
        time.sleep(0.05)
