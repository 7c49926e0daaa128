import sys

from crewfile.cli import crew
from crewfile.session.sessions import archive

HELP = """\
session-rm NAME
Take session NAME out of the crew: its directory (metadata, status logs,
inbox, scrollbacks) moves to archive/sessions/NAME/TS in the crew
directory, TS the time of removal; nothing is deleted. The name is then
free for session-add. Refused while the session may be live: not ended,
and its pane or process not known to be gone.

  --force   remove it even so (its agent keeps running; its hooks then find
            no session)

Prints the archive path. Exit: 0; 1 refused (may be live); 2 bad name;
3 no such session; 111.

Example: session-rm builder && session-ls --all
"""


def run(args):
    sys.stdout.write(archive(crew(args), args.name, force=args.force) + "\n")
    return 0
