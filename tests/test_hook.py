"""crew-hook: documented Claude Code payloads for every event (and missing
fields, unknown events, garbage) -> records, outputs, exit codes."""
import json
import os
import subprocess
import sys

from hypothesis import HealthCheck, given, settings, strategies as st
import pytest

from crewfile.wake import inbox
from crewfile.core import logfile, records
from crewfile.session import verdict
from crewfile.session.sessions import Session, register
from conftest import BIN, captain_keys
from crewfile.asides import aside
from transcript import append_prompt
from crewfile.hooks import hook as hook_mod
from crewfile.core.paths import Crew

SID = "5683c0de-0000-4000-8000-000000000001"


def payload(event, **fields):
    base = {"session_id": SID, "transcript_path": f"/tmp/h/.claude/projects/-p/{SID}.jsonl",
            "cwd": "/tmp", "hook_event_name": event}
    base.update(fields)
    return json.dumps(base)


def hook(run, data, name="w1", env=None, args=()):
    e = {"CREWFILE_SESSION": name} if name else {"CREWFILE_SESSION": ""}
    e.update(env or {})
    return run("crew-hook", *args, input=data, env=e)


def kinds(crew, name="w1"):
    return [(r.kind, r.text) for r in Session(crew, name).last_records(100, logfile.TailStats())]


def test_session_start_registers_unknown_named_session_from_payload(crew, run):
    p = hook(run, payload("SessionStart", source="startup", model="claude-opus"))
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "")
    meta = Session(crew, "w1").meta
    assert meta["agent_session_id"] == SID
    assert meta["cwd"] == os.path.realpath("/tmp")
    assert meta["transcript_path"].endswith(f"{SID}.jsonl")
    assert kinds(crew) == [("registered", "kind=crew"), ("started", "startup")]


def test_session_start_updates_meta_of_registered_session(crew, run, tmp_path):
    register(crew, "w1", kind="aside")
    p = hook(run, payload("SessionStart", source="resume", cwd=str(tmp_path)))
    assert p.returncode == 0 and p.stderr == ""
    meta = Session(crew, "w1").meta
    assert meta["kind"] == "aside" and meta["agent_session_id"] == SID
    assert meta["cwd"] == str(tmp_path)
    assert kinds(crew)[-1] == ("started", "resume")


def test_an_asides_agent_is_told_the_rule_at_start(crew, run):
    register(crew, "a1", kind="aside", extra={"topic": "v2 API shape"})
    p = hook(run, payload("SessionStart", source="startup"), name="a1")
    assert p.returncode == 0 and p.stderr == ""
    out = json.loads(p.stdout)["hookSpecificOutput"]
    assert out["hookEventName"] == "SessionStart"
    text = out["additionalContext"]
    assert text.startswith("crewfile: this session is the aside 'a1' on the topic: v2 API shape.")
    assert "You never conclude the aside yourself" in text and "/aside-done" in text
    assert "## " not in text                  # the rule only, not the skill's other text
    # a crew session is told nothing
    register(crew, "w1")
    assert hook(run, payload("SessionStart", source="startup")).stdout == ""


def test_found_by_agent_session_id_without_environment(crew, run):
    register(crew, "w2", agent_session_id=SID)
    p = hook(run, payload("Stop", stop_hook_active=False), name=None)
    assert p.returncode == 0 and p.stderr == ""
    assert kinds(crew, "w2")[-1] == ("turn-ended", "")


def test_unknown_agent_without_environment_is_a_note_not_a_failure(crew, run):
    register(crew, "w2", agent_session_id="someone-else")
    p = hook(run, payload("UserPromptSubmit", prompt="hi"), name=None)
    assert p.returncode == 0 and p.stdout == ""
    assert p.stderr == (f"crew-hook: no crewfile session for agent session {SID}"
                        " (set CREWFILE_SESSION, or session-add --agent-session-id)\n")
    assert kinds(crew, "w2") == [("registered", "kind=crew")]


def test_missing_crew_directory_exits_0_with_one_line(tmp_path, run):
    p = run("crew-hook", input=payload("Stop"),
            env={"CREWFILE_DIR": str(tmp_path / "nowhere"), "CREWFILE_SESSION": ""})
    assert p.returncode == 0 and p.stdout == ""
    assert len(p.stderr.splitlines()) == 1 and "no crewfile session" in p.stderr
    assert not (tmp_path / "nowhere").exists()


