import sys

from crewfile.background.jobs import HEARD_RETENTION, UNHEARD_RETENTION, sweep
from crewfile.cli import crew
from crewfile.core.durations import parse_duration
from crewfile.core.errors import PARTIAL
from crewfile.core.text import escape

HELP = """\
job-sweep
Remove finished jobs whose outcome was heard, once past their retention.

  --older-than DURATION           retention of a heard outcome, from when it was heard (default: 10m)
  --unheard-older-than DURATION   retention of an outcome nobody heard, from its end, and of a lost job (default: 7d)

Prints the removed handles; a running job is never removed; a job whose
files are damaged is kept and named on stderr (exit 5; docs/commands/job-sweep.md).

Example: job-sweep --older-than 1h
"""


def run(args):
    older = (parse_duration(args.older_than, "--older-than", positive=False)
             if args.older_than is not None else HEARD_RETENTION)
    unheard = (parse_duration(args.unheard_older_than, "--unheard-older-than", positive=False)
               if args.unheard_older_than is not None else UNHEARD_RETENTION)
    bad = []
    removed = sweep(crew(args), older, unheard, bad=bad)
    sys.stdout.write("".join(h + "\n" for h in removed))
    sys.stderr.write("".join(f"job-sweep: kept {escape(str(e))}\n" for e in bad))
    return PARTIAL if bad else 0
