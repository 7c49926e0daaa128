import sys

from crewfile.asides.aside import say
from crewfile.core.paths import Crew


def run(args):
    kind = say(Crew(args.dir), args.name, " ".join(args.text))
    sys.stdout.write(kind + "\n")
