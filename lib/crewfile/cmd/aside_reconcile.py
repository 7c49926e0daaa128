import sys

from crewfile.asides.aside import WAIT_DEFAULT, reconcile, reconcile_wait
from crewfile.cli import crew
from crewfile.core.durations import parse_duration
from crewfile.core.errors import UsageError
from crewfile.core.text import escape

HELP = """\
aside-reconcile NAME [--wait [DURATION]]
The primary takes in concluded aside NAME: its report into reports/cur/,
the window's scrollback and the agent's transcript beside it, `closed`,
then the window killed. Prints `report:`, `scrollback:` (`transcript:`)
lines. Exit 7 while the captain is at the window
(docs/commands/aside-reconcile.md).

  --wait   wait (at most DURATION, default 10m) until the captain has left
           the window alone for a few seconds, then reconcile; if the
           captain sends input meanwhile, the conclusion is void: exit 1

Example: aside-reconcile api-design --wait 15m && cat "$(report-ls --aside api-design | awk 'END {print $4}')"
"""


def run(args):
    if args.duration is not None and not args.wait:
        raise UsageError("a DURATION needs --wait")
    if args.wait:
        timeout = (WAIT_DEFAULT if args.duration is None
                   else parse_duration(args.duration, "DURATION"))
        out = reconcile_wait(crew(args), args.name, timeout, say=lambda why: sys.stderr.write(
            escape(f"aside-reconcile: {args.name}: waiting: {why}") + "\n"))
    else:
        out = reconcile(crew(args), args.name)
    if out.warning:
        sys.stderr.write(escape(f"aside-reconcile: {args.name}: {out.warning}") + "\n")
    sys.stdout.write(f"report: {out.report or '-'}\nscrollback: {out.scrollback or '-'}\n")
    if out.transcript:
        sys.stdout.write(escape(f"transcript: {out.transcript}") + "\n")
