from crewfile.core.paths import Crew
from crewfile.core.records import check_kind
from crewfile.wake import stream, wakefilter


def run(args):
    flt = wakefilter.Filter(
        Crew(args.dir),
        normal_pass=(wakefilter.NORMAL_PASS | _kinds(args["pass"])) - _kinds(args.hold),
        exempt_pass=(wakefilter.EXEMPT_PASS | _kinds(args.exempt_pass)) - _kinds(args.exempt_hold))
    stream.run(flt)


def _kinds(words):
    return frozenset(check_kind(w) for w in words or ())
