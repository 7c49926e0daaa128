"""crew-hook --agent codex|gemini: each CLI's own hook payloads -> the same
records, the guard's denial and the notices in that CLI's own reply format;
--install/--uninstall of each CLI's hooks file.

Payloads are built from each CLI's own documentation, not guessed:
- Codex CLI: openai/codex codex-rs/hooks/schema/generated/
  {session-start,user-prompt-submit,pre-tool-use,permission-request,
  post-tool-use,stop}.command.input.schema.json (required fields; tool_name
  "Bash" with tool_input {"command": ...}), and the payloads Codex 0.171.0
  sent when run offline against tests/responses_server.py (SessionStart with
  model, permission_mode, source "startup"; turn_id on the turn's events).
  Reply shapes: pre-tool-use.command.output.schema.json (hookSpecificOutput
  permissionDecision "deny" + permissionDecisionReason, as the test
  permission_decision_deny_blocks_processing in src/events/pre_tool_use.rs),
  stop.command.output.schema.json (decision "block" + reason; no
  additionalContext), user-prompt-submit / post-tool-use output schemas
  (hookSpecificOutput.additionalContext).
- Gemini CLI: google-gemini/gemini-cli docs/hooks/reference.md (base input
  session_id, transcript_path, cwd, hook_event_name, timestamp; BeforeAgent
  prompt; BeforeTool tool_name/tool_input, decision "deny" + reason;
  AfterTool tool_response; AfterAgent prompt, prompt_response,
  stop_hook_active; Notification notification_type "ToolPermission",
  message, details; SessionEnd reason "exit"; timeouts in milliseconds).
No real Codex or Gemini CLI runs in these tests.
"""
import json
import os
import subprocess
import sys

from hypothesis import HealthCheck, given, settings, strategies as st
import pytest

from crewfile.agents import install
from crewfile.wake import inbox
from crewfile.core import logfile
from crewfile.hooks.hook import handle, load_agent
from crewfile.session import verdict
from crewfile.session.sessions import Session, register
from crewfile.core.paths import Crew
from test_hook import _fuzz_values
from crewfile.session.prompt import PROMPT_MARKERS, markers_of, placeholder_of, prompt_tail, without_placeholder

SID = "019a0000-0000-7000-8000-00000000c0de"


def codex(event, **fields):
    base = {"session_id": SID, "transcript_path": f"/home/u/.codex/sessions/rollout-{SID}.jsonl",
            "cwd": "/tmp", "hook_event_name": event, "model": "gpt-5-codex",
            "permission_mode": "default"}
    if event != "SessionStart":
        base["turn_id"] = "turn-1"
    return dict(base, **fields)


def gemini(event, **fields):
    base = {"session_id": SID, "transcript_path": f"/home/u/.gemini/tmp/chats/{SID}.json",
            "cwd": "/tmp", "hook_event_name": event, "timestamp": "2026-11-30T21:00:00.000Z"}
    return dict(base, **fields)


def call(crew, agent, payload, name="w1"):
    reply = handle(json.dumps(payload), {"CREWFILE_DIR": crew.root, "CREWFILE_SESSION": name},
                   agent=agent)
    assert reply.code == 0 and "\n" not in reply.err
    return reply


def kinds(crew, name="w1"):
    return [(r.kind, r.text) for r in Session(crew, name).last_records(100, logfile.TailStats())]


def context_of(reply, event):
    out = json.loads(reply.out)["hookSpecificOutput"]
    assert out["hookEventName"] == event
    return out["additionalContext"]


# ---------------------------------------------------------------- Codex

