import sys

from crewfile.asides.aside import say
from crewfile.cli import crew

HELP = """\
aside-say NAME TEXT...
Record TEXT as the captain's input to aside NAME, as a prompt hook would;
prints the kind recorded. Believed as aside-done is; otherwise refused
(exit 1), a `problem` record (docs/commands/aside-say.md).

Example: aside-say api-design "what about pagination?"
"""


def run(args):
    kind = say(crew(args), args.name, " ".join(args.text))
    sys.stdout.write(kind + "\n")