def test_unreadable_stdin_exits_0_with_one_line(tmp_path, crew):
    """An OSError reading the payload is a hook problem like any other: exit
    0 (Gemini CLI reads any other code but 1 as a refusal), one line."""
    with open(tmp_path / "write-only", "w") as stdin:      # read(2) on it: EBADF
        p = subprocess.run([sys.executable, os.path.join(BIN, "crew-hook"), "--agent", "gemini"],
                           stdin=stdin, capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, CREWFILE_SESSION="w1"))
    assert p.returncode == 0 and p.stdout == ""
    assert p.stderr.splitlines() == ["crew-hook: ?: stdin cannot be read: Bad file descriptor"]
    p = subprocess.run(["sh", "-c", '"$@" <&-', "sh", sys.executable, os.path.join(BIN, "crew-hook"),
                        "--agent", "gemini"], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, CREWFILE_SESSION="w1"))    # closed at start
    assert (p.returncode, p.stdout, p.stderr) == (
        0, "", "crew-hook: ?: stdin cannot be read: standard input is closed\n")


def test_a_compaction_mid_turn_is_no_start_and_the_turn_goes_on(crew, run):
    """Claude Code compacts mid-turn and then runs SessionStart (source
    compact) while the turn goes on (tests/CLAUDE_FINDINGS.md, "Auto-compact")."""
    hook(run, payload("SessionStart", source="startup"))
    hook(run, payload("UserPromptSubmit", prompt="work on it"))
    p = hook(run, payload("SessionStart", source="compact"))
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "")
    assert kinds(crew)[-2:] == [("turn-started", ""), ("compacted", "")]
    assert verdict.of(Session(crew, "w1")).generating == verdict.YES
    hook(run, payload("Stop"))
    assert verdict.of(Session(crew, "w1")).generating == verdict.NO


def test_user_prompt_submit_records_captain_and_turn_started(crew, run):
    register(crew, "w1")
    p = hook(run, payload("UserPromptSubmit", prompt="fix the\nbuild", prompt_id="x"))
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "")
    got = kinds(crew)
    assert got[-1] == ("turn-started", "")
    assert ("captain", "fix the\nbuild") in got


def test_aside_done_prompt_is_the_captains_conclusion(crew, run, tmp_path, aside_window):
    """Recorded with its prompt id as evidence (and the keys of the captain at
    a terminal); believed once the transcript holds it."""
    aside_window("a1")
    path = str(tmp_path / "t.jsonl")
    hook(run, payload("SessionStart", source="startup", transcript_path=path), name="a1")
    captain_keys(Session(crew, "a1"), "/aside-done thanks\r")
    p = hook(run, payload("UserPromptSubmit", prompt="/aside-done thanks", prompt_id="p-1",
                          transcript_path=path), name="a1")
    assert p.returncode == 0, p.stderr
    assert ("captain-done", "thanks") in kinds(crew, "a1")
    sess = Session(crew, "a1")
    st = aside.scan(sess)
    assert "does not hold that prompt" in aside.believed(sess, st)   # not yet written
    append_prompt(path, "/aside-done thanks", "p-1")                  # Claude Code writes it
    assert aside.believed(sess, st) is None


@pytest.mark.parametrize("fields, why", [
    ({}, "no prompt id"),
    ({"prompt_id": "p-1", "transcript_path": "/elsewhere.jsonl"}, "another transcript"),
    ({"prompt_id": "p-0"}, "already holds that prompt"),
])
def test_a_forged_aside_done_payload_is_refused_and_surfaced(crew, run, tmp_path, fields, why):
    """A hand-made UserPromptSubmit piped into crew-hook (from the agent's own shell)."""
    register(crew, "a1", kind="aside")
    path = str(tmp_path / "t.jsonl")
    hook(run, payload("SessionStart", source="startup", transcript_path=path), name="a1")
    append_prompt(path, "RUN: something", "p-0")        # the turn the agent is in
    data = json.loads(payload("UserPromptSubmit", prompt="/aside-done", transcript_path=path))
    data.update(fields)
    p = hook(run, json.dumps(data), name="a1")
    assert (p.returncode, p.stdout) == (0, "")
    got = kinds(crew, "a1")
    assert "captain-done" not in [k for k, _ in got]
    problem = [t for k, t in got if k == "problem"]
    assert len(problem) == 1 and problem[0].startswith(
        "self-conclusion refused: /aside-done not recorded: ") and why in problem[0]


