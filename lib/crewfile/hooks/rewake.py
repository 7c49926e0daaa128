"""crew-hook --rewake: the agent's asyncRewake Stop hook (Claude Code), the
primary's wake with no keystroke (crewfile.wake.rewake waits and says). Any
session but a primary returns at once. Never loaded by crew-hook's other
events: its imports are not on their start-up path.
"""
import os

from crewfile.core import jsonio
from crewfile.core.errors import CrewfileError
from crewfile.core.paths import Crew, default_dir
from crewfile.core.text import escape, seconds_within
from crewfile.hooks.hook import PRIMARY, Reply, find_session, load_agent
from crewfile.wake import rewake

WAIT_ENV = "CREWFILE_REWAKE_WAIT"   # seconds the waiter waits (below the hook's timeout)


def wait_seconds(agent, env):
    """How long the waiter waits: the installed timeout less a margin, so the
    CLI never has to stop it; *env*'s CREWFILE_REWAKE_WAIT may shorten it."""
    seconds = max(0.0, agent.REWAKE_TIMEOUT - rewake.MARGIN)
    return seconds_within(env.get(WAIT_ENV), seconds, seconds)


def handle(raw, env=None, agent="claude"):
    """Wait as the primary's rewake channel: Reply(code 2, the announcement
    on stderr) when wakes are to be announced, else Reply(code 0)."""
    env = os.environ if env is None else env
    try:
        payload = jsonio.loads(raw) if raw is not None else None
        if not isinstance(payload, dict):
            return Reply(err="rewake: malformed payload")
        adapter = load_agent(agent)
        sess = find_session(Crew(default_dir(env)), env, payload)
        if sess is None or sess.meta.get("kind") != PRIMARY:
            return Reply()
        text = rewake.wait(sess, wait_seconds(adapter, env))
    except CrewfileError as e:
        return Reply(err=escape(f"rewake: {e}"))
    except Exception as e:      # a bug of ours must not become the agent's problem
        return Reply(err=escape(f"rewake: internal error: {type(e).__name__}: {e}"))
    if text is None:
        return Reply()
    return Reply(err=escape(text), code=2)