def test_codex_a_turn_with_a_permission_wait(crew):
    r = call(crew, "codex", codex("SessionStart", source="startup"))
    assert (r.out, r.err) == ("", "")
    assert Session(crew, "w1").meta["agent_session_id"] == SID
    inbox.post(crew, "w1", "job", "j-1 ended: exit 0")
    r = call(crew, "codex", codex("UserPromptSubmit", prompt="fix the build"))
    assert r.err == ""
    assert "crewfile notice: job j-1 ended: exit 0" in context_of(r, "UserPromptSubmit")
    r = call(crew, "codex", codex("PermissionRequest", tool_name="Bash",
                                  tool_input={"command": "rm -rf build", "description": "clean"}))
    assert (r.out, r.err) == ("", "")             # no decision: the person answers
    assert kinds(crew)[-1] == ("waiting", "permission")
    r = call(crew, "codex", codex("PostToolUse", tool_name="Bash", tool_use_id="call-1",
                                  tool_input={"command": "rm -rf build"},
                                  tool_response="Exit code: 0"))
    assert kinds(crew)[-1] == ("turn-started", "permission answered")
    r = call(crew, "codex", codex("Stop", stop_hook_active=False,
                                  last_assistant_message="done"))
    assert (r.out, r.err) == ("", "")
    got = kinds(crew)
    assert ("captain", "fix the build") in got and ("started", "startup") in got
    assert got[-1] == ("turn-ended", "")


def test_codex_guard_denies_in_codexs_format(crew):
    register(crew, "a1", kind="aside")
    r = call(crew, "codex", codex("PreToolUse", tool_name="Bash", tool_use_id="call-2",
                                  tool_input={"command": "aside-done a1"}), name="a1")
    out = json.loads(r.out)
    assert set(out) == {"hookSpecificOutput"}
    spec = out["hookSpecificOutput"]
    assert spec["hookEventName"] == "PreToolUse" and spec["permissionDecision"] == "deny"
    assert "captain's act only" in spec["permissionDecisionReason"]
    assert kinds(crew, "a1")[-1][0] == "problem"
    # another command, or another tool: nothing
    for fields in ({"tool_name": "Bash", "tool_input": {"command": "ls"}},
                   {"tool_name": "apply_patch", "tool_input": {"command": "aside-done"}}):
        assert call(crew, "codex", codex("PreToolUse", **fields), name="a1").out == ""


def test_codex_primary_wakes_continue_as_a_block_with_reason(crew):
    register(crew, "firstmate", kind="primary")
    inbox.post(crew, "firstmate", "wake", "w2 blocked: needs a database")
    r = call(crew, "codex", codex("Stop", stop_hook_active=False), name="firstmate")
    out = json.loads(r.out)
    assert set(out) == {"decision", "reason"} and out["decision"] == "block"
    assert out["reason"].startswith("crewfile wake:")
    assert "wake w2 blocked: needs a database" in out["reason"]
    assert kinds(crew, "firstmate")[-1] == ("registered", "kind=primary")
    inbox.post(crew, "firstmate", "wake", "w3 lost")
    r = call(crew, "codex", codex("Stop", stop_hook_active=True), name="firstmate")
    assert r.out == "" and kinds(crew, "firstmate")[-1] == ("turn-ended", "")


def test_codex_aside_briefing_at_start(crew):
    register(crew, "a1", kind="aside", extra={"topic": "retries"})
    r = call(crew, "codex", codex("SessionStart", source="startup"), name="a1")
    assert context_of(r, "SessionStart").startswith("crewfile: this session is the aside 'a1'")


def test_codex_a_compaction_mid_turn_is_no_start(crew):
    """Codex 0.171.0's hooks for an auto-compaction inside a turn, as seen
    (tests/test_codex_compact_e2e.py): PreCompact, PostCompact (not
    installed), then SessionStart with source "compact" and no turn_id. The
    turn goes on: the session still reads as generating."""
    call(crew, "codex", codex("SessionStart", source="startup"))
    call(crew, "codex", codex("UserPromptSubmit", prompt="BIG: make"))
    r = call(crew, "codex", codex("SessionStart", source="compact"))
    assert (r.out, r.err) == ("", "")
    assert kinds(crew)[-2:] == [("turn-started", ""), ("compacted", "")]
    assert verdict.of(Session(crew, "w1")).generating == verdict.YES


# ---------------------------------------------------------------- Gemini

