import sys

from crewfile.core.errors import NOT_FOUND, NotFound
from crewfile.core.paths import Crew
from crewfile.core.text import escape
from crewfile.nudges.schedules import remove


def run(args):
    c = Crew(args.dir)
    missing = 0
    for sid in args.id:
        try:
            remove(c, sid)
        except NotFound as e:
            sys.stderr.write(f"nudge-rm: {escape(str(e))}\n")
            missing += 1
    return NOT_FOUND if missing else 0
