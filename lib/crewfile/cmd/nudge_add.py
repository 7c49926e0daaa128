import sys

from crewfile.core.durations import parse_count, parse_duration
from crewfile.core.errors import UsageError
from crewfile.core.moments import parse_moment
from crewfile.core.paths import Crew
from crewfile.core.text import escape
from crewfile.nudges.schedules import add
from crewfile.session import delivery
from crewfile.session.sessions import Session


def run(args):
    missing = [flag for flag, given in (("--every", args.every), ("--message", args.message))
               if not given]
    if missing:
        raise UsageError(f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} required")
    every = parse_duration(args.every, "--every", whole=True)
    max_attempts = parse_count(args.max, "--max", 1)
    until = None if args.until is None else parse_moment(args.until, "--until", future=True)
    c = Crew(args.dir)
    sched = add(c, every, args.message, session=args.session,
                session_key=args.session_key, agent_session_id=args.agent_session_id,
                max_attempts=max_attempts, until=until, user=args.user, replace_existing=args.replace)
    sys.stdout.write(sched["id"] + "\n")
    note = not_live_note(c, sched)
    if note:
        sys.stderr.write(f"nudge-add: note: {escape(note)}\n")


def not_live_note(crew, sched):
    """What the user must know when the target cannot be nudged at all now,
    or None: the tick's first question (delivery.check's cheap part)."""
    why, _ = delivery.check(Session(crew, sched["session"]), screen=False)
    if why is None or why.code not in (delivery.NOT_LIVE, delivery.LIVE_UNKNOWN):
        return None
    if why.code == delivery.NOT_LIVE:
        return (f"{sched['session']} is not live ({why.detail}): when the nudge is due,"
                " a tick disarms the schedule unless the session is live again by then")
    return (f"whether {sched['session']} is live is unknown ({why.detail}): a due nudge"
            " is refused, and kept, until it is known")