def test_gemini_a_turn_with_a_permission_wait_and_end(crew):
    r = call(crew, "gemini", gemini("SessionStart", source="startup"))
    assert (r.out, r.err) == ("", "")
    inbox.post(crew, "w1", "job", "j-1 ended: exit 0")
    r = call(crew, "gemini", gemini("BeforeAgent", prompt="fix the build"))
    assert "crewfile notice: job j-1 ended: exit 0" in context_of(r, "BeforeAgent")
    r = call(crew, "gemini", gemini("Notification", notification_type="ToolPermission",
                                    message="Allow run_shell_command?",
                                    details={"tool_name": "run_shell_command"}))
    assert r.out == "" and kinds(crew)[-1] == ("waiting", "permission")
    inbox.post(crew, "w1", "job", "j-2 ended: exit 1")
    r = call(crew, "gemini", gemini("AfterTool", tool_name="run_shell_command",
                                    tool_input={"command": "make"},
                                    tool_response={"llmContent": "ok", "returnDisplay": "ok"}))
    assert "j-2 ended: exit 1" in context_of(r, "AfterTool")
    assert kinds(crew)[-1] == ("turn-started", "permission answered")
    r = call(crew, "gemini", gemini("AfterAgent", prompt="fix the build",
                                    prompt_response="done", stop_hook_active=False))
    assert r.out == "" and kinds(crew)[-1] == ("turn-ended", "")
    call(crew, "gemini", gemini("SessionEnd", reason="exit"))
    got = kinds(crew)
    assert ("captain", "fix the build") in got and got[-1] == ("ended", "exit")


def test_gemini_resumed_keeps_the_transcript_it_writes(crew):
    """Gemini CLI 0.61.0 run with --resume ID starts a new chat file, names it
    at SessionStart (source resume), then goes on writing the resumed
    conversation's own file (seen in the soak: the tokens view counted the
    new file, holding no reply, for the rest of the day). The same
    conversation resumed keeps its recorded transcript; another one (a new
    session id) has its own."""
    call(crew, "gemini", gemini("SessionStart", source="startup"))
    first = gemini("SessionStart")["transcript_path"]
    stub = first.replace(".json", "-resumed.json")
    call(crew, "gemini", gemini("SessionStart", source="resume", transcript_path=stub))
    assert Session(crew, "w1").meta["transcript_path"] == first
    other = "/home/u/.gemini/tmp/chats/another.json"
    call(crew, "gemini", gemini("SessionStart", source="startup", session_id="s-2",
                                transcript_path=other))
    assert Session(crew, "w1").meta["transcript_path"] == other


def test_gemini_guard_denies_in_geminis_format(crew):
    register(crew, "a1", kind="aside")
    r = call(crew, "gemini", gemini("BeforeTool", tool_name="run_shell_command",
                                    tool_input={"command": "bin/aside-done a1",
                                                "description": "finish"}), name="a1")
    out = json.loads(r.out)
    assert set(out) == {"decision", "reason"} and out["decision"] == "deny"
    assert "captain's act only" in out["reason"]
    assert kinds(crew, "a1")[-1][0] == "problem"
    # Claude's tool name means nothing to Gemini's adapter
    r = call(crew, "gemini", gemini("BeforeTool", tool_name="Bash",
                                    tool_input={"command": "aside-done"}), name="a1")
    assert r.out == ""


def test_gemini_primary_wakes_retry_the_turn_with_a_reason(crew):
    register(crew, "firstmate", kind="primary")
    inbox.post(crew, "firstmate", "wake", "w2 problem: disk full")
    r = call(crew, "gemini", gemini("AfterAgent", prompt="x", prompt_response="y",
                                    stop_hook_active=False), name="firstmate")
    out = json.loads(r.out)
    assert out["decision"] == "deny" and "wake w2 problem: disk full" in out["reason"]
    r = call(crew, "gemini", gemini("AfterAgent", stop_hook_active=True), name="firstmate")
    assert r.out == "" and kinds(crew, "firstmate")[-1] == ("turn-ended", "")


