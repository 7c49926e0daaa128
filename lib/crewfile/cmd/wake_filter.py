from crewfile.cli import crew
from crewfile.core.records import check_kind
from crewfile.wake import stream, wakefilter

HELP = """\
wake-filter [options]
Read event lines (crew-watch's) on stdin; print those that should wake the primary.

  --pass KIND...          also pass KIND from normal sessions
  --hold KIND...          hold KIND from normal sessions
  --exempt-pass KIND...   also pass KIND from exempt sessions (asides)
  --exempt-hold KIND...   hold KIND from exempt sessions

Exempt sessions (asides) pass only their conclusion and real problems;
repeats are folded; a line that is not an event passes, with a warning
(docs/commands/wake-filter.md).

Example: crew-watch | wake-filter --hold turn-ended | wake-send firstmate
"""


def run(args):
    flt = wakefilter.Filter(
        crew(args),
        normal_pass=(wakefilter.NORMAL_PASS | _kinds(args["pass"])) - _kinds(args.hold),
        exempt_pass=(wakefilter.EXEMPT_PASS | _kinds(args.exempt_pass)) - _kinds(args.exempt_hold))
    stream.run(flt)


def _kinds(words):
    return frozenset(check_kind(w) for w in words or ())
