import sys

from crewfile.cli import crew
from crewfile.core.durations import parse_count, parse_duration
from crewfile.core.errors import UsageError
from crewfile.core.moments import parse_moment
from crewfile.core.text import escape
from crewfile.nudges.schedules import add
from crewfile.session import delivery
from crewfile.session.sessions import Session

HELP = """\
nudge-add [options]
Schedule a nudge: TEXT typed into a session's pane when it is due and safe.

  --session NAME           the session, by name
  --session-key KEY        ... or by the orchestrator's handle
  --agent-session-id ID    ... or by the agent's own session id
  --every DURATION         the floor between attempts (e.g. 90, 30m, 1h30m, 2d)
  --message TEXT           what to type (one line, no control characters)
  --max N                  disarm after N attempts (default: 100, or the replaced schedule's)
  --until MOMENT           disarm then ('2026-12-01 08:00', '08:00', 3h; default: none)
  --user USER              whose schedule (default: $USER)
  --replace                replace the user's schedule for that session: same id,
                           attempts from 0, --max and --until kept unless given

Exactly one of --session, --session-key, --agent-session-id. One schedule per
(user, session): a second is refused (exit 1) unless --replace. Prints the
schedule id (docs/commands/nudge-add.md).

Example: nudge-add --session builder --every 1800 --message 'continue; record blockers'
"""


def run(args):
    missing = [flag for flag, given in (("--every", args.every), ("--message", args.message))
               if not given]
    if missing:
        raise UsageError(f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} required")
    every = parse_duration(args.every, "--every", whole=True)
    max_attempts = None if args.max is None else parse_count(args.max, "--max", 1)
    until = None if args.until is None else parse_moment(args.until, "--until", future=True)
    sched = add(crew(args), every, args.message, session=args.session,
                session_key=args.session_key, agent_session_id=args.agent_session_id,
                max_attempts=max_attempts, until=until, user=args.user, replace_existing=args.replace)
    sys.stdout.write(sched["id"] + "\n")
    note = not_live_note(crew(args), sched)
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
