import sys

from crewfile.asides.aside import concluded_event_why
from crewfile.core.durations import parse_count, parse_duration
from crewfile.core.errors import UsageError
from crewfile.core.paths import Crew
from crewfile.core.text import escape
from crewfile.wake import stream, tell


def run(args):
    c = Crew(args.dir)      # a crew another user could steer is refused, as by every command
    if not args.exec:
        raise UsageError("missing --exec CMD")

    def log(msg):
        if not args.log_quiet:
            sys.stderr.write(f"crew-notify: {escape(msg)}\n")
            sys.stderr.flush()
    window = parse_duration(args.window, "--window", positive=False, default=tell.DEFAULT_WINDOW)
    timeout = parse_duration(args.timeout, "--timeout", default=tell.DEFAULT_TIMEOUT)
    retry = parse_duration(args.retry, "--retry", default=tell.RETRY_FIRST)
    away = parse_duration(args.away, "--away", default=tell.DEFAULT_AWAY)
    per_hour = parse_count(args.max_per_hour, "--max-per-hour", least=1,
                           default=tell.DEFAULT_PER_HOUR)
    quiet = tell.parse_quiet(args.quiet) if args.quiet else None

    def teller():
        return tell.Teller(args.exec, cursor=args.cursor, window=window, timeout=timeout,
                           away=None if args.always else away, per_hour=per_hour, quiet=quiet,
                           retry=retry, log=log, socket=args.tmux,
                           doubt=lambda name, text: concluded_event_why(c, name, text))
    # Each try's supervisor (tell.try_command, forked) inherits the cursor's
    # lock and holds it until it has journaled how its CMD ended: a restart
    # after a kill waits for a try still running, and then believes the journal.
    stream.run_stage(teller, args.cursor)
