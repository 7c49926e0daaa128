import os
import sys

from crewfile.asides.aside import open_aside
from crewfile.core.paths import Crew


def run(args):
    target = open_aside(Crew(args.dir), args.name, topic=args.topic, cmd=args.cmd,
                        tmux_session=args.tmux_session,
                        primary=args.primary or os.environ.get("CREWFILE_PRIMARY"))
    sys.stdout.write(target + "\n")
