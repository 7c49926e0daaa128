"""Facts about each agent CLI, floor 2: its hook events and replies, its prompt
line and transcript, how it is installed, started and resumed. One module per
agent (claude, codex, gemini) beside claudecron, codexconf, codexrollout,
install and registry; crew-hook imports only the one it runs for, so start-up stays small.

Adding an agent is one new module here, its name in core.names.AGENTS, defining:
  NAME, EVENTS   its name (as meta `agent` and `--agent` say it); its event ->
                 the shared action (hook.EVENTS) it runs
  SHELL_TOOLS    the tool names whose `tool_input.command` the guard reads
  PLACEHOLDER, PROMPT_MARKERS (optional)
                 its empty prompt line's placeholder SGR parameters (or None), its
                 prompt markers beyond the common ones (crewfile.session.prompt)
  NOTIFICATIONS  notification type -> the record (kind, text) it writes
  HOOKS_FILE, TIMEOUT, FILES, install_extras(directory, uninstall=False)
                 installation (crewfile.agents.install: a hook for each of EVENTS):
                 the file under DIR, the timeout in the file's unit, the files
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
  RESUME         the arguments resuming conversation {id} (crew.spawn), or None
  TURN_ONLY_ERRORS, LASTING_ERRORS (optional)
                 its names of a turn's errors that end that turn alone, and of the
                 account's stops that time does not lift (stop_record)
  COMPACTED (optional)
                 its SessionStart source after compacting the conversation
                 (recorded `compacted`: the same life, a turn going on)
  RESUME_WRITES_ITS_TRANSCRIPT (optional)
                 True if, resumed, it names a new transcript at SessionStart but
                 writes the conversation's own: the recorded one stays
  context, deny, carry_on, captain_text
                 the replies (below: Claude Code's spellings, which Codex copied)
"""
import time

from crewfile.core.errors import BadInput
from crewfile.core.names import AGENTS
from crewfile.core.records import timestamp
from crewfile.core.text import seconds_within

# An account's passing stop holds typing this long: neither Claude Code's hook
# nor Codex's rollout gives a reset time (tests/CLAUDE_FINDINGS.md,
# tests/CODEX_FINDINGS.md); $CREWFILE_ACCOUNT_HOLD overrides.
ACCOUNT_HOLD = 300.0     # seconds
MAX_ERROR_WORD = 40


def load(name):
    """The adapter module for agent *name* (BadInput if there is none)."""
    if name not in AGENTS:
        raise BadInput(f"bad agent '{name}': one of {', '.join(AGENTS)}")
    return __import__(f"{__package__}.{name}", fromlist=["EVENTS"])


def adapter_of(meta):
    """The adapter of the agent a session runs: its meta's `agent`, Claude
    Code's where it names none (BadInput for one not known)."""
    return load(meta.get("agent") or "claude")


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


def stop_record(agent, error, message, env, at=None):
    """(kind, text) of the record for a turn *agent* says ended in *error* (its
    name for it) at epoch *at*: `turn-failed` for an error of that turn alone,
    else the account's stop, `account-blocked`, which holds crewfile's typing
    until the hold ends, or where time does not lift it until a turn succeeds."""
    error = error_word(error)
    if error in getattr(agent, "TURN_ONLY_ERRORS", ()):
        return "turn-failed", f"{error}: {message}" if message else error
    if error in getattr(agent, "LASTING_ERRORS", ()):
        until = "-"
    else:
        until = timestamp((time.time() if at is None else at) + account_hold(env))
    return "account-blocked", f"{error} until {until}" + (f": {message}" if message else "")


def error_word(error):
    """The error's name as one word of [a-z0-9_-] ('unknown' otherwise): the
    record's text is read back by its first words."""
    ok = (isinstance(error, str) and 0 < len(error) <= MAX_ERROR_WORD
          and all(c in "abcdefghijklmnopqrstuvwxyz0123456789_-" for c in error))
    return error if ok else "unknown"


def account_hold(env):
    """$CREWFILE_ACCOUNT_HOLD in *env*, bounded to a week, else ACCOUNT_HOLD."""
    return seconds_within(env.get("CREWFILE_ACCOUNT_HOLD"), ACCOUNT_HOLD, 7 * 86400.0)
