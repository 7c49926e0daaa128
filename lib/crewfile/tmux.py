"""Talking to tmux: the server is CREWFILE_TMUX's, else the current client's.

CREWFILE_TMUX=NAME means `tmux -L NAME`; a value containing '/' is a socket
path (`tmux -S PATH`). Unset, tmux finds the server the way it always does
($TMUX, then the default socket). Tests always set it to a private server.
"""
import os
import subprocess

from .errors import SystemFailure


def base_command(env=None):
    env = os.environ if env is None else env
    sock = env.get("CREWFILE_TMUX")
    cmd = ["tmux"]
    if sock:
        cmd += ["-S", sock] if "/" in sock else ["-L", sock]
    return cmd


def run(*args, check=True, env=None):
    """Run one tmux command; return (exit code, stdout)."""
    try:
        proc = subprocess.run(base_command(env) + list(args), stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except FileNotFoundError:
        raise SystemFailure("tmux is not installed") from None
    out = proc.stdout.decode("utf-8", "replace")
    if check and proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise SystemFailure(f"tmux {args[0]}: {err[0] if err else 'failed'}")
    return proc.returncode, out


def panes():
    """{pane id: (dead, pid, 'session:window.pane', window id)} for every pane on the server.

    Empty when no server runs (so every pane is gone); None if tmux is missing.
    """
    try:
        code, out = run("list-panes", "-a", "-F",
                        "#{pane_id}\t#{pane_dead}\t#{pane_pid}\t"
                        "#{session_name}:#{window_index}.#{pane_index}\t#{window_id}",
                        check=False)
    except SystemFailure:
        return None
    table = {}
    if code != 0:
        return table
    for line in out.splitlines():
        parts = line.split("\t")
        if len(parts) == 5:
            pid = int(parts[2]) if parts[2].isdigit() else None
            table[parts[0]] = (parts[1] == "1", pid, parts[3], parts[4])
    return table


def clients():
    """[(last key press, epoch seconds; active pane id)] for every attached client.

    client_activity is when the client last sent a key (send-keys does not
    count), with one-second resolution; the pane is the active pane of the
    client's current window, the one its keys go to. Empty if no server or
    tmux is missing.
    """
    try:
        code, out = run("list-clients", "-F", "#{client_activity}\t#{pane_id}", check=False)
    except SystemFailure:
        return []
    table = []
    if code != 0:
        return table
    for line in out.splitlines():
        activity, _, pane = line.partition("\t")
        if activity.isdigit() and pane.startswith("%"):
            table.append((int(activity), pane))
    return table


def resolve_pane(target):
    """The pane id (%N) of a target such as 'sess:win.0' or '%3', or None if gone."""
    # display-message quietly falls back to the current pane for a target that
    # does not exist; list-panes fails for it, so ask that first.
    if run("list-panes", "-t", target, "-F", "#{pane_id}", check=False)[0] != 0:
        return None
    code, out = run("display-message", "-p", "-t", target, "#{pane_id}", check=False)
    out = out.strip()
    return out if code == 0 and out.startswith("%") else None


def type_literally(pane, text):
    """Type *text* into *pane* as keys, never interpreted (no Enter)."""
    # -l: literal; '--' so a leading '-' is text. tmux drops a trailing ';'
    # (its command separator) unless escaped.
    if text.endswith(";"):
        text = text[:-1] + "\\;"
    run("send-keys", "-t", pane, "-l", "--", text)


def press_enter(pane):
    run("send-keys", "-t", pane, "Enter")


def capture(pane, history=False):
    """The pane's screen (or whole scrollback with history=True) as text."""
    args = ["capture-pane", "-p", "-J", "-t", pane]
    if history:
        args[1:1] = ["-S", "-", "-E", "-"]
    return run(*args)[1]


def kill_window(target):
    return run("kill-window", "-t", target, check=False)[0] == 0


def new_window(command, session=None, name=None, env=None, cwd=None, keep_dead=False):
    """Start shell *command* in a new detached window; return (pane id, 'session:index').

    session: the tmux session to put it in (created, detached, if it does not
    exist); None means tmux's current one. env: {NAME: value} set in the
    window's environment. keep_dead: the pane stays (dead, readable) when its
    command exits (remain-on-exit), so its scrollback is not lost with it.
    """
    opts = ["-d", "-P", "-F", "#{pane_id}\t#{session_name}:#{window_index}"]
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
    pane, _, target = out.strip().partition("\t")
    if keep_dead:
        # Set at once; a command that exits before this line takes its window with it.
        run("set-option", "-p", "-t", pane, "remain-on-exit", "on")
    return pane, target
