"""Facts about each agent CLI, floor 2: its hook events and replies, its prompt
line and transcript, how it is installed, started and resumed. One module per
agent (claude, codex, gemini); crew-hook loads only the one it runs for.

Modules:
  claude     Claude Code: the hook events and reply shapes crew-hook was first written
  claudecron Claude Code's own durable cron jobs (.claude/scheduled_tasks.json), read to
             hold crewfile's nudges, never to type
  codex      Codex CLI (@openai/codex): Claude-like hooks in hooks.json next to a
  codexconf  Codex CLI's version and the one line of its config.toml that crewfile may
  gemini     Gemini CLI (@google/gemini-cli): `hooks` in settings.json (~/.gemini or
  install    What a user installs into an agent CLI: the hooks block that runs crew-hook,
  launch     The agents a crew session can run, and how each gets its own conversation back.
  registry   Claude Code's own registry of running sessions (sessions/PID.json), read only.

One module per agent CLI: how its hook events map onto crew-hook's shared
actions (hook.py), how its replies are spelled, how it is installed and
resumed. crew-hook imports only the one it is run for (`--agent NAME`), so
start-up stays small.

Adding an agent is one new module here defining:
  NAME          its name (the module's), as meta `agent` and `--agent` say it
  EVENTS        its event name -> the shared action (hook.EVENTS) it runs
  SHELL_TOOLS   the tool names whose `tool_input.command` the guard reads
  PLACEHOLDER   the SGR parameters of its empty prompt line's placeholder
                (crewfile.session.prompt), or None
  PROMPT_MARKERS (optional) its prompt lines' markers (crewfile.session.prompt),
                when not only the common ones
  NOTIFICATIONS notification type -> the record (kind, text) it writes
  HOOKS_FILE, INSTALL, TIMEOUT, FILES
                installation (crewfile.agents.install): the file under DIR, the
                (event, matcher) pairs, the timeout in the file's unit,
                the files shipped in crewfile/NAME/ (the captain's
                conclusion)
  install_extras(directory, uninstall=False)
                (changes, notes): what else --install changes in DIR
                (crewfile.agents.install.Change) and the lines the user must read
                (a flag its version needs, the trust its hooks need)
  CONCLUDE, PROMPT_ID, TRANSCRIPT_MARK, transcript_prompt
                the captain's conclusion as its transcript shows it
                (crewfile.asides.evidence)
  NOT_ON_PURPOSE
                the SessionEnd reasons it also gives when hung up on or
                killed (a lost tmux server, a reboot): crew-respawn brings
                such a session back
  HOOKS_AT_START
                True if its SessionStart hook runs as it starts, so that
                crew-spawn --prompt waits for the `started` record
  START_WITH_FIRST_PROMPT (optional)
                True if its SessionStart hook runs with its first prompt and
                the text stays on its prompt line meanwhile: delivery waits
                for that hook's record and never presses Enter twice
  RESUME        the arguments that resume conversation {id} appended to the
                agent's command (crewfile.agents.launch), or None
  context, deny, carry_on, captain_text
                the replies (below: the spellings Claude Code introduced
                and Codex copied, for a module to take or replace)
"""
import os

from crewfile.core.errors import BadInput
from crewfile.core.names import AGENTS


def load(name):
    """The adapter module for agent *name* (BadInput if there is none)."""
    if not isinstance(name, str) or not name.isidentifier() or not name.islower():
        raise BadInput(f"bad agent '{name}'")
    try:
        return __import__(f"{__package__}.{name}", fromlist=["EVENTS"])
    except ModuleNotFoundError:
        raise BadInput(f"unknown agent '{name}': no crewfile.agents.{name}") from None


def names():
    """The agents there is an adapter for, sorted: one module each beside this one."""
    return AGENTS


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