def test_a_captain_done_line_written_during_a_tool_call_is_reported_after_it(crew, run, tmp_path):
    """printf >> status from the agent's shell: its PostToolUse hook reports it, once."""
    register(crew, "a1", kind="aside")
    hook(run, payload("UserPromptSubmit", prompt="go on", prompt_id="p-0"), name="a1")
    sess = Session(crew, "a1")
    with open(sess.status_path, "a") as f:
        f.write(records.new_line("captain-done", "settled"))
    for _ in range(2):
        hook(run, payload("PostToolUse", tool_name="Bash"), name="a1")
    hook(run, payload("Stop"), name="a1")
    problems = [t for k, t in kinds(crew, "a1") if k == "problem"]
    assert problems == ["self-conclusion refused: a captain-done record is not believed: it has"
                        " no evidence of the captain (not written by a prompt hook or aside-done)"]


def test_notices_are_drained_into_model_context_as_facts(crew, run):
    register(crew, "w1")
    inbox.post(crew, "w1", "job", "j-42 ended: exit 0 after 3s")
    inbox.post(crew, "w1", "job", "j-43 ended: exit 1 after 9s")
    p = hook(run, payload("UserPromptSubmit", prompt="next"))
    assert p.returncode == 0 and p.stderr == ""
    out = json.loads(p.stdout)["hookSpecificOutput"]
    assert out["hookEventName"] == "UserPromptSubmit"
    ctx = out["additionalContext"].splitlines()
    assert "not written by the user" in ctx[0]
    assert ctx[1].startswith("crewfile notice: job j-42 ended: exit 0 after 3s (posted ")
    assert ctx[2].startswith("crewfile notice: job j-43 ended")
    # a text that already starts with its kind is not prefixed twice
    inbox.post(crew, "w1", "job", "job j-44 (tests) exited 0")
    ctx = json.loads(hook(run, payload("UserPromptSubmit", prompt="x")).stdout)
    assert ctx["hookSpecificOutput"]["additionalContext"].splitlines()[1].startswith(
        "crewfile notice: job j-44 (tests) exited 0 (posted ")
    assert inbox.pending(crew, "w1") == []
    # drained once: the next prompt carries nothing
    p = hook(run, payload("UserPromptSubmit", prompt="again"))
    assert p.stdout == ""
    # the notice is never recorded as captain words
    assert not any(k == "captain" and "j-42" in t for k, t in kinds(crew))


def test_post_tool_use_drains_notices(crew, run):
    register(crew, "w1")
    inbox.post(crew, "w1", "job", "j-7 ended: exit 0")
    p = hook(run, payload("PostToolUse", tool_name="Bash", tool_input={"command": "ls"},
                          tool_response={"stdout": ""}))
    out = json.loads(p.stdout)["hookSpecificOutput"]
    assert out["hookEventName"] == "PostToolUse"
    assert "crewfile notice: job j-7 ended: exit 0" in out["additionalContext"]
    assert hook(run, payload("PostToolUse", tool_name="Bash")).stdout == ""


def test_post_tool_use_after_a_permission_dialog_is_generating_again(crew, run):
    register(crew, "w1")
    hook(run, payload("UserPromptSubmit", prompt="touch x"))
    hook(run, payload("Notification", notification_type="permission_prompt"))
    assert hook(run, payload("PostToolUse", tool_name="Bash")).returncode == 0
    assert kinds(crew)[-2:] == [("waiting", "permission"), ("turn-started", "permission answered")]
    hook(run, payload("PostToolUse", tool_name="Bash"))          # once, not per tool call
    assert kinds(crew)[-1] == ("turn-started", "permission answered")
    assert len(kinds(crew)) == 5


def test_garbage_in_inbox_is_said_and_good_notices_delivered(crew, run):
    register(crew, "w1")
    inbox.post(crew, "w1", "job", "j-1 ended")
    with open(crew.session_file("w1", "inbox"), "a") as f:
        f.write("this is not a record\n")
    p = hook(run, payload("PostToolUse"))
    assert "j-1 ended" in p.stdout
    assert p.returncode == 0 and "skipped 1 malformed inbox line" in p.stderr


