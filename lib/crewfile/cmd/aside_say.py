import sys

from crewfile.asides.aside import say
from crewfile.cli import crew

HELP = """\
aside-say NAME TEXT...
Record TEXT as the captain's input to aside NAME, as a prompt hook would:
`/aside-done [NOTE]` records the captain's conclusion (captain-done),
anything else a `captain` record, which voids an earlier conclusion. For a
wrapper around an agent without a prompt hook. Believed only from outside
the aside's agent, with a person's keys behind it (as aside-done):
otherwise refused (exit 1), a `problem` record. Prints the kind recorded.

Example: aside-say api-design "what about pagination?"
"""


def run(args):
    kind = say(crew(args), args.name, " ".join(args.text))
    sys.stdout.write(kind + "\n")
    return 0