def test_events_of_one_agent_mean_nothing_to_another(crew):
    register(crew, "w1")
    for agent, event in (("gemini", "Stop"), ("gemini", "UserPromptSubmit"),
                         ("codex", "AfterAgent"), ("codex", "Notification"),
                         ("claude", "BeforeAgent"), ("gemini", "PermissionRequest")):
        r = call(crew, agent, {"session_id": SID, "hook_event_name": event})
        assert (r.out, r.err) == ("", "")
    assert kinds(crew) == [("registered", "kind=crew")]


@pytest.mark.parametrize("agent", ["nope", "../x", "Claude", "", "adapters"])
def test_an_unknown_agent_is_a_note_and_exit_0(crew, agent):
    register(crew, "w1")
    r = handle(json.dumps({"hook_event_name": "Stop"}), {"CREWFILE_DIR": crew.root},
               agent=agent)
    assert r.code == 0 and r.out == "" and "agent" in r.err
    assert kinds(crew) == [("registered", "kind=crew")]


def test_the_command_line_selects_the_agent(crew, run):
    register(crew, "w1")
    p = run("crew-hook", "--agent", "gemini", input=json.dumps(gemini("AfterAgent")),
            env={"CREWFILE_SESSION": "w1"})
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "")
    assert kinds(crew)[-1] == ("turn-ended", "")
    p = run("crew-hook", "--agent", "nope", input=json.dumps(gemini("AfterAgent")),
            env={"CREWFILE_SESSION": "w1"})
    assert p.returncode == 0 and p.stderr.startswith("crew-hook: ")


@pytest.mark.parametrize("agent", ["codex", "gemini"])
def test_fuzzed_payloads_never_fail_the_agent(tmp_path, agent):
    crew = Crew(str(tmp_path / "crew"))
    register(crew, "w1", kind="primary")
    register(crew, "a1", kind="aside")
    events = sorted(load_agent(agent).EVENTS)
    fields = st.fixed_dictionaries({}, optional={k: _fuzz_values() | st.sampled_from(good)
                                                 for k, good in {
        "session_id": ["s-1"], "cwd": ["/tmp"], "prompt": ["hi"],
        "tool_name": ["Bash", "run_shell_command"],
        "tool_input": [{"command": "aside-done"}, {"command": "ls"}],
        "stop_hook_active": [False, True], "notification_type": ["ToolPermission"],
        "reason": ["exit"]}.items()})

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.sampled_from(events + ["Other", 3, None]), fields, st.sampled_from(["w1", "a1", ""]))
    def check(event, payload, name):
        if name == "w1":
            inbox.post(crew, "w1", "wake", "w2 problem")
        reply = handle(json.dumps(dict(payload, hook_event_name=event)),
                       {"CREWFILE_DIR": crew.root, "CREWFILE_SESSION": name}, agent=agent)
        assert reply.code == 0 and "\n" not in reply.err
        if reply.out:
            assert set(json.loads(reply.out)) <= {"hookSpecificOutput", "decision", "reason"}
    check()


# ---------------------------------------------------------------- install

USER = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}]},
        "model": "mine"}


SHIPPED = {"codex": ["skills/aside-done/SKILL.md", "skills/aside-done/agents/openai.yaml"],
           "gemini": ["commands/aside-done.toml"]}


@pytest.mark.parametrize("agent, file, events, timeout", [
    ("codex", "hooks.json", ("SessionStart", "UserPromptSubmit", "PreToolUse",
                             "PermissionRequest", "PostToolUse", "Stop", "SubagentStart",
                             "SubagentStop", "SessionEnd"), 10),
    ("gemini", "settings.json", ("SessionStart", "BeforeAgent", "BeforeTool", "AfterTool",
                                 "AfterAgent", "Notification", "SessionEnd"), 10000)])