def test_stop_records_turn_ended_and_a_notice_never_blocks(crew, run):
    register(crew, "w1")
    inbox.post(crew, "w1", "job", "j-1 ended")
    p = hook(run, payload("Stop", stop_hook_active=False, last_assistant_message="ok"))
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "")
    assert kinds(crew)[-1] == ("turn-ended", "")
    assert len(inbox.pending(crew, "w1")) == 1       # left for the next prompt


def test_a_wake_does_not_block_a_crew_session(crew, run):
    register(crew, "w1")
    inbox.post(crew, "w1", "wake", "w2 problem: disk full")
    p = hook(run, payload("Stop", stop_hook_active=False))
    assert p.stdout == "" and kinds(crew)[-1] == ("turn-ended", "")


def test_primary_with_pending_wakes_continues_once(crew, run):
    register(crew, "firstmate", kind="primary")
    inbox.post(crew, "firstmate", "job", "j-9 ended: exit 0")
    inbox.post(crew, "firstmate", "wake", "w2 blocked: needs a database")
    p = hook(run, payload("Stop", stop_hook_active=False), name="firstmate")
    assert p.returncode == 0 and p.stderr == ""
    out = json.loads(p.stdout)["hookSpecificOutput"]
    assert out["hookEventName"] == "Stop" and "decision" not in json.loads(p.stdout)
    lines = out["additionalContext"].splitlines()
    assert lines[0].startswith("crewfile wake:")
    assert lines[1].startswith("crewfile notice: job j-9 ended: exit 0 (posted ")
    assert lines[2].startswith("crewfile notice: wake w2 blocked: needs a database (posted ")
    assert inbox.pending(crew, "firstmate") == []
    assert kinds(crew, "firstmate")[-1] == ("registered", "kind=primary")   # turn goes on
    # the continued turn stops: stop_hook_active, even with a new wake, never loops
    inbox.post(crew, "firstmate", "wake", "w3 lost")
    p = hook(run, payload("Stop", stop_hook_active=True), name="firstmate")
    assert p.stdout == "" and p.returncode == 0
    assert kinds(crew, "firstmate")[-1] == ("turn-ended", "")
    assert len(inbox.pending(crew, "firstmate")) == 1


def test_primary_without_wakes_just_ends_its_turn(crew, run):
    register(crew, "firstmate", kind="primary")
    inbox.post(crew, "firstmate", "job", "j-9 ended")
    p = hook(run, payload("Stop", stop_hook_active=False), name="firstmate")
    assert p.stdout == "" and kinds(crew, "firstmate")[-1] == ("turn-ended", "")


@pytest.mark.parametrize("ntype,record", [("idle_prompt", ("idle", "")),
                                          ("permission_prompt", ("waiting", "permission"))])
def test_notification_records(crew, run, ntype, record):
    register(crew, "w1")
    p = hook(run, payload("Notification", message="Claude is waiting", notification_type=ntype))
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "")
    assert kinds(crew)[-1] == record


def test_other_notifications_write_nothing(crew, run):
    register(crew, "w1")
    for extra in ({"notification_type": "agent_needs_input"}, {}, {"notification_type": 7}):
        p = hook(run, payload("Notification", **extra))
        assert (p.returncode, p.stdout, p.stderr) == (0, "", "")
    assert kinds(crew) == [("registered", "kind=crew")]


def test_a_hook_whose_pane_is_not_its_own_leaves_the_recorded_pane(crew, run, tmux):
    """Codex runs its hooks in an app-server daemon that keeps the environment
    of the Codex that started it: after a respawn (the tmux server killed, the
    agent resumed in a new pane) $TMUX_PANE names the dead agent's pane, or
    another pane that now has its id. No ancestor of the hook is in it, so it
    is not recorded (seen in the soak: the live agent's pane read as gone,
    its nudge disarmed, the worker idle for the rest of the day)."""
    pane = tmux.new_window("exec sleep 600", name="w1")
    other = tmux.new_window("exec sleep 600", name="old")
    register(crew, "w1", tmux=pane, env={"CREWFILE_TMUX": tmux.sock}, pid=tmux.pane_pid(pane))
    fields = ("tmux", "tmux_target", "tmux_socket", "tmux_server", "pid", "pid_start")
    before = {k: Session(crew, "w1").meta.get(k) for k in fields}
    assert before["tmux"] == pane and before["tmux_server"]
    for stale in (other, "%99"):
        p = hook(run, payload("UserPromptSubmit", prompt="go"),
                 env={"TMUX": f"{tmux.sock},1,0", "TMUX_PANE": stale})
        assert (p.returncode, p.stdout) == (0, "")
        assert p.stderr == (f"crew-hook: w1: the agent process was not found among the hook's"
                            f" ancestors in pane {stale}: its pane is left as recorded\n")
        assert {k: Session(crew, "w1").meta.get(k) for k in fields} == before
    assert kinds(crew)[-2:] == [("captain", "go"), ("turn-started", "")]


