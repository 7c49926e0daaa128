"""Claude Code: the hook events and reply shapes crew-hook was first written
for; the shared actions in hook.py are named after these events.

Source: Claude Code hooks reference (code.claude.com/docs/en/hooks), and
the payloads the real CLI sends in tests/test_claude_e2e.py."""
from crewfile.agents import additional_context as context, permission_deny as deny
from crewfile.agents import whole_prompt as captain_text

NAME = "claude"
# The agent's event -> the shared action (hook.EVENTS) it runs.
EVENTS = {e: e for e in ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse",
                         "Stop", "StopFailure", "Notification", "SessionEnd")}
# What runs inside the session but is not it (a subagent, a teammate, a task):
# recorded as `subagent`, never as the session's own turn (2.1.332's payloads:
# tests/CLAUDE_FINDINGS.md, "StopFailure, subagents and background tasks").
EVENTS.update({e: "Inside" for e in ("SubagentStop", "TeammateIdle", "TaskCompleted")})
SHELL_TOOLS = ("Bash",)
# The SGR parameters of the placeholder its empty prompt line shows (read as
# no draft: crewfile.session.prompt), or None: none.
PLACEHOLDER = None
# Notification types -> the record (kind, text) they write.
NOTIFICATIONS = {"idle_prompt": ("idle", ""), "permission_prompt": ("waiting", "permission")}

# Installation (crewfile.agents.install): the file under DIR, the events with their
# matchers, the timeout in the file's unit (seconds here), the files shipped.
HOOKS_FILE = "settings.json"
INSTALL = (("SessionStart", None), ("UserPromptSubmit", None), ("PreToolUse", "Bash"),
           ("PostToolUse", None), ("Stop", None), ("StopFailure", None),
           ("SubagentStop", None), ("TeammateIdle", None), ("TaskCompleted", None),
           ("Notification", None), ("SessionEnd", None))
TIMEOUT = 10
# The primary's keystroke-free wake (crewfile.wake.rewake): at this event a
# second hook, `crew-hook --rewake`, runs with "asyncRewake": true (in the
# background; its exit 2 starts the model's next turn with its stderr), with
# this timeout in seconds (the waiter ends 60 s before it: the CLI stops a
# hook at its timeout with SIGTERM; tests/test_rewake_e2e.py).
REWAKE = "Stop"
REWAKE_TIMEOUT = 3660
# StopFailure's `error` values that end one turn only; every other value
# (rate_limit, billing_error, authentication_failed, overloaded, ... and any
# name a later release adds) is the account's stop: `account-blocked`.
TURN_ONLY_ERRORS = frozenset({"invalid_request", "model_not_found", "max_output_tokens"})
# Of the account's stops, those that time does not lift (billing, credentials,
# an account on hold): only a turn that succeeds does. Every other one lifts
# by itself after the hold (crewfile.hooks.hook.ACCOUNT_HOLD).
LASTING_ERRORS = frozenset({"billing_error", "authentication_failed", "oauth_org_not_allowed",
                            "account_on_hold", "verification_required",
                            "cloud_credential_error"})
FILES = ("skills/aside/SKILL.md", "commands/aside-done.md")   # shipped in crewfile/agents/files/claude/

# A prompt that is the CLI's own, not anyone's words: when background work
# ends, Claude Code (2.1.332) starts the follow-up turn with a UserPromptSubmit
# whose prompt is its task notification. Recorded as a turn, never as the captain.
MACHINE_PROMPTS = ("<task-notification>",)

HOOKS_AT_START = False    # its trust question comes before its prompt line: a draft
RESUME = "--resume {id}"
# SessionEnd's reason is `other` when it is hung up on or killed (seen when
# the tmux server was killed); its deliberate ends say so:
# prompt_input_exit (/exit, Ctrl-D), clear, logout.
NOT_ON_PURPOSE = frozenset({"other"})

# A primary's wakes at Stop go on as additionalContext, not decision/reason:
# a reason reaches the model as user text and the screen as "Stop hook
# error"; context is a system reminder (Claude Code 2.1.163 or later).
carry_on = context


def install_extras(directory, uninstall=False):
    """Nothing else: Claude Code runs the hooks of a folder it trusts (its
    first-start question covers the repository's worktrees)."""
    return [], []


# The captain's conclusion (crewfile.asides.evidence): what the captain types, the
# prompt hook's field naming the prompt, and how a transcript line is read.
CONCLUDE = "/aside-done"         # the command FILES installs
PROMPT_ID = "prompt_id"
TRANSCRIPT_MARK = b'"promptId":"'
COMMAND_MARK = "<command-name>/aside-done</command-name>"


def transcript_prompt(entry):
    """(promptId, is the expanded /aside-done command) of a transcript entry
    of a prompt (the prompt and its tool results carry its promptId), else
    None. The command's entry is a user entry, not meta, whose content names it."""
    pid = entry.get("promptId")
    if not isinstance(pid, str) or not pid:
        return None
    message = entry.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return pid, (entry.get("type") == "user" and not entry.get("isMeta")
                 and isinstance(content, str) and COMMAND_MARK in content)
