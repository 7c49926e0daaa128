import os
import sys

from crewfile.core import locks, records
from crewfile.core.errors import PARTIAL, REFUSED
from crewfile.core.paths import Crew
from crewfile.core.pinned import crontab_line
from crewfile.core.text import escape
from crewfile.nudges.nudge import LOCK_WAIT, tick, tick_lock
from crewfile.nudges.nudgewatch import watch


def run(args):
    c = Crew(args.dir)
    if args.crontab:
        # Cron lacks the user's PATH: name the crew directory and the interpreter.
        # No tmux server: every session's pane is reached on its recorded one.
        env = {"CREWFILE_DIR": os.path.abspath(c.root)}
        sys.stdout.write(crontab_line(sys.argv[0], env, "--quiet"))
        return 0
    locks.bound_waits(LOCK_WAIT)

    def emit(outcomes):
        shown = [] if args.quiet else [o.reason for o in outcomes]
        # A write past the bound, without the lock, is said unless a line of
        # this pass already names that holder (a `lock-stuck` refusal).
        sys.stderr.write("".join(f"nudge-tick: {escape(note)}\n" for note in locks.take_notes()
                                 if not any(note.split("; ", 1)[0] in r for r in shown)))
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
