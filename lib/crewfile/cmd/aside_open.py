import os
import sys

from crewfile.asides.aside import open_aside
from crewfile.cli import crew

HELP = """\
aside-open NAME
Open aside NAME: register it (kind aside, exempt) and start its agent in a
new tmux window; prints the window target (docs/commands/aside-open.md).

  --topic TEXT           what the aside is about (the `opened` record's text)
  --cmd COMMAND          the agent's shell command (default: $CREWFILE_AGENT_CMD, else claude)
  --tmux-session SESSION   the tmux session for the window (default: tmux's current one)
  --primary NAME         the primary that opened it (default: $CREWFILE_PRIMARY)

Example: aside-open api-design --topic "shape of the v2 API" --primary firstmate
"""


def run(args):
    target = open_aside(crew(args), args.name, topic=args.topic, cmd=args.cmd,
                        tmux_session=args.tmux_session,
                        primary=args.primary or os.environ.get("CREWFILE_PRIMARY"))
    sys.stdout.write(target + "\n")
