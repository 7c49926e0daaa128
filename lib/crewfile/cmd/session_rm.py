import sys

from crewfile.cli import crew
from crewfile.session.sessions import archive


def run(args):
    sys.stdout.write(archive(crew(args), args.name, force=args.force) + "\n")
