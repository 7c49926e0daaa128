"""Claude Code: the hook events and reply shapes crew-hook was first written
for; the shared actions in hook.py are named after these events.

Source: Claude Code hooks reference (code.claude.com/docs/en/hooks), and
the payloads the real CLI sends in tests/test_claude_e2e.py."""
from crewfile.agents import additional_context as context, permission_deny as deny
from crewfile.agents import whole_prompt as captain_text

NAME = "claude"
EVENTS = {e: e for e in ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse",
                         "Stop", "StopFailure", "Notification", "SessionEnd")}
# What runs inside the session but is not it (a subagent, a teammate, a task):
# recorded as `subagent`, never as the session's own turn (2.1.332's payloads:
# tests/CLAUDE_FINDINGS.md, "StopFailure, subagents and background tasks").
EVENTS.update({e: "Inside" for e in ("SubagentStop", "TeammateIdle", "TaskCompleted")})
# SessionStart's source after a compaction, which 2.1.332 runs mid-turn too: a
# `compacted` record, not a new start (tests/CLAUDE_FINDINGS.md, "Auto-compact").
COMPACTED = "compact"
SHELL_TOOLS = ("Bash",)
PLACEHOLDER = None
NOTIFICATIONS = {"idle_prompt": ("idle", ""), "permission_prompt": ("waiting", "permission")}

HOOKS_FILE = "settings.json"
TIMEOUT = 10            # seconds; Claude Code's default is 600, SessionEnd has ~1.5 s
# The primary's keystroke-free wake (crewfile.wake.rewake): at this event a
# second hook, `crew-hook --rewake`, runs with "asyncRewake": true (its exit 2
# starts the model's next turn with its stderr), with this timeout in seconds
# (its waiter ends 60 s before: the CLI SIGTERMs a hook at its timeout).
REWAKE = "Stop"
REWAKE_TIMEOUT = 3660
# StopFailure's `error` values that end one turn only; every other (rate_limit,
# overloaded, ... and any a later release adds) is the account's stop.
TURN_ONLY_ERRORS = frozenset({"invalid_request", "model_not_found", "max_output_tokens"})
# Of those, the ones time does not lift, only a turn that succeeds; every other
# lifts by itself after the hold (crewfile.agents.ACCOUNT_HOLD).
LASTING_ERRORS = frozenset({"billing_error", "authentication_failed", "oauth_org_not_allowed",
                            "account_on_hold", "verification_required",
                            "cloud_credential_error"})
FILES = ("skills/aside/SKILL.md", "commands/aside-done.md")   # shipped in crewfile/agents/files/claude/

# The CLI's own prompts: when background work ends, 2.1.332 starts the next turn
# with its task notification as the prompt: a turn, never the captain's words.
MACHINE_PROMPTS = ("<task-notification>",)

HOOKS_AT_START = False    # its trust question comes before its prompt line: a draft
RESUME = "--resume {id}"
# SessionEnd's reason is `other` when hung up on or killed (its tmux server
# killed); deliberate ends say so: prompt_input_exit (/exit, Ctrl-D), clear, logout.
NOT_ON_PURPOSE = frozenset({"other"})

# A primary's wakes at Stop go on as additionalContext (a system reminder,
# 2.1.163 or later), not decision/reason: that shows as "Stop hook error".
carry_on = context


def install_extras(directory, uninstall=False):
    """Nothing else: Claude Code runs the hooks of a folder it trusts (its
    first-start question covers the repository's worktrees)."""
    return [], []


# The captain's conclusion (crewfile.asides.evidence).
CONCLUDE = "/aside-done"         # the command FILES installs
PROMPT_ID = "prompt_id"
TRANSCRIPT_MARK = b'"promptId":"'
COMMAND_MARK = "<command-name>/aside-done</command-name>"


def transcript_prompt(entry):
    """(promptId, is the expanded /aside-done command) of a transcript entry of
    a prompt (its tool results carry it too), else None. The command's entry:
    a user entry, not meta, whose content names it."""
    pid = entry.get("promptId")
    if not isinstance(pid, str) or not pid:
        return None
    message = entry.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return pid, (entry.get("type") == "user" and not entry.get("isMeta")
                 and isinstance(content, str) and COMMAND_MARK in content)
