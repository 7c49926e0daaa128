"""Talking to tmux: a session's own server, else CREWFILE_TMUX's, else the current client's.

A pane id means something only on one server: a session's calls name its
recorded socket (`socket=`). The rules: protocol.md, tmux.
"""
import os
import subprocess

from crewfile.core.errors import SystemFailure
from crewfile.session.tmuxseen import LISTED_FORMAT, PANE_FORMAT as _PANE_FORMAT, Pane, Seen  # noqa: F401 (re-exported)


def base_command(env=None, socket=None):
    if socket:
        return ["tmux", "-S", socket]
    sock = (os.environ if env is None else env).get("CREWFILE_TMUX")
    if not sock:
        return ["tmux"]
    return ["tmux", "-S" if "/" in sock else "-L", sock]


def socket_path(env=None):
    """The socket path of the server a bare `tmux` (as base_command) would talk to."""
    env = os.environ if env is None else env
    sock = env.get("CREWFILE_TMUX")
    if sock and "/" in sock:
        return os.path.abspath(sock)
    if not sock and env.get("TMUX"):
        return os.path.abspath(env["TMUX"].split(",", 1)[0])
    tmpdir = env.get("TMUX_TMPDIR") or "/tmp"
    return os.path.join(tmpdir, f"tmux-{os.getuid()}", sock or "default")


def run(*args, check=True, env=None, socket=None):
    """Run one tmux command; return (exit code, stdout)."""
    code, out, err = _run(args, env, socket)
    if check and code != 0:
        err = err.strip().splitlines()
        raise SystemFailure(f"tmux {args[0]}: {err[0] if err else 'failed'}")
    return code, out


def _run(args, env, socket):
    """Run tmux: (exit code, stdout, stderr). close_fds: a descriptor a shell
    handed us (`exec 9>LOCK`) would be held, lock and all, by a server tmux starts."""
    argv = base_command(env, socket) + list(args)
    try:
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    except FileNotFoundError:
        raise SystemFailure("tmux is not installed") from None
    except OSError as e:
        raise SystemFailure(f"cannot run tmux: {e.strerror}") from None
    return (proc.returncode, proc.stdout.decode("utf-8", "replace"),
            proc.stderr.decode("utf-8", "replace"))


# Nothing answers on the socket. tmux says `error connecting to SOCKET (WHY)`
# for any failed connect: gone only for these two, never for another's
# socket we may not reach (Permission denied): that is unknown.
_GONE = ("no server running", "server exited", "lost server",
         "(No such file or directory)", "(Connection refused)")
_EMPTY = ("no current target", "no sessions")


class Server(Seen):
    """A Server as tmux answers now: asks it for every pane (list-panes -a)."""

    def __init__(self, socket=None):
        self.socket = socket
        self.state, self.identity, self.panes, self.error = self.UNKNOWN, None, {}, ""
        try:
            code, out, err = _run(("list-panes", "-a", "-F", _PANE_FORMAT), None, socket)
        except SystemFailure as e:
            self.error = str(e)
            return
        if code != 0:
            self.error = err.strip()
            if any(g in err for g in _GONE):
                self.state = self.GONE
            elif any(e in err for e in _EMPTY):
                self.state = self.UP      # answering, with no session left: no pane at all
            return
        self.state = self.UP
        for line in out.splitlines():
            pane = Pane.parse(line)
            if pane is not None:
                self.panes[pane.id] = pane
                self.identity = pane.server


def pane_info(target, env=None, socket=None):
    """(Pane, socket path as the server answers) for *target*, or None if gone."""
    # display-message quietly falls back to the current pane for a target that
    # does not exist; list-panes fails for it, so ask that first.
    if run("list-panes", "-t", target, "-F", "#{pane_id}", check=False, env=env,
           socket=socket)[0] != 0:
        return None
    code, out = run("display-message", "-p", "-t", target, _PANE_FORMAT + "\t#{socket_path}",
                    check=False, env=env, socket=socket)
    line, _, sock = out.rstrip("\n").rpartition("\t")
    pane = Pane.parse(line) if code == 0 else None
    return (pane, sock) if pane and sock else None


def clients(socket=None):
    """[(last key press, epoch seconds; active pane id)] for every attached
    client (client_activity: send-keys does not move it); empty if none."""
    try:
        code, out = run("list-clients", "-F", "#{client_activity}\t#{pane_id}", check=False,
                        socket=socket)
    except SystemFailure:
        return []
    rows = [line.partition("\t")[::2] for line in out.splitlines()] if code == 0 else []
    return [(int(when), pane) for when, pane in rows if when.isdigit() and pane.startswith("%")]


def type_literally(pane, text, socket=None):
    """Type *text* into *pane* as keys, never interpreted (no Enter)."""
    # -l: literal; '--' so a leading '-' is text. tmux drops a trailing ';'
    # (its command separator) unless escaped.
    if text.endswith(";"):
        text = text[:-1] + "\\;"
    run("send-keys", "-t", pane, "-l", "--", text, socket=socket)


def press_enter(pane, socket=None):
    run("send-keys", "-t", pane, "Enter", socket=socket)


def capture(pane, history=False, socket=None, escapes=False):
    """The pane's screen (or whole scrollback with history=True) as text
    (with its colours and attributes as escape sequences if *escapes*)."""
    args = ["capture-pane", "-p", "-J", "-t", pane] + (["-e"] if escapes else [])
    if history:
        args[1:1] = ["-S", "-", "-E", "-"]
    return run(*args, socket=socket)[1]


def new_window(command, session=None, name=None, env=None, cwd=None):
    """Start shell *command* in a new detached window of tmux *session* (made
    if need be; None: the current one), kept when it exits (remain-on-exit: its
    scrollback outlives its command); (pane id, 'session:index', its pid)."""
    opts = ["-d", "-P", "-F", "#{pane_id}\t#{session_name}:#{window_index}\t#{pane_pid}"]
    if name:
        opts += ["-n", name]
    if cwd:
        opts += ["-c", cwd]
    for key, value in (env or {}).items():
        opts += ["-e", f"{key}={value}"]
    if session and run("has-session", "-t", f"={session}", check=False)[0] != 0:
        out = run("new-session", "-s", session, *opts, command)[1]
    elif session:
        out = run("new-window", "-t", f"={session}:", *opts, command)[1]
    else:
        out = run("new-window", *opts, command)[1]
    pane, target, pid = out.strip().split("\t")
    # Set at once; a command that exits before this line takes its window with it.
    run("set-option", "-p", "-t", pane, "remain-on-exit", "on")
    return pane, target, int(pid)
