"""Codex CLI (@openai/codex): Claude-like hooks in hooks.json next to a config
layer (~/.codex, <repo>/.codex); versions, feature flag, trust: agents.codexconf.

Source: openai/codex codex-rs/hooks (schema/generated/*.schema.json). No idle
notification exists. `codex exec` fires SessionEnd (reason `other`), but
0.171.0's interactive /exit fires none (the thread lives on in its app-server
daemon): an ended Codex is found by its process. A 429 fires no hook at all
(tests/test_codex_hooks_e2e.py): crew-watch reads that turn's end from the
rollout (agents.codexrollout). Stop's output allows no additionalContext, so
a primary's wakes go on as decision "block", the text the model's next prompt."""
from crewfile.agents import (
    additional_context as context, block as carry_on, is_conclusion, permission_deny as deny,
    whole_prompt as captain_text)

NAME = "codex"
EVENTS = {"SessionStart": "SessionStart", "UserPromptSubmit": "UserPromptSubmit",
          "PreToolUse": "PreToolUse", "PermissionRequest": "PermissionRequest",
          "PostToolUse": "PostToolUse", "Stop": "Stop", "SessionEnd": "SessionEnd",
          "SubagentStart": "Inside", "SubagentStop": "Inside"}
# Its subagents are work inside the session; its own hooks run for a subagent's
# turn too, with its agent_id (crewfile.hooks.hook.SUBAGENT_TURN).
# SessionStart's source after a compaction, which 0.171.0 runs mid-turn too
# (after PreCompact, PostCompact; exec and the TUI alike; after a `/compact`
# typed while idle, only with the next prompt): a `compacted` record, not a
# new start (tests/CODEX_FINDINGS.md, "Auto-compact").
COMPACTED = "compact"
SHELL_TOOLS = ("Bash",)
# Observed (0.171.0, capture-pane -e): the empty prompt line's suggestion
# (`› Ask Codex to do anything`, it varies) is dim, ESC[2m; typed text plain.
PLACEHOLDER = "2"
NOTIFICATIONS = {}

HOOKS_FILE = "hooks.json"
TIMEOUT = 10         # seconds
FILES = ("skills/aside-done/SKILL.md", "skills/aside-done/agents/openai.yaml")  # crewfile/agents/files/codex/

# SessionEnd came only at `codex exec`'s end, as `other`: no deliberate end.
NOT_ON_PURPOSE = frozenset({"other"})
HOOKS_AT_START = False           # its SessionStart runs at the first prompt
# ... and the typed text stays on its prompt line until that hook has run,
# while an Enter pressed meanwhile is taken as the same prompt again (seen in
# every soak start on a loaded machine: tests/CODEX_FINDINGS.md). So the text
# still shown is no sign its first Enter was dropped: delivery waits for the
# hook's record and never presses Enter twice (crewfile.session.delivery).
START_WITH_FIRST_PROMPT = True
RESUME = "resume {id}"           # a subcommand (codex resume --help, 0.171.0)

# A turn's error as the rollout names it (its task_complete's codex_error_info:
# `app-server generate-json-schema`, CodexErrorInfo, in snake case), sorted as
# Claude Code's StopFailure errors are (crewfile.agents.stop_record). These
# end that turn alone: the request, its content or the sandbox was refused ...
TURN_ONLY_ERRORS = frozenset({
    "context_window_exceeded", "model_not_found", "bad_request", "sandbox_error",
    "thread_rollback_failed", "active_turn_not_steerable", "too_many_denials",
    "cyber_policy", "bio_policy", "misalignment_policy_violation", "inference_hook_denied"})
# ... these lift only with a turn that succeeds (`usage_limit_exceeded`: the
# Responses API's insufficient_quota, seen; `unauthorized`: credentials); every
# other (a 429's `response_too_many_failed_attempts`, `rate_limit_exceeded`,
# `server_overloaded`, ...) lifts by itself after the hold.
LASTING_ERRORS = frozenset({"usage_limit_exceeded", "unauthorized", "session_budget_exceeded"})


def install_extras(directory, uninstall=False):
    """The feature flag its version needs, its hook trust (crewfile.agents.codexconf)."""
    from crewfile.agents.codexconf import plan  # the hook's budget: install only
    return plan(directory, uninstall)


# The captain's conclusion (crewfile.asides.evidence). No custom slash commands
# since 0.117 (0.171.0: `/aside-done` is "Unrecognized command"): the captain
# mentions the skill FILES installs, `$aside-done` (its agents/openai.yaml keeps
# it from the model's own choice). The rollout records each captain message as
# an item_completed UserMessage with its own id; the prompt hook's turn_id names
# no message (one sent mid-turn carries that turn's id), so the rule is the
# rollout's newest message alone, as for Gemini CLI.
CONCLUDE = "$aside-done"
PROMPT_ID = None
TRANSCRIPT_MARK = b'"UserMessage"'


def transcript_prompt(entry):
    """(message id, is `$aside-done [note]`) of a rollout entry of a
    captain's message, else None."""
    payload = entry.get("payload")
    if entry.get("type") != "event_msg" or not isinstance(payload, dict) or payload.get(
            "type") != "item_completed":
        return None
    item = payload.get("item")
    if not isinstance(item, dict) or item.get("type") != "UserMessage" or not isinstance(
            item.get("id"), str) or not item["id"]:
        return None
    text = "".join(c["text"] for c in item.get("content") or ()
                   if isinstance(c, dict) and c.get("type") == "text"
                   and isinstance(c.get("text"), str))
    return item["id"], is_conclusion(text, CONCLUDE)