def test_session_end_records_reason(crew, run):
    register(crew, "w1")
    assert hook(run, payload("SessionEnd", reason="prompt_input_exit")).returncode == 0
    assert kinds(crew)[-1] == ("ended", "prompt_input_exit")
    assert Session(crew, "w1").ended()


def test_an_earlier_agents_session_end_does_not_end_the_live_agents_life(crew, run):
    """A tmux server restarted: the resumed agent registered first, then the
    old agent's SessionEnd ran. It must not stand over the live agent."""
    other = subprocess.Popen(["sleep", "600"])
    try:
        register(crew, "w1", pid=other.pid)
        p = hook(run, payload("SessionEnd", reason="other"))
        assert (p.returncode, p.stdout) == (0, "")
        assert p.stderr == ("crew-hook: w1: an earlier agent's SessionEnd, not recorded:"
                            " the session's registered agent is another, alive\n")
        assert kinds(crew) == [("registered", "kind=crew")]
        assert not Session(crew, "w1").ended()
    finally:
        other.kill()
        other.wait()
    # Its agent gone, an end is recorded as ever (it is no other agent's life).
    p = hook(run, payload("SessionEnd", reason="other"))
    assert (p.returncode, p.stderr) == (0, "")
    assert kinds(crew)[-1] == ("ended", "other")


def test_the_registered_agents_own_session_end_is_recorded(crew, run):
    register(crew, "w1", pid=os.getpid())       # the hook runs below this process, as below its agent
    p = hook(run, payload("SessionEnd", reason="prompt_input_exit"))
    assert (p.returncode, p.stderr) == (0, "")
    assert kinds(crew)[-1] == ("ended", "prompt_input_exit")


def test_session_end_without_reason(crew, run):
    register(crew, "w1")
    hook(run, payload("SessionEnd"))
    assert kinds(crew)[-1] == ("ended", "unknown")


@pytest.mark.parametrize("command", [
    "aside-done", "/work/main/bin/aside-done a1", "cd x && aside-done", "echo hi; aside-done a1",
    "status-append a1 captain-done forged", "(aside-done)"])
def test_guard_denies_the_captain_only_conclusion(crew, run, command):
    register(crew, "a1", kind="aside")
    p = hook(run, payload("PreToolUse", tool_name="Bash", tool_use_id="toolu_1",
                          tool_input={"command": command, "description": "x"}), name="a1")
    assert p.returncode == 0 and p.stderr == ""
    out = json.loads(p.stdout)["hookSpecificOutput"]
    assert out["hookEventName"] == "PreToolUse"
    assert out["permissionDecision"] == "deny"
    assert "captain's act only" in out["permissionDecisionReason"]
    assert "/aside-done" in out["permissionDecisionReason"]
    kind, text = kinds(crew, "a1")[-1]
    assert kind == "problem" and text == f"self-conclusion refused: the agent ran {command!r}; denied"


@pytest.mark.parametrize("command", [
    "ls", "aside-conclude a1 --report -", "echo my-aside-done-list", "git log aside-doneness"])
def test_guard_allows_other_commands(crew, run, command):
    register(crew, "a1", kind="aside")
    p = hook(run, payload("PreToolUse", tool_name="Bash", tool_input={"command": command}),
             name="a1")
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "")


