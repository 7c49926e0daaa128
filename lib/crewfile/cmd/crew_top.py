import sys

from crewfile.core.errors import PARTIAL, UsageError, failure_line
from crewfile.core.paths import Crew
from crewfile.views import top
from crewfile.views.topview import main


def run(args):
    if not args.once:
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            raise UsageError("the live view needs a terminal: use --once")
        main(Crew(args.dir), show_ended=args.all)
        return 0
    f = top.frame(Crew(args.dir), show_ended=args.all)
    sys.stdout.write(f.text(colour=sys.stdout.isatty()))
    sys.stderr.write("".join(failure_line("crew-top", why) for why in f.said))
    return PARTIAL if f.bad else 0
