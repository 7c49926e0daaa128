"""A session's tmux window: opened with its agent in it, its conversation kept.

The one path for opening an agent's window and for keeping its conversation
before closing it: find(), save_scrollback(), keep_transcript(), kill().
Both copies are kept: the alternate screen leaves tmux no history.
"""
import os
from collections import namedtuple

from crewfile.core.atomic import replace
from crewfile.core.errors import BadFile, BadInput, SystemFailure
from crewfile.core.liveness import descends_from
from crewfile.session import tmux
from crewfile.core.paths import read_bytes
from crewfile.session.sessions import agent_fields, pane_fields


NO_ALTERNATE_SCREEN = "CLAUDE_CODE_DISABLE_ALTERNATE_SCREEN"
MAX_TRANSCRIPT = 256 << 20       # bytes of an agent's transcript kept at most (read whole)


def agent_env(crew, name):
    """The environment an agent's window gets: its crew, its session, our tmux server."""
    env = {"CREWFILE_DIR": crew.root, "CREWFILE_SESSION": name,
           # Claude Code (2.1.332) draws in the alternate screen, where tmux
           # keeps no history; a value the caller set is theirs to keep.
           NO_ALTERNATE_SCREEN: os.environ.get(NO_ALTERNATE_SCREEN) or "1"}
    if os.environ.get("CREWFILE_TMUX"):
        env["CREWFILE_TMUX"] = os.environ["CREWFILE_TMUX"]
    return env


def open_agent(sess, cmd, tmux_session=None, cwd=None):
    """Start shell *cmd* in a new window named after *sess* (kept when it
    exits); record the pane, its server and its process in meta; the target."""
    pane, target, pid = tmux.new_window(cmd, session=tmux_session, name=sess.name,
                                        env=agent_env(sess.crew, sess.name), cwd=cwd)
    fields = {**pane_fields(pane), "tmux_target": target}      # the pane with its server
    try:
        agent = agent_fields(pid)
    except BadInput:             # gone already: its dead pane says so
        agent = {"pid": pid, "pid_start": None, "pid_started_at": None}
    sess.update_meta(**fields, **agent)
    return target


def save_scrollback(found, path):
    """Save the whole history and screen of *found* (find()'s answer: the pane on
    its own server) at *path* (atomic replace), without the empty bottom rows."""
    replace(path, tmux.capture(found.pane, history=True, socket=found.socket).rstrip("\n") + "\n")


def keep_transcript(meta, path):
    """Copy the agent's own transcript (meta `transcript_path`, read, never
    written) to *path*: (path, None), else (None, why or None if none recorded)."""
    source = meta.get("transcript_path")
    if not isinstance(source, str) or not source:
        return None, None
    try:
        data = read_bytes(source, limit=MAX_TRANSCRIPT, outside=True)
    except BadFile:
        return None, f"its transcript {source} is larger than {MAX_TRANSCRIPT} bytes: not kept"
    except SystemFailure as e:
        return None, f"its transcript was not kept: {e}"
    if data is None:
        return None, f"its transcript {source} is gone: not kept"
    replace(path, data)
    return path, None


# The session's own pane, alive or dead, on its own server.
Found = namedtuple("Found", "pane socket dead")


def kill(found):
    """Kill the window of *found* (find()'s answer), on its own server."""
    return tmux.run("kill-window", "-t", found.pane, check=False, socket=found.socket)[0] == 0


def not_found(meta):
    """Why find() had no pane for *meta*: the warning of a teardown that saved nothing."""
    if not meta.get("tmux"):
        return "it has no tmux window: no scrollback to save"
    if not meta.get("tmux_socket"):
        return ("its tmux server was not recorded: its window, if any, was left alone"
                " (no scrollback saved)")
    return "the window was already gone: no scrollback to save"


def find(meta, why):
    """The session's pane on the server it was registered on, or None (the
    rules: protocol.md, tmux). SystemFailure, naming *why*, when tmux cannot
    be asked."""
    pane_id, socket = meta.get("tmux"), meta.get("tmux_socket")
    if not pane_id or not socket:
        return None
    server = tmux.Server(socket)
    if server.state == server.GONE:
        return None
    if server.state != server.UP:
        raise SystemFailure(f"tmux could not be asked ({server.error or 'unknown'}): {why}")
    want = meta.get("tmux_server")
    if want and server.identity and want != server.identity:
        return None
    pane = server.panes.get(pane_id)
    if pane is None:
        return None
    pid = meta.get("pid")
    if pid and pane.pid and not pane.dead:
        if not descends_from(pid, pane.pid):
            return None
    elif not want and pid and pane.pid != pid:
        return None                      # no identity to go by: the process must be it
    return Found(pane_id, socket, pane.dead)