def test_guard_works_without_a_session_and_ignores_other_tools(tmp_path, run):
    env = {"CREWFILE_DIR": str(tmp_path / "none"), "CREWFILE_SESSION": ""}
    p = run("crew-hook", input=payload("PreToolUse", tool_name="Bash",
                                       tool_input={"command": "aside-done"}), env=env)
    assert json.loads(p.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert p.returncode == 0
    p = run("crew-hook", input=payload("PreToolUse", tool_name="Write",
                                       tool_input={"content": "aside-done"}), env=env)
    assert (p.returncode, p.stdout) == (0, "")


@pytest.mark.parametrize("data", [
    "", "garbage", "[1, 2]", "null", '"Stop"', '{"hook_event_name": 5}', "{",
    '{"hook_event_name": "PreCompact"}', '{"hook_event_name": "UserPromptExpansion"}',
    '{"hook_event_name": "NoSuchEvent", "session_id": "x"}', b"\xff\xfe\x00"])
def test_garbage_and_unknown_events_exit_0_write_nothing(crew, run, data):
    register(crew, "w1")
    p = hook(run, data)
    assert p.returncode == 0 and p.stdout == ""
    assert len(p.stderr.splitlines()) <= 1
    assert kinds(crew) == [("registered", "kind=crew")]


@pytest.mark.parametrize("event,fields", [
    ("SessionStart", {"source": None, "cwd": 5, "transcript_path": ["x"]}),
    ("UserPromptSubmit", {"prompt": None}),
    ("UserPromptSubmit", {"prompt": {"not": "text"}}),
    ("PreToolUse", {"tool_name": "Bash", "tool_input": "not a dict"}),
    ("PreToolUse", {"tool_name": "Bash", "tool_input": {"command": 17}}),
    ("Stop", {"stop_hook_active": "yes"}),
    ("SessionEnd", {"reason": 12}),
    ("PostToolUse", {}),
])
def test_missing_or_wrong_fields_never_fail(crew, run, event, fields):
    register(crew, "w1", kind="primary")
    inbox.post(crew, "w1", "wake", "w2 problem")
    data = json.loads(payload(event))
    for k, v in fields.items():
        if v is None:
            data.pop(k, None)
        else:
            data[k] = v
    data.pop("session_id")
    p = hook(run, json.dumps(data))
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""


def test_payload_with_no_session_id_and_no_environment(crew, run):
    p = hook(run, json.dumps({"hook_event_name": "Stop"}), name=None)
    assert p.returncode == 0 and p.stdout == ""
    assert "no crewfile session for agent session ?" in p.stderr


def test_bad_session_name_in_environment_is_one_line_exit_0(crew, run):
    p = hook(run, payload("Stop"), name="../etc")
    assert p.returncode == 0 and p.stdout == ""
    assert p.stderr.startswith("crew-hook: Stop: bad session name") and p.stderr.count("\n") == 1


def test_internal_failure_is_exit_0_one_line(crew, run):
    register(crew, "w1")
    status = crew.session_file("w1", "status")
    os.unlink(status)
    os.mkdir(status)              # the status log cannot be appended to, even by root
    p = hook(run, payload("Stop"))
    assert p.returncode == 0 and p.stdout == ""
    assert p.stderr.startswith("crew-hook: Stop: ") and p.stderr.count("\n") == 1


def test_internal_failure_in_library_is_exit_0_one_line(crew, monkeypatch):

    def boom(ctx):
        raise KeyError("bug")
    monkeypatch.setitem(hook_mod.EVENTS, "Stop", boom)
    reply = hook_mod.handle(payload("Stop"), {"CREWFILE_DIR": crew.root})
    assert (reply.code, reply.out) == (0, "")
    assert reply.err == "Stop: internal error: KeyError: 'bug'"


def test_log_that_is_a_directory_is_exit_0(crew, run):
    register(crew, "w1")
    os.unlink(crew.session_file("w1", "status"))
    os.mkdir(crew.session_file("w1", "status"))
    p = hook(run, payload("Stop"))
    assert p.returncode == 0 and p.stdout == ""
    assert p.stderr.startswith("crew-hook: Stop: ") and p.stderr.count("\n") == 1


def test_codex_notify_turn_complete(crew, run):
    register(crew, "cx")
    note = {"type": "agent-turn-complete", "thread-id": "th-1", "turn-id": "t-1",
            "cwd": "/tmp", "input-messages": ["do it"], "last-assistant-message": "done"}
    p = run("crew-hook", json.dumps(note), env={"CREWFILE_SESSION": "cx"})
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "")
    assert kinds(crew, "cx")[-1] == ("turn-ended", "")
    # by thread id, without the environment
    Session(crew, "cx").update_meta(agent_session_id="th-1")
    p = run("crew-hook", json.dumps(note), env={"CREWFILE_SESSION": ""})
    assert p.returncode == 0 and p.stderr == ""
    assert [k for k, _ in kinds(crew, "cx")][-2:] == ["turn-ended", "turn-ended"]
    # other types and garbage: nothing, exit 0
    for arg in (json.dumps({"type": "something-else"}), "not json"):
        p = run("crew-hook", arg, env={"CREWFILE_SESSION": "cx"})
        assert p.returncode == 0 and p.stdout == ""
    assert len(kinds(crew, "cx")) == 3


