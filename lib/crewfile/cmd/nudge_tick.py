import os
import sys

from crewfile.cli import crew
from crewfile.core import locks, records
from crewfile.core.errors import PARTIAL, REFUSED
from crewfile.core.pinned import crontab_line
from crewfile.core.text import escape
from crewfile.nudges.nudge import LOCK_WAIT, tick, tick_lock
from crewfile.nudges.nudgewatch import watch

HELP = """\
nudge-tick
Run every due nudge schedule once (from cron), or keep doing it with --watch.

  --watch    stay running: tick when a log or a schedule changes, and every 60 s
  --quiet    print nothing (errors still go to stderr)
  --crontab  print the crontab line that ticks every minute for this crew

Prints `<timestamp> ID SESSION OUTCOME: REASON` per schedule acted on. Exit 1
at once when another nudge-tick runs; 5 when a file in nudges/ was skipped
(docs/commands/nudge-tick.md).

Example: (crontab -l; nudge-tick --crontab) | crontab -
"""


def run(args):
    c = crew(args)
    if args.crontab:
        # Cron lacks the user's PATH: name the crew directory and the interpreter.
        # No tmux server: every session's pane is reached on its recorded one.
        env = {"CREWFILE_DIR": os.path.abspath(c.root)}
        sys.stdout.write(crontab_line(sys.argv[0], env, "--quiet"))
        return 0
    locks.bound_waits(LOCK_WAIT)

    def emit(outcomes):
        if args.quiet or not outcomes:
            return
        ts = records.timestamp()
        sys.stdout.write("".join(o.line(ts) for o in outcomes))
        sys.stdout.flush()

    if args.watch:
        watch(c, emit)
        return 0
    lock = tick_lock(c)
    if lock is None:
        return REFUSED
    bad = []
    with lock:
        emit(tick(c, bad=bad))
    sys.stderr.write("".join(f"nudge-tick: skipped {escape(str(e))}\n" for _, e in bad))
    return PARTIAL if bad else 0
