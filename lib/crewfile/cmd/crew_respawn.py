import sys

from crewfile.core.errors import PARTIAL, REFUSED as REFUSED_EXIT
from crewfile.core.output import json_document, table
from crewfile.core.paths import Crew
from crewfile.core.text import escape
from crewfile.crew.spawn import DAMAGED, REFUSED, respawn


def run(args):
    done = respawn(Crew(args.dir), args.name, dry_run=args.dry_run)
    for r in done:
        if r.action in (REFUSED, DAMAGED):
            sys.stderr.write(f"crew-respawn: {r.name}: {escape(r.detail)}\n")
    if args.json:
        sys.stdout.write(json_document({"name": r.name, "action": r.action, "detail": r.detail}
                                       for r in done))
    elif done:
        sys.stdout.write(table(("NAME", "ACTION", "DETAIL"),
                               ([r.name, r.action, escape(r.detail)] for r in done)))
    actions = {r.action for r in done}
    return REFUSED_EXIT if REFUSED in actions else PARTIAL if DAMAGED in actions else 0
