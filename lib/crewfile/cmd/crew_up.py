import shlex
import sys

from crewfile.core.atomic import read_text
from crewfile.core.durations import parse_duration
from crewfile.core.errors import BadInput, NotFound, UsageError
from crewfile.core.names import check_host
from crewfile.core.output import table
from crewfile.core.paths import Crew
from crewfile.core.text import escape
from crewfile.crew import crewup


def run(args):
    c = Crew(args.dir)
    if args.status:
        return _status(c)
    if not args.primary:
        raise UsageError("missing PRIMARY")
    notify_with = _notify_with(args)
    remotes = _remotes(list(args.remote or ()) + _remote_file(args.remotes))
    # The unit runs crew-up as given here: every option that shapes the crew.
    extra = [w for host, rdir in remotes.items() for w in ("--remote", f"{host}:{rdir}")]
    for flag, value in (("--sweep", args.sweep), ("--backoff-max", args.backoff_max),
                        ("--notify", args.notify), ("--notify-with", args.notify_with)):
        if value:
            extra += [flag, value]
    sweep = parse_duration(args.sweep, "--sweep", default=crewup.DEFAULT_SWEEP)
    backoff = parse_duration(args.backoff_max, "--backoff-max", default=crewup.BACKOFF_MAX)
    if args.systemd:
        sys.stdout.write(crewup.systemd_unit(c, args.primary, sys.argv[0], extra))
        return 0
    crewup.Supervisor(c, args.primary, sweep=sweep, backoff_max=backoff, remotes=remotes,
                      notify=args.notify, notify_options=notify_with).run()


def _status(c):
    got = crewup.status_lines(c)
    if got is None:
        raise NotFound(f"not running for {c.root}")
    head, rows = got
    sys.stdout.write(escape(head) + "\n"
                     + table(rows[0], [list(r[:-1]) + [escape(r[-1])] for r in rows[1:]]))
    return 0


def _notify_with(args):
    if args.notify_with is None:
        return []
    if not args.notify:
        raise UsageError("--notify-with needs --notify CMD")
    try:
        words = shlex.split(args.notify_with)
    except ValueError as e:
        raise BadInput(f"bad --notify-with: {e}") from None
    if any(w in ("--exec", "--cursor") or w.startswith(("--exec=", "--cursor=")) for w in words):
        raise BadInput("bad --notify-with: --exec and --cursor are crew-up's to give")
    return words


def _remotes(words):
    out = {}
    for w in words:
        host, colon, rdir = w.partition(":")
        if not colon or not rdir.startswith("/"):
            raise BadInput(f"bad --remote '{w}': HOST:DIR, DIR an absolute path")
        out[check_host(host)] = rdir
    return out


def _remote_file(path):
    if path is None:
        return []
    text = read_text(path)
    if text is None:
        raise NotFound(f"no file '{path}'")
    return [line.strip() for line in text.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]
