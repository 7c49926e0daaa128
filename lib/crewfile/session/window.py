"""A session's tmux window: opened with its agent in it, its conversation kept.

One path for every command that starts an agent in a window (aside-open,
crew-spawn, crew-respawn) and for every command that keeps a window's
conversation before closing it (aside-reconcile, crew-retire), so the window's
environment, the meta fields that name it and the "is this pane still ours"
rule are written once: find() on the session's own server, then
save_scrollback(), keep_transcript() and kill() of what it found.

What is kept is two copies of the conversation: the pane's scrollback (what
the captain saw) and the agent's own transcript (meta `transcript_path`, what
the CLI recorded). An agent that draws in the terminal's alternate screen
leaves tmux no history, so the scrollback alone can hold only the last screen.
"""
import os

from crewfile.core.atomic import replace
from crewfile.core.errors import SystemFailure
from crewfile.core.liveness import descends_from, process_start
from crewfile.session import tmux
from crewfile.core.paths import open_file
from crewfile.session.sessions import pane_fields


NO_ALTERNATE_SCREEN = "CLAUDE_CODE_DISABLE_ALTERNATE_SCREEN"
MAX_TRANSCRIPT = 256 << 20       # bytes of an agent's transcript kept at most (read whole)


def agent_env(crew, name):
    """The environment an agent's window gets: its crew, its session, our tmux server."""
    env = {"CREWFILE_DIR": crew.root, "CREWFILE_SESSION": name,
           # Claude Code (2.1.332) draws in the alternate screen by default, where
           # tmux keeps no history: the classic renderer leaves the conversation in
           # the pane's scrollback, which aside-reconcile and crew-retire save. A
           # value the caller set is theirs to keep.
           NO_ALTERNATE_SCREEN: os.environ.get(NO_ALTERNATE_SCREEN) or "1"}
    if os.environ.get("CREWFILE_TMUX"):
        env["CREWFILE_TMUX"] = os.environ["CREWFILE_TMUX"]
    return env


def open_agent(sess, cmd, tmux_session=None, cwd=None):
    """Start shell *cmd* in a new window named after *sess*; record it in meta.

    The pane keeps its scrollback when the agent exits (remain-on-exit). Meta
    gets `tmux` (pane id), `tmux_target` (session:index), its server
    (`tmux_socket`, `tmux_server`) and the pane's process (`pid`,
    `pid_start`: the agent, which the pane's shell runs or execs). Returns the target. A window that cannot
    be opened raises (CrewfileError) and meta is left as it was: the caller
    says how the registration ends.
    """
    pane, target = tmux.new_window(cmd, session=tmux_session, name=sess.name,
                                   env=agent_env(sess.crew, sess.name), cwd=cwd, keep_dead=True)
    table = tmux.panes() or {}
    pid = table[pane][1] if pane in table else None
    fields = {**pane_fields(pane), "tmux_target": target}      # the pane with its server
    if pid:
        fields.update(pid=pid, pid_start=process_start(pid))
    sess.update_meta(**fields)
    return target


def save_scrollback(found, path):
    """Save the whole history and screen of *found* (find()'s answer: the pane on
    its own server) at *path* (atomic replace), without the empty bottom rows."""
    replace(path, tmux.capture(found.pane, history=True, socket=found.socket).rstrip("\n") + "\n")


def keep_transcript(meta, path):
    """Copy the agent's own transcript (meta `transcript_path`) to *path*
    (atomic replace); return (path, None) once kept, else (None, why) (why
    None: no transcript was recorded, nothing to say).

    The transcript is the agent CLI's file, outside the crew directory: read
    as the user's layout has it (open_file outside=True: no FIFO, no
    directory), never written. Kept before the window is torn down, like the
    scrollback: the CLI may remove its transcripts later, crewfile's copy stays.
    """
    source = meta.get("transcript_path")
    if not isinstance(source, str) or not source:
        return None, None
    try:
        fd = open_file(source, outside=True)
    except FileNotFoundError:
        return None, f"its transcript {source} is gone: not kept"
    except SystemFailure as e:
        return None, f"its transcript was not kept: {e}"
    chunks, size = [], 0
    try:
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            size += len(chunk)
            if size > MAX_TRANSCRIPT:
                return None, (f"its transcript {source} is larger than {MAX_TRANSCRIPT} bytes:"
                              " not kept")
            chunks.append(chunk)
    except OSError as e:
        return None, f"its transcript {source} could not be read ({e.strerror}): not kept"
    finally:
        os.close(fd)
    replace(path, b"".join(chunks))
    return path, None


class Found:
    """The session's own pane, alive or dead, on its own server."""
    __slots__ = ("pane", "socket", "dead")

    def __init__(self, pane, socket, dead):
        self.pane, self.socket, self.dead = pane, socket, dead


def kill(found):
    """Kill the window of *found* (find()'s answer), on its own server."""
    return tmux.kill_window(found.pane, socket=found.socket)


def not_found(meta):
    """Why find() had no pane for *meta*: the warning of a teardown that saved nothing."""
    if not meta.get("tmux"):
        return "it has no tmux window: no scrollback to save"
    if not meta.get("tmux_socket"):
        return ("its tmux server was not recorded: its window, if any, was left alone"
                " (no scrollback saved)")
    return "the window was already gone: no scrollback to save"


def find(meta, why):
    """The session's pane on the server it was registered on, or None.

    Every capture and kill of a registered session asks this, never the
    environment's server (CREWFILE_TMUX, $TMUX): pane ids are per server.
    The server is meta `tmux_socket`; none recorded, no server is asked and
    nothing is found (as the verdict: unknown, so left alone). A server restarted since (another `tmux_server` identity)
    holds none of the session's panes, whatever their ids. The pane is the
    session's when its process is the recorded agent or an ancestor of it
    (the agent alive), or, the agent gone, when its id is on the very server
    that recorded it (a dead pane kept by remain-on-exit). SystemFailure,
    saying *why* it was needed, when tmux cannot be asked.
    """
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
        try:
            ours = descends_from(pid, pane.pid)
        except (OSError, ValueError):
            ours = False
        if not ours:
            return None
    elif not want and pid and pane.pid != pid:
        return None                      # no identity to go by: the process must be it
    return Found(pane_id, socket, pane.dead)
