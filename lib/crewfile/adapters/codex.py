"""Codex CLI (@openai/codex): Claude-like hooks in hooks.json next to a
config layer (~/.codex/hooks.json, <repo>/.codex/hooks.json); hooks are on
by default from Codex 0.124 (before that `[features] codex_hooks = true`).

Source: openai/codex codex-rs/hooks (schema/generated/*.schema.json,
src/events/pre_tool_use.rs). No SessionEnd and no idle notification exist:
an ended Codex is found by its process (liveness). Stop's output allows no
additionalContext (the schema forbids other properties), so a primary's
wakes continue the turn as decision "block" with the text as its reason,
which Codex gives the model as the next prompt."""

NAME = "codex"
EVENTS = {"SessionStart": "SessionStart", "UserPromptSubmit": "UserPromptSubmit",
          "PreToolUse": "PreToolUse", "PermissionRequest": "PermissionRequest",
          "PostToolUse": "PostToolUse", "Stop": "Stop"}
SHELL_TOOLS = ("Bash",)
# Observed (0.171.0, tmux capture-pane -e): the empty prompt line is
# `› Ask Codex to do anything` (the suggestion varies) drawn dim, ESC[2m;
# typed text is drawn plain.
PLACEHOLDER = "2"
NOTIFICATIONS = {}

HOOKS_FILE = "hooks.json"
INSTALL = (("SessionStart", None), ("UserPromptSubmit", None), ("PreToolUse", "Bash"),
           ("PermissionRequest", None), ("PostToolUse", None), ("Stop", None))
TIMEOUT = 10         # seconds
SHIPPED = False


def context(event, text):
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


def deny(event, reason):
    return {"hookSpecificOutput": {"hookEventName": event, "permissionDecision": "deny",
                                   "permissionDecisionReason": reason}}


def carry_on(event, text):
    return {"decision": "block", "reason": text}


def captain_text(prompt):
    """The captain's words in the prompt hook's `prompt`: all of it."""
    return prompt
