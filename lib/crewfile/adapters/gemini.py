"""Gemini CLI (@google/gemini-cli): `hooks` in settings.json (~/.gemini or
<project>/.gemini); JSON in and out, its own event names.

Source: google-gemini/gemini-cli docs/hooks/reference.md. BeforeAgent is
the prompt (its additionalContext is appended to the prompt for that turn
only); AfterAgent ends the turn (decision "deny" with a reason retries the
turn with the reason as a new prompt: a primary's wakes); BeforeTool's
decision "deny" sends the reason to the model as the tool's error; the
Notification type ToolPermission is a permission wait. Timeouts are in
milliseconds."""

NAME = "gemini"
EVENTS = {"SessionStart": "SessionStart", "BeforeAgent": "UserPromptSubmit",
          "BeforeTool": "PreToolUse", "AfterTool": "PostToolUse", "AfterAgent": "Stop",
          "Notification": "Notification", "SessionEnd": "SessionEnd"}
SHELL_TOOLS = ("run_shell_command",)
# Observed (0.61.0, tmux capture-pane -e): the empty prompt line is
# `>   Type your message or @path/to/file` in colour 248 after the cursor
# block; typed text is colour 231.
PLACEHOLDER = "38;5;248"
NOTIFICATIONS = {"ToolPermission": ("waiting", "permission")}

HOOKS_FILE = "settings.json"
INSTALL = (("SessionStart", None), ("BeforeAgent", None), ("BeforeTool", "run_shell_command"),
           ("AfterTool", None), ("AfterAgent", None), ("Notification", None),
           ("SessionEnd", None))
TIMEOUT = 10000      # milliseconds
SHIPPED = False


def context(event, text):
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


def deny(event, reason):
    return {"decision": "deny", "reason": reason}


def carry_on(event, text):
    return {"decision": "deny", "reason": text}


HOOK_CONTEXT = ("<hook_context>", "</hook_context>\n\n")


def captain_text(prompt):
    """The captain's words in BeforeAgent's `prompt`. Run headless (-p),
    Gemini CLI prepends SessionStart's additionalContext to the prompt, and
    BeforeAgent sees it there (observed with 0.61.0:
    `<hook_context>TEXT</hook_context>` and a blank line): that part is ours,
    not the captain's, and is left out."""
    head, end = HOOK_CONTEXT
    if prompt.startswith(head) and end in prompt:
        return prompt.split(end, 1)[1]
    return prompt
