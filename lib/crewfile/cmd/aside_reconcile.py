import sys

from crewfile.asides.aside import WAIT_DEFAULT, reconcile, reconcile_wait
from crewfile.core.durations import parse_duration
from crewfile.core.errors import UsageError
from crewfile.core.paths import Crew
from crewfile.core.text import escape


def run(args):
    if args.duration is not None and not args.wait:
        raise UsageError("a DURATION needs --wait")
    if args.wait:
        timeout = (WAIT_DEFAULT if args.duration is None
                   else parse_duration(args.duration, "DURATION"))
        out = reconcile_wait(Crew(args.dir), args.name, timeout, say=lambda why: sys.stderr.write(
            escape(f"aside-reconcile: {args.name}: waiting: {why}") + "\n"))
    else:
        out = reconcile(Crew(args.dir), args.name)
    if out.warning:
        sys.stderr.write(escape(f"aside-reconcile: {args.name}: {out.warning}") + "\n")
    sys.stdout.write(f"report: {out.report or '-'}\nscrollback: {out.scrollback or '-'}\n")
    if out.transcript:
        sys.stdout.write(escape(f"transcript: {out.transcript}") + "\n")
