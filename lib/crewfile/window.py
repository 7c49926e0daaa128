"""A session's tmux window: opened with its agent in it, its scrollback kept.

One path for every command that starts an agent in a window (aside-open,
crew-spawn, crew-respawn) and for every command that saves a window's
scrollback before closing it (aside-reconcile, crew-retire), so the window's
environment, the meta fields that name it and the "is this pane still ours"
rule are written once.
"""
import os


def agent_env(crew, name):
    """The environment an agent's window gets: its crew, its session, our tmux server."""
    env = {"CREWFILE_DIR": crew.root, "CREWFILE_SESSION": name}
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
    from . import tmux
    from .liveness import process_start
    pane, target = tmux.new_window(cmd, session=tmux_session, name=sess.name,
                                   env=agent_env(sess.crew, sess.name), cwd=cwd, keep_dead=True)
    from .sessions import pane_fields
    table = tmux.panes() or {}
    pid = table[pane][1] if pane in table else None
    fields = {**pane_fields(pane), "tmux_target": target}      # the pane with its server
    if pid:
        fields.update(pid=pid, pid_start=process_start(pid))
    sess.update_meta(**fields)
    return target


def look(why):
    """One look at the tmux server's panes (what our_pane reads); SystemFailure,
    saying *why* it was needed, when tmux is not installed."""
    from . import tmux
    from .errors import SystemFailure
    table = tmux.panes()
    if table is None:
        raise SystemFailure(f"tmux is not installed: {why}")
    return table


def is_dead(table, pane):
    """The pane's command has exited (its window kept by remain-on-exit)."""
    return table[pane][0]


def our_pane(meta, table):
    """The session's pane id if it is still on the server and still its process."""
    pane = meta.get("tmux")
    if not pane or pane not in table:
        return None
    pid = meta.get("pid")
    if pid and table[pane][1] != pid:     # a restarted server reuses pane ids
        return None
    return pane


def save_scrollback(pane, path):
    """Save the pane's whole history and screen at *path* (atomic replace),
    without the screen's empty bottom rows."""
    from . import tmux
    from .atomic import replace
    replace(path, tmux.capture(pane, history=True).rstrip("\n") + "\n")
