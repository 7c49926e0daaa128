HELP = """\
nudge-tick
Run every due nudge schedule once (from cron), or keep doing it with --watch.

  --watch   stay running: tick when a session's status log or a schedule
            changes (inotify), and at least every 60 s
  --quiet   print nothing (errors still go to stderr)

Prints one line per schedule acted on: `<timestamp> ID SESSION OUTCOME: REASON`,
OUTCOME one of delivered, failed, refused, disarmed. Exit 0 after a tick;
exit 1 at once, doing nothing and printing nothing, when another nudge-tick
holds locks/nudge-tick.

Example: * * * * * /path/to/crewfile/bin/nudge-tick --quiet
"""


def run(args):
    import sys
    from .. import records
    from ..cli import crew
    from ..nudge import tick, tick_lock, watch
    c = crew(args)

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
        return 1
    with lock:
        emit(tick(c))
    return 0
