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
  and a turn of the session's own. `codex exec` ends with the parent's
  turn, not waiting for its subagent (then cut short: no SubagentStop); a
  subagent done first is reported back to the parent, which answers it in
  the same turn or in one more, begun by no prompt (a Stop, no
  UserPromptSubmit): so the test holds the parent's answer until the
  subagent's stop is recorded.
- A 429 (any code) fires no hook at all: no Stop, no other event. The screen
  says `■ exceeded retry limit, last status: 429 Too Many Requests` (for
  insufficient_quota: `■ Quota exceeded. Check your plan and billing
  details.`); the rollout (transcript_path) ends the turn with a
  task_complete event whose `error` says so. The hooks leave the records at
  `turn-started`; crew-watch reads the rollout's end and records the
  account's stop once (crewfile.agents.codexrollout): the wake filter
  passes it once, and nothing is typed into the session.
- `codex exec` fires SessionEnd (reason `other`) as it ends; /exit in the
  interactive UI (after a finished turn) fires none:
  the UI says "Disconnected from this task. Any running work continues."
  (its thread lives on in the app-server daemon); the process is gone, so
  the liveness probe is what ends the session.
"""
import contextlib
import json
import os
import subprocess

import pytest

import responses_server
from agent_rigs import codex_window, pretrust, wait_trusted_start
from crewfile.core import locks, logfile
from crewfile.session import delivery, verdict
from crewfile.session.prompt import PROMPT_MARKERS
from crewfile.session.sessions import Session, register
from crewfile.wake.wakefilter import Filter
from conftest import wait_for
from test_codex_e2e import BINARY, DEADLINE, ROOT, rig, trusted  # noqa: F401

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
def test_a_real_codex_subagent_is_recorded_as_work_inside_the_session(trusted, tmp_path):
    """`codex exec` whose model spawns a subagent (spawn_agent): one captain
    input, one turn started, the subagent's start, prompt and stop as
    `subagent` records, and the parent's turn ended after them. The
    parent's answer is held (HOLD) until the subagent's stop is recorded
    (exec ends with the parent's turn, not waiting for a slower subagent),
    so nothing of the session's own turn can be recorded meanwhile. A
    subagent done first is reported back to the parent, which Codex answers
    in the same turn or in another begun by no prompt: one `turn-ended` or
    more, never more than the parent's answers."""
    rig = trusted
    register(rig.crew, "w1")
    release = str(tmp_path / "parent-may-answer")
    prompt = f"SPAWN: say hi from the subagent\nHOLD: {release}"
    p = rig.codex("w1", prompt, wait=False)
    try:
        wait_for(lambda: any(k == "subagent" and t.startswith("SubagentStop ")
                             for k, t in rig.kinds("w1")),
                 timeout=DEADLINE, what=lambda: f"the subagent's stop: {rig.kinds('w1')}")
        open(release, "w").close()
        out, _ = p.communicate(timeout=DEADLINE)
    finally:
        open(release, "w").close()      # the stand-in's held answer ends either way
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, out
    got = rig.kinds("w1")
    kinds = [k for k, _ in got]
    assert kinds[:4] == ["registered", "started", "captain", "turn-started"], got
    assert got[2][1].startswith("SPAWN: say hi from the subagent"), got
    agent_id = got[4][1].split()[-1]
    assert got[4:7] == [("subagent", f"SubagentStart default {agent_id}"),
                        ("subagent", f"UserPromptSubmit default {agent_id}"),
                        ("subagent", f"SubagentStop default {agent_id}")], got
    ended = kinds[7:]
    answers = [r for r in rig.requests()
               if any("SPAWN: " in json.dumps(i) for i in r.get("input") or ())][1:]
    assert ended[-1] == "ended" and set(ended[:-1]) == {"turn-ended"}, got
    assert len(ended) - 1 <= len(answers), (got, len(answers))
    assert any(i.get("type") == "function_call_output" and agent_id in json.dumps(i)
               for r in answers for i in r.get("input") or ()), \
        "the parent's model saw the subagent's id"


# A second Stop hook the test holds shut (flock on the file the environment
# names): Codex closes the turn only once its Stop hooks have run. The same
# text in every run, so the review pretrust answers is taken once.
GATE_HOOK = {"type": "command", "command": "sh -c 'exec flock \"$CREWFILE_TEST_GATE\" true'",
             "timeout": 600}


@needs_codex
def test_a_turn_a_subagents_report_goes_on_in_is_never_typed_into(rig, tmux, tmp_path):
    """A subagent's report that comes back while the parent's Stop hooks run
    goes on in the same turn, the parent's model asked again with no prompt
    hook (tests/CODEX_FINDINGS.md, "Subagents"): the records say the turn
    ended, the screen shows the prompt line and no `Working`, and Codex
    takes typed text into the running turn. A second Stop hook, held shut by
    the test, keeps that window open until the subagent's turn is complete
    (in a real crew it is as long as the hooks take). Delivery reads the turn
    still open in the rollout and refuses `generating`; once the turn has
    ended there, it is free again. Codex hands the report over a moment after
    the subagent's turn completes, which nothing outside shows: a report it
    filed for the next prompt instead (its rollout says so) is tried again,
    in a turn of its own, ATTEMPTS times at most."""
    home = rig.env["CODEX_HOME"]
    with open(os.path.join(home, "hooks.json")) as f:
        hooks = json.load(f)
    hooks["hooks"]["Stop"].append({"hooks": [GATE_HOOK]})
    with open(os.path.join(home, "hooks.json"), "w") as f:
        json.dump(hooks, f, indent=2)
    pretrust(tmux, home, rig.work)
    gate = str(tmp_path / "gate")
    env = {k: rig.env[k] for k in ("PATH", "CODEX_HOME", "HOME", "FAKE_KEY", "CREWFILE_DIR")}
    env.update(CREWFILE_SESSION="cx", CREWFILE_TEST_GATE=gate)
    sess = Session(rig.crew, "cx")
    releases = []

    def count(kind, prefix=""):
        return sum(1 for k, t in rig.kinds("cx") if k == kind and t.startswith(prefix))

    def reports_filed():
        """The turn ids the parent's rollout filed the subagents' reports under."""
        with open(sess.reread().meta["transcript_path"]) as f:
            return [json.loads(line)["payload"]["internal_chat_message_metadata_passthrough"]
                    ["turn_id"] for line in f
                    if responses_server.SUBAGENT_REPORT in line and '"response_item"' in line]

    def reports_asked():
        return [r for r in rig.requests() if responses_server.SUBAGENT_REPORT in json.dumps(
            (r.get("input") or [None])[-1])]
    pane = codex_window(tmux, rig, f"cd {rig.work} && {BINARY[0]}", env)
    wait_trusted_start(tmux, pane)
    try:
        for attempt in range(ATTEMPTS):
            sub_go, report_go = (str(tmp_path / f"{n}-{attempt}") for n in ("sub-go", "report-go"))
            releases += [sub_go, report_go]
            shut = locks.acquire(gate)
            releases.append(shut)
            ended, filed = count("turn-ended"), len(reports_filed()) if attempt else 0
            # two lines as one bracketed paste: Codex keeps the newline in its prompt
            tmux("set-buffer", "-b", "two-lines", f"SPAWN: HOLD: {sub_go}\nHOLD-REPORT: {report_go}")
            tmux("paste-buffer", "-p", "-d", "-b", "two-lines", "-t", pane)
            tmux.wait_screen(pane, report_go)
            tmux.enter_until_taken(pane, report_go, lambda: sess.exists() and count(
                "turn-started") > attempt, PROMPT_MARKERS, timeout=DEADLINE)
            wait_for(lambda: count("turn-ended") > ended, timeout=DEADLINE,
                     what=lambda: f"the parent's Stop recorded: {rig.kinds('cx')}")
            open(sub_go, "w").close()
            wait_for(lambda: count("subagent", "SubagentStop ") > attempt, timeout=DEADLINE,
                     what=lambda: f"the subagent's stop: {rig.kinds('cx')}")
            # its end is handed to the parent once its turn is complete (its own
            # rollout's task_complete, written after its SubagentStop hook)
            agent_id = [t for k, t in rig.kinds("cx") if k == "subagent"][-1].split()[-1]
            folder = os.path.dirname(sess.reread().meta["transcript_path"])
            wait_for(lambda: any(n.endswith(f"{agent_id}.jsonl") and '"task_complete"' in open(
                os.path.join(folder, n)).read() for n in os.listdir(folder)), timeout=DEADLINE,
                what="the subagent's turn complete in its rollout")
            shut.release()              # its Stop hooks end: the report goes on in the turn
            wait_for(lambda: len(reports_filed()) > filed, timeout=DEADLINE,
                     what="the report filed in the parent's rollout")
            if reports_filed()[-1].startswith("auto-compact"):
                continue                # handed over after the turn closed: for the next prompt
            wait_for(reports_asked, timeout=DEADLINE, what="the parent's model asked again")
            turns = [k for k, _ in rig.kinds("cx") if k in ("turn-started", "turn-ended")]
            assert turns[-1] == "turn-ended" and count("turn-ended") == ended + 1, rig.kinds("cx")
            why, v = delivery.check(sess.reread(), quiet=0)
            assert v.generating == verdict.NO and why.code == delivery.GENERATING, why
            ok, why = delivery.deliver(sess.reread(), "hello from crewfile", quiet=0)
            assert (ok, why.code) == (False, delivery.GENERATING), why
            open(report_go, "w").close()
            wait_for(lambda: count("turn-ended") == ended + 2, timeout=DEADLINE,
                     what=lambda: f"the turn's second Stop: {rig.kinds('cx')}")
            wait_for(lambda: delivery.check(sess.reread(), quiet=0)[0] is None,
                     timeout=DEADLINE, what=lambda: f"the turn closed in its rollout:"
                                                    f" {delivery.check(sess.reread())[0]}")
            assert len(reports_asked()) == 1 and "hello from crewfile" not in tmux.screen(pane)
            return
        pytest.fail(f"in {ATTEMPTS} turns Codex never took a subagent's report into the turn"
                    f" its Stop hooks held: filed under {reports_filed()}")
    finally:
        for r in releases:
            r.release() if isinstance(r, locks.Lock) else open(r, "w").close()


ATTEMPTS = 3


@needs_codex
def test_a_429_fires_no_codex_hook_and_the_session_is_never_typed_into(rig, tmux, tmp_path):
    """The stand-in answers 429 (rate_limit_exceeded, then insufficient_quota):
    Codex says so on its screen and fires no hook; a real crew-watch reads
    each turn's error from the rollout and records the account's stop once
    per turn, which the wake filter passes once; the verdict holds typing
    and delivery refuses it. A crew-watch started again writes nothing more."""
    env = {k: rig.env[k] for k in ("PATH", "CODEX_HOME", "HOME", "FAKE_KEY", "CREWFILE_DIR")}
    env["CREWFILE_SESSION"] = "cx"
    pretrust(tmux, rig.env["CODEX_HOME"], rig.work)
    events = tmp_path / "events"
    with crew_watch(rig, events, "--probe", "0.5s"):
        pane = codex_window(tmux, rig, f"cd {rig.work} && {BINARY[0]}", env)
        wait_trusted_start(tmux, pane)
        sess = Session(rig.crew, "cx")
        for n, (code, said, error) in enumerate(
                (("rate_limit_exceeded", RATE_LIMITED, "response_too_many_failed_attempts"),
                 ("insufficient_quota", NO_QUOTA, "usage_limit_exceeded")), 1):
            prompt = f"FAIL: {code}"
            tmux("send-keys", "-t", pane, "-l", prompt)
            tmux.wait_screen(pane, prompt)
            # Codex drops a key typed early in its start (seen): Enter until the
            # turn starts, never while it shows its start (a second prompt)
            tmux.enter_until_taken(pane, prompt, lambda: sess.exists() and [
                k for k, _ in rig.kinds("cx")].count("turn-started") >= n, PROMPT_MARKERS,
                timeout=DEADLINE)
            tmux.wait_screen(pane, said, timeout=DEADLINE)
            tmux.wait_screen(pane, "Ask Codex", timeout=DEADLINE)
            wait_for(lambda: [k for k, _ in rig.kinds("cx")].count("account-blocked") >= n,
                     timeout=DEADLINE, what="crew-watch's account-blocked record")
            got = rig.kinds("cx")[-3:]
            assert got[:2] == [("captain", prompt), ("turn-started", "")], got
            assert got[2][0] == "account-blocked" and got[2][1].startswith(f"{error} until "), got
            assert got[2][1].endswith(f": {said}"), got
        blocked = [t for k, t in rig.kinds("cx") if k == "account-blocked"]
        assert blocked[1] == f"usage_limit_exceeded until -: {NO_QUOTA}"
        wait_for(lambda: events.read_bytes().count(b" cx account-blocked: ") >= 2,
                 timeout=DEADLINE, what="crew-watch printing the second record")
    v = verdict.of(sess.reread())
    assert (v.generating, v.account.code) == (verdict.NO, verdict.ACCOUNT_BLOCKED)
    ok, why = delivery.deliver(sess.reread(), "hello from crewfile", quiet=0)
    assert (ok, why.code) == (False, delivery.ACCOUNT_BLOCKED)
    assert "hello from crewfile" not in tmux.screen(pane)
    with open(sess.meta["transcript_path"]) as f:
        ends = [json.loads(line)["payload"] for line in f if '"task_complete"' in line]
    assert [e["error"]["message"] for e in ends] == [RATE_LIMITED, NO_QUOTA], ends
    # the primary's wake filter, on what crew-watch printed: each stop once
    p = subprocess.run([os.path.join(ROOT, "bin", "wake-filter")], input=events.read_bytes(),
                       env=rig.env, capture_output=True, timeout=60)
    assert (p.returncode, p.stderr) == (0, b"")
    woke = [line.split(" ", 3)[1:3] for line in p.stdout.decode().splitlines()]
    assert woke == [["cx", "account-blocked:"], ["cx", "account-blocked:"]], p.stdout
    # started again (and once more, read from its start): nothing is written twice
    p = subprocess.run([os.path.join(ROOT, "bin", "crew-watch"), "--once", "--from-start"],
                       env=rig.env, capture_output=True, timeout=60)
    assert (p.returncode, p.stderr) == (0, b"")
    assert p.stdout.count(b" cx account-blocked: ") == 2
    assert [t for k, t in rig.kinds("cx") if k == "account-blocked"] == blocked


RATE_LIMITED = "exceeded retry limit, last status: 429 Too Many Requests"
NO_QUOTA = "Quota exceeded. Check your plan and billing details."


@contextlib.contextmanager
def crew_watch(rig, out, *args):
    """A real crew-watch following the rig's crew, its events into file
    *out*; stopped by SIGTERM (exit 0) and reaped on the way out, killed if
    it does not stop."""
    with open(out, "wb") as f:
        proc = subprocess.Popen([os.path.join(ROOT, "bin", "crew-watch"), *args], env=rig.env,
                                stdout=f, stderr=subprocess.PIPE)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert (proc.returncode, err) == (0, b""), err
