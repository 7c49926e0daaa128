import sys

from crewfile.cli import crew
from crewfile.session.sessions import archive

HELP = """\
session-rm NAME
Take session NAME out of the crew: its directory moves to
archive/sessions/NAME/TS, nothing deleted. Refused while it may be live
(docs/commands/session-rm.md).

  --force   remove it even so (its agent keeps running)

Prints the archive path. Exit: 0; 1 refused (may be live); 2 bad name;
3 no such session; 111.

Example: session-rm builder && session-ls --all
"""


def run(args):
    sys.stdout.write(archive(crew(args), args.name, force=args.force) + "\n")
