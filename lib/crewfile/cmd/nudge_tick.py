HELP = """\
nudge-tick
Run every due nudge schedule once (from cron), or keep doing it with --watch.

  --watch   stay running: tick when a session's status log or a schedule
            changes (inotify), and at least every 60 s
  --quiet   print nothing (errors still go to stderr)

Prints one line per schedule acted on: `<timestamp> ID SESSION OUTCOME: REASON`,
OUTCOME one of delivered, failed, refused, disarmed. Exit 0 after a tick;
exit 1 at once, doing nothing and printing nothing, when another nudge-tick
holds locks/nudge-tick. A file in nudges/ that is not a schedule (damaged,
a symlink) is named on stderr and skipped; the other schedules are acted on,
then the exit code is 5.

Example: * * * * * /path/to/crewfile/bin/nudge-tick --quiet
"""


def run(args):
    import sys
    from .. import records
    from ..cli import crew
    from .. import locks
    from ..nudge import LOCK_WAIT, tick, tick_lock, watch
    c = crew(args)
    locks.bound_waits(LOCK_WAIT)

    def emit(outcomes):
        from ..spool import kept
        for line in dict.fromkeys(kept):
            sys.stderr.write(f"nudge-tick: {line}\n")
        kept.clear()
        if args.quiet or not outcomes:
            return
        ts = records.timestamp()
        sys.stdout.write("".join(o.line(ts) for o in outcomes))
        sys.stdout.flush()

    if args.watch:
        watch(c, emit)
        return 0
    from ..errors import PARTIAL, REFUSED
    lock = tick_lock(c)
    if lock is None:
        return REFUSED
    bad = []
    with lock:
        emit(tick(c, bad=bad))
    sys.stderr.write("".join(f"nudge-tick: skipped {e}\n" for _, e in bad))
    return PARTIAL if bad else 0
