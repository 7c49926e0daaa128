from crewfile.cli import crew
from crewfile.core.durations import parse_duration
from crewfile.core.errors import NotFound
from crewfile.crew import crewup

HELP = """\
crew-down
Stop the crew's crew-up: SIGTERM, then wait until every stage has stopped.

  --timeout DURATION   give up waiting after this long (default: 30s; exit 111)

Exit 0 once it has stopped; 3 when no crew-up runs for this crew.

Example: crew-down --dir ~/crew
"""


def run(args):
    c = crew(args)
    timeout = parse_duration(args.timeout, "--timeout") if args.timeout else 30.0
    if not crewup.down(c, timeout):
        raise NotFound(f"no crew-up runs for {c.root}")
