import sys

from crewfile.core import records
from crewfile.core.errors import PARTIAL
from crewfile.core.output import json_choice
from crewfile.core.paths import Crew
from crewfile.wake import inbox


def run(args):
    json_choice(args, ())                  # a usage error before anything is drained
    c = Crew(args.dir)
    if args.peek:
        notices, garbage = inbox.pending(c, args.name), 0
    else:
        notices, garbage = inbox.drain(c, args.name)
    if garbage:
        sys.stderr.write(f"inbox-drain: {args.name}: skipped {garbage} malformed line(s)\n")
    out = json_choice(args, (n.as_dict() for n in notices))
    if out is None:
        out = "".join(records.format_line(n.ts, n.kind, f"{n.id} {n.text}") for n in notices)
    sys.stdout.write(out)
    return PARTIAL if garbage else 0
