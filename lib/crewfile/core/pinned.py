"""How crewfile names itself in what other programs run (protocol.md, "Pinned
interpreter": a pyenv shim first on PATH made every hook event 7x slower)."""
import os
import shlex
import sys

from crewfile.core.errors import SystemFailure


def interpreter():
    """This install's interpreter, as it was started (a venv's bin/python is
    kept as it is: resolving its link would leave the venv)."""
    exe = sys.executable
    if not exe or not os.path.isabs(exe):
        raise SystemFailure("cannot tell which Python runs crewfile (sys.executable is empty)")
    return exe


def command_line(script, *args):
    """The shell command line running *script* on this interpreter, words quoted."""
    words = [interpreter(), os.path.abspath(script), *args]
    return " ".join(shlex.quote(w) for w in words)


def crontab_line(script, env, *args, schedule="* * * * *"):
    """A crontab(5) line running *script* with *env* set (cron's PATH never matters)."""
    assigns = [f"{k}={shlex.quote(v)}" for k, v in env.items()]
    line = " ".join([*assigns, command_line(script, *args)])
    return f"{schedule} {line.replace('%', chr(92) + '%')}\n"    # cron reads % as a newline
