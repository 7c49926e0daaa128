import sys

from crewfile.core.durations import parse_duration
from crewfile.core.errors import BadInput
from crewfile.core.names import check_host
from crewfile.core.paths import Crew
from crewfile.core.text import escape
from crewfile.wake import stream, wakesend
from crewfile.wake.words import DEFAULT_SAY


def run(args):

    def warn(msg):      # a lock holder's process name, a path: never raw to the terminal
        sys.stderr.write(f"wake-send: {escape(msg)}\n")
        sys.stderr.flush()

    def log(msg):
        if not args.quiet:
            warn(msg)
    window = parse_duration(args.window, "--window", default=wakesend.DEFAULT_WINDOW)
    retry = parse_duration(args.retry, "--retry", default=wakesend.DEFAULT_RETRY)
    say = _template(args.say or DEFAULT_SAY)

    def sender():
        return wakesend.Sender(Crew(args.dir), args.primary, window=window, retry=retry, say=say,
                               log=log, warn=warn, cursor=args.cursor, host=check_host(args.host))
    stream.run_stage(sender, args.cursor)


def _template(text):
    try:
        text.format(n="1 wake", count=1, primary="p", **{"from": "w"})
    except (KeyError, IndexError, ValueError) as e:
        raise BadInput(f"bad --say template: {e}") from None
    return text
