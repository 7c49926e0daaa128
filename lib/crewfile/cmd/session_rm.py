import sys

from crewfile.core.paths import Crew
from crewfile.session.sessions import archive


def run(args):
    sys.stdout.write(archive(Crew(args.dir), args.name, force=args.force) + "\n")
