"""Facts about each agent CLI, floor 2: its hook events and replies, its prompt
line and transcript, how it is installed, started and resumed. One module per
agent (claude, codex, gemini) beside claudecron, codexconf, install, launch
and registry; crew-hook imports only the one it runs for, so start-up stays small.

Adding an agent is one new module here defining:
  NAME, EVENTS   its name (as meta `agent` and `--agent` say it); its event ->
                 the shared action (hook.EVENTS) it runs
  SHELL_TOOLS    the tool names whose `tool_input.command` the guard reads
  PLACEHOLDER, PROMPT_MARKERS (optional)
                 its empty prompt line's placeholder SGR parameters (or None), its
                 prompt markers beyond the common ones (crewfile.session.prompt)
  NOTIFICATIONS  notification type -> the record (kind, text) it writes
  HOOKS_FILE, INSTALL, TIMEOUT, FILES, install_extras(directory, uninstall=False)
                 installation (crewfile.agents.install): the file under DIR, the
                 (event, matcher) pairs, the timeout in the file's unit, the files
                 shipped; install_extras: (changes, notes) beyond the hooks
  CONCLUDE, PROMPT_ID, TRANSCRIPT_MARK, transcript_prompt
                 the captain's conclusion as its transcript shows it
                 (crewfile.asides.evidence)
  NOT_ON_PURPOSE the SessionEnd reasons it also gives when hung up on or killed:
                 crew-respawn brings such a session back
  HOOKS_AT_START True if SessionStart runs as it starts: crew-spawn --prompt
                 waits for the `started` record
  START_WITH_FIRST_PROMPT (optional)
                 True if SessionStart runs with its first prompt, the text kept on
                 its prompt line meanwhile: delivery presses Enter once and waits
                 for that hook's record
  RESUME         the arguments resuming conversation {id} (agents.launch), or None
  RESUME_WRITES_ITS_TRANSCRIPT (optional)
                 True if, resumed, it names a new transcript at SessionStart but
                 writes the conversation's own: the recorded one stays
  context, deny, carry_on, captain_text
                 the replies (below: Claude Code's spellings, which Codex copied)
"""
from crewfile.core.errors import BadInput


def load(name):
    """The adapter module for agent *name* (BadInput if there is none)."""
    if not isinstance(name, str) or not name.isidentifier() or not name.islower():
        raise BadInput(f"bad agent '{name}'")
    try:
        return __import__(f"{__package__}.{name}", fromlist=["EVENTS"])
    except ModuleNotFoundError:
        raise BadInput(f"unknown agent '{name}': no crewfile.agents.{name}") from None


def additional_context(event, text):
    """Model-facing text: additionalContext, never shown as the user's words."""
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


def permission_deny(event, reason):
    """A tool call refused before it runs, the reason going to the model."""
    return {"hookSpecificOutput": {"hookEventName": event, "permissionDecision": "deny",
                                   "permissionDecisionReason": reason}}


def block(event, text):
    """decision "block" (or "deny") with a reason: the agent goes on with
    the reason as its next prompt."""
    return {"decision": "block", "reason": text}


def whole_prompt(prompt):
    """The captain's words in the prompt hook's `prompt`: all of it."""
    return prompt


def is_conclusion(text, command):
    """True if *text* is the conclusion *command* alone or followed by whitespace and a note."""
    stripped = text.strip()
    return stripped == command or (stripped.startswith(command)
                                   and stripped[len(command)].isspace())
