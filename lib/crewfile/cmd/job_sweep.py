import sys

from crewfile.background.sweep import HEARD_RETENTION, UNHEARD_RETENTION, sweep
from crewfile.core.durations import parse_duration
from crewfile.core.errors import PARTIAL
from crewfile.core.paths import Crew
from crewfile.core.text import escape


def run(args):
    older = parse_duration(args.older_than, "--older-than", positive=False,
                           default=HEARD_RETENTION)
    unheard = parse_duration(args.unheard_older_than, "--unheard-older-than", positive=False,
                             default=UNHEARD_RETENTION)
    bad = []
    removed = sweep(Crew(args.dir), older, unheard, bad=bad)
    sys.stdout.write("".join(h + "\n" for h in removed))
    sys.stderr.write("".join(f"job-sweep: kept {escape(str(e))}\n" for e in bad))
    return PARTIAL if bad else 0
