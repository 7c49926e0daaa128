"""The agents a crew session can run, and how each gets its own conversation
back: never a new one, so a schedule attached to it still belongs to it
(docs/commands/crew-spawn.md, crew-respawn.md).
"""
import os
import shlex

from crewfile.agents import load
from crewfile.core.errors import BadInput, Refused
from crewfile.core.names import AGENTS

CLAUDE, CODEX, GEMINI = "claude", "codex", "gemini"
_ID_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.")


def check(agent):
    if agent not in AGENTS:
        raise BadInput(f"bad agent '{agent}': one of {', '.join(AGENTS)}")
    return agent


def command(agent, cmd=None, env=None):
    """The shell command that starts *agent*."""
    env = os.environ if env is None else env
    return cmd or env.get("CREWFILE_AGENT_CMD") or agent


def resume_command(agent, cmd, conversation):
    """*cmd* made to resume *conversation* (Refused, saying why, where it cannot be)."""
    resume = load(check(agent)).RESUME
    if resume is None:
        raise Refused(f"cannot resume a {agent} conversation: crewfile does not know how,"
                      f" and starting {agent} again would begin a new one")
    if not conversation:
        raise Refused("no conversation id is recorded (its agent never ran its SessionStart"
                      " hook): starting the agent would begin a new conversation")
    if len(conversation) > 128 or not set(conversation) <= _ID_CHARS:
        raise Refused(f"the recorded conversation id '{conversation[:40]}' is malformed")
    return f"{cmd} {resume.format(id=shlex.quote(conversation))}"