def test_install_merge_dry_run_and_uninstall(tmp_path, run, agent, file, events, timeout):
    """The hooks merged into the user's file, and the captain's conclusion
    command (Codex: the $aside-done skill; Gemini: /aside-done) shipped;
    --uninstall takes both away and leaves the user's own."""
    d = tmp_path / f".{agent}"
    d.mkdir()
    (d / file).write_text(json.dumps(USER))
    p = run("crew-hook", "--install", str(d), "--agent", agent, "--dry-run")
    assert p.returncode == 0 and "would be updated" in p.stdout
    assert json.loads((d / file).read_text()) == USER                  # nothing written
    p = run("crew-hook", "--install", str(d), "--agent", agent)
    assert p.returncode == 0, p.stderr
    changed = [line for line in p.stdout.splitlines(True) if not line.startswith("note: ")]
    assert changed == [f"updated {os.path.realpath(d / file)}\n"] + [
        f"created {d / rel}\n" for rel in SHIPPED[agent]]
    assert len(p.stdout.splitlines()) == len(changed) + 1     # one note (tests/test_codexconf.py)
    for rel in SHIPPED[agent]:
        assert (d / rel).read_text() == install.shipped(load_agent(agent), rel)
    got = json.loads((d / file).read_text())
    assert got["model"] == "mine" and set(got["hooks"]) == set(events) | {"Stop"}
    assert got["hooks"]["Stop" if agent == "codex" else "AfterAgent"]  # ours
    assert got["hooks"]["Stop"][0]["hooks"][0]["command"] == "notify-send done"   # theirs
    ours = [h for groups in got["hooks"].values() for g in groups for h in g["hooks"]
            if install.is_ours(h)]
    assert len(ours) == len(events)
    assert all(h["command"].endswith(f"crew-hook --agent {agent}") and h["timeout"] == timeout
               for h in ours)
    shell = "Bash" if agent == "codex" else "run_shell_command"
    guard = "PreToolUse" if agent == "codex" else "BeforeTool"
    assert [g.get("matcher") for g in got["hooks"][guard]] == [shell]
    again = run("crew-hook", "--install", str(d), "--agent", agent)
    assert again.stdout.startswith("unchanged ")                        # idempotent
    p = run("crew-hook", "--uninstall", str(d), "--agent", agent)
    assert p.returncode == 0
    assert json.loads((d / file).read_text()) == USER
    assert sorted(os.listdir(d)) == [file]                              # the command's dirs too


def test_install_into_an_empty_codex_dir_and_print_settings(tmp_path, run):
    d = tmp_path / ".codex"
    p = run("crew-hook", "--install", str(d), "--agent", "codex", "--command", "crew-hook")
    assert p.returncode == 0
    got = json.loads((d / "hooks.json").read_text())
    assert got == install.hooks_block("crew-hook", load_agent("codex"))
    assert sorted(os.listdir(d)) == ["hooks.json", "skills"] and not (d / "commands").exists()
    p = run("crew-hook", "--settings", "--agent", "gemini", "--command", "/x/crew-hook")
    assert json.loads(p.stdout) == install.hooks_block("/x/crew-hook", load_agent("gemini"))
    p = run("crew-hook", "--uninstall", str(d), "--agent", "codex")
    assert p.returncode == 0 and not (d / "hooks.json").exists() and not (d / "skills").exists()


