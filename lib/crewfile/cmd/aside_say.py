import sys

from crewfile.asides.aside import say
from crewfile.cli import crew


def run(args):
    kind = say(crew(args), args.name, " ".join(args.text))
    sys.stdout.write(kind + "\n")
