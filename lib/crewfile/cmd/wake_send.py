import signal
import sys
from contextlib import nullcontext

from crewfile.cli import crew
from crewfile.core.durations import parse_duration
from crewfile.core.errors import BadInput
from crewfile.core.locks import acquire
from crewfile.core.names import check_host
from crewfile.core.text import escape
from crewfile.wake import stream, wakesend

HELP = """\
wake-send PRIMARY [options]
Post each wake line on stdin to PRIMARY's inbox, then tell PRIMARY in its pane.

  --window DURATION  wakes arriving within DURATION of the first are
                     announced together (default: 0.5s)
  --retry DURATION   retry a refused announcement this often (default: 2s)
  --say TEMPLATE     the line typed; {n} "3 wakes", {count}, {from} the
                     sessions, {primary} (default: "crewfile: {n} waiting
                     from {from}; run: inbox-drain {primary}")
  --cursor FILE      acknowledge positioned lines (crew-watch --resume FILE)
                     by writing FILE once their wakes are in the inbox;
                     FILE.lock is held while it runs (a second wake-send on
                     FILE waits for the first to end); FILE that cannot
                     be written (a full disk) is said once and written
                     later, the wakes go on
  --host HOST        the events come from HOST's crew (ssh HOST crew-watch
                     ...): session names and event ids are posted as
                     HOST:NAME, and none is taken for PRIMARY
  --quiet            do not log announcements on stderr

Every line becomes a `wake` notice at once (durable: inbox-drain PRIMARY
shows it). A PRIMARY not registered yet: the wakes wait and are posted when
it is (said once on stderr). The announcement is typed only when PRIMARY is
live and idle (never while it generates; unknown counts as busy),
re-checked before Enter, and never twice for the same wakes. Events of
PRIMARY itself are ignored. At end of input, what waits is posted (waiting
for PRIMARY if need be) and a last announcement is tried once. If PRIMARY's
lock is held for more than 1 s, wakes are posted without it (one line on
stderr names the holder; see protocol.md, "Bounded waits"); the stream goes
on.

Example: crew-watch --resume C | wake-filter | wake-send firstmate --cursor C
"""


def run(args):

    def warn(msg):      # a lock holder's process name, a path: never raw to the terminal
        sys.stderr.write(f"wake-send: {escape(msg)}\n")
        sys.stderr.flush()

    def log(msg):
        if not args.quiet:
            warn(msg)
    window = (wakesend.DEFAULT_WINDOW if args.window is None
              else parse_duration(args.window, "--window"))
    retry = wakesend.DEFAULT_RETRY if args.retry is None else parse_duration(args.retry, "--retry")
    say = _template(args.say or wakesend.DEFAULT_SAY)

    def stop(_sig, _frame):
        raise KeyboardInterrupt         # Sender.done acknowledges what is posted
    signal.signal(signal.SIGTERM, stop)
    # the cursor is read after the lock: one writer at a time
    with acquire(args.cursor + ".lock") if args.cursor else nullcontext():
        sender = wakesend.Sender(crew(args), args.primary, window=window, retry=retry, say=say,
                                 log=log, warn=warn, cursor=args.cursor,
                                 host=check_host(args.host))
        stream.run(sender)


def _template(text):
    try:
        text.format(n="1 wake", count=1, primary="p", **{"from": "w"})
    except (KeyError, IndexError, ValueError) as e:
        raise BadInput(f"bad --say template: {e}") from None
    return text