@pytest.mark.parametrize("agent, event", [("codex", "PreToolUse"), ("gemini", "BeforeTool")])
def test_only_the_agents_own_adapter_is_imported(agent, event):
    """Start-up: one adapter, and neither json nor re, on the guard's path."""
    code = ("import sys; sys.path.insert(0, 'lib'); from crewfile.hooks import hook; "
            f"hook.handle('{{\"hook_event_name\": \"{event}\", \"tool_name\": \"x\", "
            "\"tool_input\": {\"command\": \"ls\"}}', {'CREWFILE_DIR': '/nonexistent-cf'}, "
            f"agent='{agent}'); "
            "print(sorted(m for m in sys.modules if m.startswith('crewfile.agents.')"
            " or m in ('json', 're', 'subprocess')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=__file__.rsplit("/tests/", 1)[0])
    assert out.stdout.strip() == repr([f"crewfile.agents.{agent}"]), out.stderr


def test_gemini_headless_prompt_leaves_out_the_start_context(crew):
    """Observed with the real Gemini CLI 0.61.0 run with -p (tests/test_gemini_e2e.py):
    BeforeAgent's prompt starts with SessionStart's context in <hook_context>."""
    register(crew, "w1")
    call(crew, "gemini", gemini("BeforeAgent", prompt="<hook_context>crewfile: this session is"
                                " the aside 'a1'.\n\nrule</hook_context>\n\nfix the build"))
    call(crew, "gemini", gemini("BeforeAgent", prompt="<hook_context> typed by hand"))
    got = [t for k, t in kinds(crew) if k == "captain"]
    assert got == ["fix the build", "<hook_context> typed by hand"]


# ---------------------------------------------------------------- screens

# Prompt lines as tmux capture-pane -e showed them (tests/test_*_e2e.py runs the real CLIs).
CODEX_IDLE = ("\x1b[1m\u203a\x1b[0m\x1b[39m\x1b[49m \x1b[2mAsk Codex to do anything\x1b[0m"
              "\x1b[39m\x1b[49m\n  \x1b[38;5;223mgpt-test default\x1b[39m \u00b7 /w\n")
CODEX_TYPED = "\x1b[1m\u203a\x1b[0m\x1b[39m\x1b[49m HOLD: /x/go1\n  gpt-test default\n"
GEMINI_IDLE = (" \x1b[38;5;183m> \x1b[7m\x1b[39m \x1b[0m\x1b[38;5;248m\x1b[48;5;240m Type your"
               " message or @path/to/file\x1b[39m\n\x1b[49m \x1b[38;5;248mworkspace\x1b[39m\n")
GEMINI_TYPED = (" \x1b[38;5;183m> \x1b[38;5;231mhello world\x1b[7m\x1b[39m \x1b[0m\x1b[39m"
                "\x1b[48;5;240m\n")
# -y (YOLO mode): `*` for `>`, the echo of the last prompt above it.
GEMINI_YOLO_IDLE = (" \x1b[38;5;183m> \x1b[38;5;231mHOLD: /x/go\x1b[39m\n\n"
                    " \x1b[38;5;217m* \x1b[7m\x1b[39m \x1b[0m\x1b[38;5;248m\x1b[48;5;240m Type"
                    " your message or @path/to/file\x1b[39m\n")
GEMINI_CURSOR_AT_START = (" \x1b[38;5;183m> \x1b[7m\x1b[38;5;231mh\x1b[0m\x1b[38;5;231m"
                          "\x1b[48;5;240mello world\x1b[39m\n")


@pytest.mark.parametrize("agent, screen, draft", [
    ("codex", CODEX_IDLE, ""), ("codex", CODEX_TYPED, "HOLD: /x/go1"),
    ("gemini", GEMINI_IDLE, ""), ("gemini", GEMINI_TYPED, "hello world"),
    ("gemini", GEMINI_CURSOR_AT_START, "hello world"), ("gemini", GEMINI_YOLO_IDLE, "")])
def test_a_placeholder_is_no_draft_typed_text_is(agent, screen, draft):
    plain = without_placeholder(screen, placeholder_of({"agent": agent}))
    assert "\x1b" not in plain and plain.count("\n") == screen.count("\n")
    assert prompt_tail(plain, markers_of({"agent": agent}))[0] == draft


def test_a_yolo_gemini_prompt_line_is_read_only_in_a_gemini_pane():
    plain = without_placeholder(GEMINI_YOLO_IDLE, "38;5;248")
    assert prompt_tail(plain, markers_of({"agent": "claude"}))[0] == "HOLD: /x/go"   # a draft
    assert markers_of({"agent": "gemini", "prompt": "$"}) == ("$",)      # meta still overrides
    assert markers_of({"agent": "../x"}) == markers_of(None) == PROMPT_MARKERS


def test_placeholders_only_for_agents_that_draw_one():
    assert placeholder_of({"agent": "claude"}) is None and placeholder_of({}) is None
    assert placeholder_of({"agent": "../x"}) is None and placeholder_of(None) is None
    # a dim draft in another agent's style stays a draft
    assert prompt_tail(without_placeholder(CODEX_IDLE, "38;5;248"))[0] == \
        "Ask Codex to do anything"
