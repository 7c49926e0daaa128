import sys

from crewfile.asides.reports import listing
from crewfile.core import paths, records
from crewfile.core.errors import PARTIAL
from crewfile.core.output import json_choice, table
from crewfile.core.text import escape


def run(args):
    states = (paths.REPORT_NEW,) if args.new else (paths.REPORT_NEW, paths.REPORT_CUR)
    found = listing(paths.Crew(args.dir), aside=args.aside, states=states)
    bad = [r for r in found if r.error]
    sys.stderr.write("".join(f"report-ls: {escape(r.path)}: {r.error}\n" for r in bad))
    out = json_choice(args, (r.as_dict() for r in found))
    if out is None:
        out = table(("STATE", "ASIDE", "TIME", "PATH"), (
            [r.state, r.aside, records.timestamp(r.time),
             escape(r.path) + (f" error: {r.error}" if r.error else "")] for r in found))
    sys.stdout.write(out)
    return PARTIAL if bad else 0
