"""Gemini CLI (@google/gemini-cli): `hooks` in settings.json (~/.gemini or
<project>/.gemini); JSON in and out, its own event names.

Source: google-gemini/gemini-cli docs/hooks/reference.md. BeforeAgent is the
prompt (its additionalContext goes with that turn only); AfterAgent's decision
"deny" retries the turn with the reason as a new prompt (a primary's wakes);
BeforeTool's "deny" gives the model the reason as the tool's error."""
import os

from crewfile.agents import additional_context as context, is_conclusion

NAME = "gemini"
EVENTS = {"SessionStart": "SessionStart", "BeforeAgent": "UserPromptSubmit",
          "BeforeTool": "PreToolUse", "AfterTool": "PostToolUse", "AfterAgent": "Stop",
          "Notification": "Notification", "SessionEnd": "SessionEnd"}
SHELL_TOOLS = ("run_shell_command",)
# Observed (0.61.0, capture-pane -e): the empty prompt line is `>   Type your
# message or @path/to/file` in colour 248 (typed text: 231); with -y, `*   ...`.
PLACEHOLDER = "38;5;248"
PROMPT_MARKERS = (">", "*")
NOTIFICATIONS = {"ToolPermission": ("waiting", "permission")}

HOOKS_FILE = "settings.json"
TIMEOUT = 10000      # milliseconds
FILES = ("commands/aside-done.toml",)     # shipped in crewfile/agents/files/gemini/
HOOKS_AT_START = True     # SessionStart at launch, once its folder is trusted
RESUME = "--resume {id}"  # the SessionStart session_id (SessionSelector.findSession, 0.61.0)
# Resumed, 0.61.0 names a new chat file at SessionStart (source resume), then
# writes the resumed conversation's own (ChatRecordingService.initialize): the
# session's recorded transcript stays (seen in the soak, tests/soak).
RESUME_WRITES_ITS_TRANSCRIPT = True
# Its clean-up handler says `exit` on /quit and equally when hung up on (its
# tty gone): 0.61.0 cannot tell them apart, so neither is an end on purpose.
NOT_ON_PURPOSE = frozenset({"exit", "other"})


def install_extras(directory, uninstall=False):
    """Its folder trust: with folder trust on (its default), 0.61.0 loads no
    hook at all, not even the user's own, in a folder not trusted
    (HookRegistry.processHooksFromConfig), and asks at start."""
    return [], [] if uninstall else [
        "Gemini CLI runs no hook, not even these, in a folder you have not trusted: answer"
        " its question at its first start in your repository, and in a worker's tree"
        " choose `Trust parent folder` (the crew's worktrees, REPO.crew)"]


def deny(event, reason):
    return {"decision": "deny", "reason": reason}


carry_on = deny


HOOK_CONTEXT = ("<hook_context>", "</hook_context>\n\n")


def captain_text(prompt):
    """The captain's words in BeforeAgent's `prompt`: run headless (-p), 0.61.0
    prepends SessionStart's context (`<hook_context>TEXT</hook_context>` and a
    blank line), ours and left out; /aside-done's expansion (a custom command
    reaches the hook expanded) becomes `/aside-done NOTE` again."""
    head, end = HOOK_CONTEXT
    if prompt.startswith(head) and end in prompt:
        prompt = prompt.split(end, 1)[1]
    if prompt.startswith(COMMAND_HEAD):
        return _unexpanded(prompt)
    return prompt


# The captain's conclusion (crewfile.asides.evidence): the custom command FILES
# installs. BeforeAgent names no prompt, so the rule is the transcript's newest
# captain prompt alone; the chat recording keeps a command's expansion as the
# user entry's content and what the captain typed as its displayContent (0.61.0).
CONCLUDE = "/aside-done"
PROMPT_ID = None
TRANSCRIPT_MARK = b'"type":"user"'
COMMAND_HEAD = "The captain has concluded this aside by typing /aside-done"


def _texts(parts):
    """The text of a content list, or None if there is none."""
    if not isinstance(parts, list):
        return None
    texts = [p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)]
    return "".join(texts) if texts else None


def transcript_prompt(entry):
    """(id, is the /aside-done command as typed) of a chat recording's user
    entry of a captain prompt, else None: a tool's functionResponse is a
    user entry without text, SessionStart's context one of hook_context
    alone (observed), neither a captain prompt."""
    if entry.get("type") != "user" or not isinstance(entry.get("id"), str):
        return None
    typed = _texts(entry.get("displayContent"))
    if typed is None:
        text = _texts(entry.get("content"))
        head, end = HOOK_CONTEXT
        if text is None or (text.startswith(head)
                            and not text.partition(end.strip())[2].strip()):
            return None
    return entry["id"], typed is not None and is_conclusion(typed, CONCLUDE)


def _unexpanded(prompt):
    """`/aside-done NOTE` for the expansion of commands/aside-done.toml
    (its prompt with {{args}} replaced by NOTE); other text as it is."""
    import tomllib           # not on the hook's path but for this prompt
    from crewfile.agents.install import SHARE  # the hook's budget
    try:
        with open(os.path.join(SHARE, NAME, FILES[0]), "rb") as f:
            template = tomllib.load(f)["prompt"]
    except (OSError, ValueError, KeyError):
        return prompt
    before, _, after = template.partition("{{args}}")
    if prompt.startswith(before) and prompt.endswith(after) and len(prompt) >= len(
            before) + len(after):
        return f"{CONCLUDE} {prompt[len(before):len(prompt) - len(after)]}".strip()
    return prompt
