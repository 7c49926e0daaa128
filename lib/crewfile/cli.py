"""The command layer: arguments parsed from each command's HELP, errors to exit codes.

HELP's first line is the synopsis; option lines read `  -x, --long METAVAR  text`,
a METAVAR ending in '...' repeatable. Not argparse: 10 ms of start-up in hooks.
"""
import errno
import os
import sys

from crewfile.core.errors import (
    BROKEN_PIPE, CrewfileError, INTERRUPTED, SYSTEM, UsageError, failure_line)
from crewfile.core.paths import Crew

COMMON = """
  --dir DIR   crew directory (default: $CREWFILE_DIR, else $XDG_STATE_HOME/crewfile,
              else ~/.local/state/crewfile); it and every directory above
              it must be yours or root's and not writable by others (exit 1)
  -h, --help  show this help and exit"""


class Args(dict):
    """Parsed arguments; missing keys read as None."""
    __getattr__ = dict.get


def _option_line(line):
    """(short, long, metavar) for a help line `  [-x, ]--long [METAVAR]  text`, else None."""
    if not line.startswith("  "):
        return None
    head = line.strip().split("  ", 1)[0].split()
    short = None
    if head and len(head[0]) == 3 and head[0][0] == "-" and head[0].endswith(","):
        short, head = head[0][:2], head[1:]
    if not head or not head[0].startswith("--") or len(head) > 2:
        return None
    metavar = head[1] if len(head) == 2 else None
    if metavar and not metavar.rstrip(".").replace("_", "").replace("|", "").isupper():
        return None
    return short, head[0], metavar


def _spec(help_text):
    options, short = {}, {}
    for line in (help_text + COMMON).splitlines():
        found = _option_line(line)
        if found:
            sflag, lflag, metavar = found
            options[lflag] = (lflag[2:].replace("-", "_"), metavar)
            if sflag:
                short[sflag] = lflag
    # An option shown in the synopsis (`[--wait [DURATION]]`: its argument is
    # the positional after it) is spelled out for the reader, not a positional.
    synopsis = help_text.split("\n", 1)[0].split()[1:]
    return options, short, [w for w in synopsis
                            if w != "[options]" and not w.lstrip("[").startswith("-")]


def parse(help_text, argv):
    options, short, positional = _spec(help_text)
    args = Args()
    for key, metavar in options.values():
        args[key] = [] if metavar and metavar.endswith("...") else (None if metavar else False)
    rest = []
    words = iter(argv)
    for word in words:
        if word == "--":
            rest.extend(words)
            break
        if not word.startswith("-") or word == "-":
            rest.append(word)
            continue
        flag, eq, value = word.partition("=")
        flag = short.get(flag, flag)
        if flag not in options:
            raise UsageError(f"unknown option {flag}")
        key, metavar = options[flag]
        if not metavar:
            if eq:
                raise UsageError(f"{flag} takes no value")
            args[key] = True
            continue
        if not eq:
            value = next(words, None)
            if value is None:
                raise UsageError(f"{flag} needs a value ({metavar.rstrip('.')})")
        if metavar.endswith("..."):
            args[key].append(value)
        else:
            args[key] = value
    if args.help:
        return args
    for word in positional:
        name = word.strip("[]")
        if not rest and not word.startswith("["):
            raise UsageError(f"missing {name.rstrip('.')}")
        key = name.rstrip(".").lower().replace("-", "_")
        if name.endswith("..."):
            args[key], rest = rest, []
        else:
            args[key] = rest.pop(0) if rest else None
    if rest:
        raise UsageError(f"unexpected argument '{rest[0]}'")
    return args


def crew(args):
    """The crew directory named by --dir or the environment (paths.check_owner)."""
    return Crew(args.dir)


def main(path):
    """Entry point of every bin/ command: run crewfile.cmd.<name>, exit with its code."""
    _closed_at_start()
    name = os.path.basename(path)
    module = __import__(f"crewfile.cmd.{name.replace('-', '_')}", fromlist=["run"])
    code = dispatch(name, module, sys.argv[1:])
    if getattr(module, "EXIT_AT_ONCE", False):
        leave(code)
    sys.exit(code)


class _Closed:
    """stdin or stdout closed at start: using it fails with EBADF, said once by
    dispatch(), with nothing left buffered to fail again at exit."""

    def __init__(self, fd):
        self.fd = fd

    def _closed(self, *args):
        raise OSError(errno.EBADF, f"standard {'input' if self.fd == 0 else 'output'} is closed")

    read = readline = write = fileno = _closed

    def flush(self):
        pass

    def isatty(self):
        return False

    @property
    def buffer(self):
        return self


def _closed_at_start():
    """Fill a closed standard descriptor with /dev/null, so no lock file or log
    opened later takes its number; 0 and 1 opened the wrong way round, to fail."""
    for fd, name, flags in ((0, "stdin", os.O_WRONLY), (1, "stdout", os.O_RDONLY),
                            (2, "stderr", os.O_WRONLY)):
        if getattr(sys, name) is not None:
            continue                                # open: the common case, nothing to do
        null = os.open(os.devnull, flags)           # the lowest free number: *fd* itself
        if null != fd:
            os.dup2(null, fd)
            os.close(null)
        setattr(sys, name, _Closed(fd) if fd != 2 else open(fd, "w", closefd=False))


def leave(code):
    """Exit now, skipping the interpreter's teardown (~2 ms, a fifth of crew-status):
    for EXIT_AT_ONCE commands, which leave no lock, half-written file or child."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass                        # dispatch() already said so and chose the code
    os._exit(code)


def dispatch(name, module, argv):
    """Run one command. ERROR_EXIT: one code for all of a command's own failures,
    where the usual ones would collide with codes it passes through (job-wait)."""
    own = getattr(module, "ERROR_EXIT", None)
    try:
        args = parse(module.HELP, argv)
        if args.help:
            sys.stdout.write(module.HELP.rstrip("\n") + "\n\nCommon options:" + COMMON + "\n")
            code = 0
        else:
            code = module.run(args) or 0
        if getattr(module, "EXIT_AT_ONCE", False):
            sys.stdout.flush()          # its failure is reported below, not lost by leave()
        return code
    except CrewfileError as e:
        sys.stderr.write(failure_line(name, e))
        if isinstance(e, UsageError):
            sys.stderr.write(f"Try '{name} --help'.\n")
        return own or e.exit_code
    except BrokenPipeError:
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except OSError:
            pass
        return BROKEN_PIPE
    except KeyboardInterrupt:
        return INTERRUPTED
    except OSError as e:
        sys.stderr.write(failure_line(name, e))
        return own or SYSTEM
