import sys

from crewfile.core.atomic import write_named
from crewfile.core.errors import NotFound, PARTIAL, UsageError
from crewfile.core.moments import parse_moment
from crewfile.core.paths import Crew
from crewfile.core.text import escape
from crewfile.session.reader import names
from crewfile.views import timeline


def run(args):
    if not args.svg and not args.html:
        raise UsageError("say where to draw: --svg FILE or --html FILE")
    since = parse_moment(args.since, "--since", False) if args.since else None
    until = parse_moment(args.until, "--until", False) if args.until else None
    c = Crew(args.dir)
    if args.session:
        known = set(names(c))
        for name in args.session:
            if name not in known:
                raise NotFound(f"no session '{name}'")
    lanes, start, end, problems = timeline.build(c, args.session or None, since, until)
    for p in problems:
        sys.stderr.write(f"crew-timeline: {escape(p)}\n")
    picture = timeline.svg(lanes, start, end)
    for path, text in ((args.svg, picture), (args.html, args.html and timeline.page(picture))):
        if not path:
            continue
        if path == "-":
            sys.stdout.write(text)
        else:
            write_named(path, text)
    return PARTIAL if problems else 0