def test_help_and_usage(run):
    p = run("crew-hook", "--help")
    assert p.returncode == 0 and p.stdout.startswith("crew-hook [--agent AGENT] < PAYLOAD ")
    p = run("crew-hook", "--no-such")
    assert p.returncode == 2 and p.stderr.startswith("crew-hook: unknown option --no-such")


def _fuzz_values():
    scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=20)
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                        | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=8)


def test_fuzzed_payloads_never_fail_the_agent(tmp_path):
    """Any payload, any field of any type, for every event: exit 0, at most one
    stderr line, stdout empty or one JSON object of a documented shape."""
    crew = Crew(str(tmp_path / "crew"))
    register(crew, "w1", kind="primary")
    register(crew, "a1", kind="aside")
    fields = st.fixed_dictionaries({}, optional={
        k: _fuzz_values() | st.sampled_from(good) for k, good in {
            "session_id": ["s-1"], "cwd": ["/tmp"], "transcript_path": ["/t.jsonl"],
            "prompt": ["hi", "/aside-done ok"], "source": ["startup"],
            "tool_name": ["Bash"], "tool_input": [{"command": "aside-done"}, {"command": "ls"}],
            "stop_hook_active": [False, True], "notification_type": ["idle_prompt"],
            "reason": ["clear"]}.items()})

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.sampled_from(sorted(hook_mod.EVENTS) + ["Other", 3, None]), fields,
           st.sampled_from(["w1", "a1", "", "../x", "new-one"]))
    def check(event, payload, name):
        payload = dict(payload, hook_event_name=event)
        if name == "w1":
            inbox.post(crew, "w1", "wake", "w2 problem")
        reply = hook_mod.handle(json.dumps(payload), {"CREWFILE_DIR": crew.root,
                                                      "CREWFILE_SESSION": name})
        assert reply.code == 0
        assert "\n" not in reply.err
        if reply.out:
            out = json.loads(reply.out)
            assert set(out) <= {"hookSpecificOutput", "decision", "reason"}
    check()


def test_guard_denies_even_when_the_record_cannot_be_written(crew, run):
    register(crew, "a1", kind="aside")
    os.unlink(crew.session_file("a1", "status"))
    os.mkdir(crew.session_file("a1", "status"))          # appends fail
    p = hook(run, payload("PreToolUse", tool_name="Bash",
                          tool_input={"command": "aside-done a1"}), name="a1")
    assert p.returncode == 0
    assert json.loads(p.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert p.stderr.startswith("crew-hook: denial not recorded: ")


def test_an_ended_session_started_again_begins_a_new_life(crew, run):
    register(crew, "firstmate", kind="primary", cwd="/tmp", session_key="k1")
    hook(run, payload("SessionStart", source="startup"), name="firstmate")
    hook(run, payload("SessionEnd", reason="prompt_input_exit"), name="firstmate")
    assert Session(crew, "firstmate").ended()
    p = hook(run, payload("SessionStart", source="startup", session_id="new-id"), name="firstmate")
    assert p.returncode == 0 and p.stderr == ""
    sess = Session(crew, "firstmate")
    assert not sess.ended()
    assert kinds(crew, "firstmate")[-2:] == [("registered", "kind=primary"), ("started", "startup")]
    assert sess.meta["kind"] == "primary" and sess.meta["session_key"] == "k1"
    assert sess.meta["agent_session_id"] == "new-id"


def test_an_ended_aside_is_not_revived(crew, run):
    register(crew, "a1", kind="aside")
    hook(run, payload("SessionEnd", reason="other"), name="a1")
    hook(run, payload("SessionStart", source="resume"), name="a1")
    assert [k for k, _ in kinds(crew, "a1")] == ["registered", "ended", "started"]
