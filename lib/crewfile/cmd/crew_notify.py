import signal
import sys
from contextlib import nullcontext

from crewfile.asides.aside import concluded_event_why
from crewfile.cli import crew
from crewfile.core.durations import parse_count, parse_duration
from crewfile.core.errors import UsageError
from crewfile.core.locks import acquire
from crewfile.core.text import escape
from crewfile.wake import stream, tell

HELP = """\
crew-notify [options]
Tell the captain, through CMD, the events on stdin that need them.

  --exec CMD          the shell command (sh -c) given each message on
                      stdin: a title line, then one line per event
                      (required). $CREWFILE_NOTIFY_TITLE is the title,
                      $CREWFILE_NOTIFY_IDS the event ids, space-separated,
                      $CREWFILE_NOTIFY_AGAIN 1 if some may have been told
  --cursor FILE       acknowledge positioned lines (crew-watch --resume
                      FILE) by writing FILE once CMD took their events;
                      FILE.journal keeps each try; FILE.lock is held, and
                      by a CMD's supervisor until it recorded its end
  --window DURATION   events within DURATION of the first go in one
                      message (default: 2s)
  --timeout DURATION  CMD killed after this long, a failed try that may
                      have told: its retry is marked again (default: 30s)
  --retry DURATION    first wait after a failed try, doubling up to 5m
                      (default: 2s)
  --away DURATION     tell only when no attached tmux client had key input
                      for DURATION (default: 5m)
  --always            tell whether the captain is at a terminal or not
  --max-per-hour N    at most N messages in any hour; the rest wait and go
                      in the next (default: 20)
  --quiet SPAN        quiet hours HH:MM-HH:MM, local time (22:00-07:00):
                      what comes is held, then told in one message after
  --tmux SOCKET       the tmux server whose clients say if the captain is
                      away (default: $CREWFILE_TMUX, else tmux's own)
  --log-quiet         do not say holds and failures on stderr

Passes only the kinds that need the captain: paused (awaiting captain),
concluded (an aside's report ready, named in its text), lost, blocked,
problem, error; never turns, tools or progress. A pause not told yet is
dropped once its session moves on (the captain answered). With --cursor, each event
is given to CMD until it exits 0, and never again after that, across
restarts and kills: each try's supervisor, which outlives crew-notify,
records how CMD ended. A CMD killed at --timeout, or with crew-notify's
whole process group, may have told: that message goes again with the same
ids, marked again (see docs/commands/crew-notify.md).
A failed CMD is said once on stderr, then retried with backoff.

Example: crew-watch --resume C | crew-notify --cursor C --exec 'curl -s -T - ntfy.sh/my-crew'
"""


def run(args):
    c = crew(args)      # a crew another user could steer is refused, as by every command
    if not args.exec:
        raise UsageError("missing --exec CMD")

    def log(msg):
        if not args.log_quiet:
            sys.stderr.write(f"crew-notify: {escape(msg)}\n")
            sys.stderr.flush()
    window = parse_duration(args.window, "--window", positive=False) if args.window else tell.DEFAULT_WINDOW
    timeout = parse_duration(args.timeout, "--timeout") if args.timeout else tell.DEFAULT_TIMEOUT
    retry = parse_duration(args.retry, "--retry") if args.retry else tell.RETRY_FIRST
    away = parse_duration(args.away, "--away") if args.away else tell.DEFAULT_AWAY
    per_hour = (parse_count(args.max_per_hour, "--max-per-hour", least=1)
                if args.max_per_hour else tell.DEFAULT_PER_HOUR)
    quiet = tell.parse_quiet(args.quiet) if args.quiet else None

    def stop(_sig, _frame):
        raise KeyboardInterrupt         # Teller.done acknowledges what was told
    signal.signal(signal.SIGTERM, stop)
    # Each try's supervisor (tell.try_command, forked) inherits this lock and
    # holds it until it has journaled how its CMD ended: a restart after a
    # kill waits here for a try still running, and then believes the journal.
    with acquire(args.cursor + ".lock") if args.cursor else nullcontext():
        teller = tell.Teller(args.exec, cursor=args.cursor, window=window, timeout=timeout,
                             away=None if args.always else away, per_hour=per_hour, quiet=quiet,
                             retry=retry, log=log, socket=args.tmux,
                             doubt=lambda name, ts, text: concluded_event_why(c, name, ts, text))
        stream.run(teller)
