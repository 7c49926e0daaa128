from crewfile.cli import crew
from crewfile.core.records import check_kind
from crewfile.wake import wakefilter

HELP = """\
wake-filter [options]
Read event lines (crew-watch's) on stdin; print those that should wake the primary.

  --pass KIND...          also pass KIND from normal sessions
  --hold KIND...          hold KIND from normal sessions
  --exempt-pass KIND...   also pass KIND from exempt sessions (asides)
  --exempt-hold KIND...   hold KIND from exempt sessions

Exempt sessions pass only: concluded problem blocked error lost
account-blocked. Normal sessions pass: turn-ended done concluded blocked
problem error stale lost waiting ended account-blocked turn-failed
(`background` and `subagent` never: work inside a session is not its end);
a repeat of a kind with nothing else from that session in between is
folded; after `paused` their idle and stale are held until other activity.
An aside's `concluded` passes only when the report it names is delivered.
A session without metadata passes everything; a line that is not an event
passes unchanged, with a warning on stderr.

Example: crew-watch | wake-filter --hold turn-ended | wake-send firstmate
"""


def run(args):
    flt = wakefilter.Filter(
        crew(args),
        normal_pass=(wakefilter.NORMAL_PASS | _kinds(args["pass"])) - _kinds(args.hold),
        exempt_pass=(wakefilter.EXEMPT_PASS | _kinds(args.exempt_pass)) - _kinds(args.exempt_hold))
    wakefilter.filter_stream(flt)
    return 0


def _kinds(words):
    return frozenset(check_kind(w) for w in words or ())
