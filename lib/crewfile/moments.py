"""Moments a person types (`--until`, `--since`), read with python-dateutil.

dateutil is imported only here, and this module only when such a flag is
given: it costs tens of milliseconds of start-up that hooks and pipelines
never pay. A moment is a date and time as people write it
(`2026-12-01 08:00`, `Dec 1 8am`, `2026-12-01T08:00:00Z`, `08:00` for today),
read in the local time zone unless it names one; or a DURATION (durations.py),
meaning that long before now (`--since 2h`) or from now (`--until 3h`).
"""
import time

from .errors import BadInput

EXAMPLES = "a moment such as '2026-12-01 08:00', '08:00', '2026-12-01T08:00Z', or a duration (2h)"


def parse_moment(text, flag, future, now=None):
    """Seconds since the epoch for *text*; a bare duration counts from *now*
    forwards if *future* else backwards. BadInput naming *flag* otherwise."""
    now = time.time() if now is None else now
    from .durations import parse_duration
    try:
        seconds = parse_duration(text, flag, positive=False)
    except BadInput:
        pass
    else:
        return now + seconds if future else now - seconds
    if not isinstance(text, str) or not text.strip() or len(text) > 100:
        raise BadInput(f"bad {flag} {text[:100]!r}: {EXAMPLES}")
    try:
        from dateutil import parser
    except ImportError:
        raise BadInput(f"{flag} needs python-dateutil (pip install python-dateutil)") from None
    import datetime
    today = datetime.datetime.fromtimestamp(now).replace(hour=0, minute=0, second=0,
                                                         microsecond=0)
    try:
        moment = parser.parse(text, default=today)
        # A time alone (`08:00`) takes today's date; for a moment to come,
        # one already past today means tomorrow (said at 20:00, 08:00 is
        # tomorrow morning). The date came from the default if another
        # default changes it.
        dated = parser.parse(text, default=today - datetime.timedelta(days=40)) == moment
        if moment.tzinfo is None:
            moment = moment.astimezone()         # the local zone, as the person meant it
        value = moment.timestamp()
        if future and not dated and value <= now:
            value = (moment + datetime.timedelta(days=1)).timestamp()
    except (ValueError, OverflowError) as e:
        raise BadInput(f"bad {flag} {text!r}: {EXAMPLES} ({e})") from None
    if not -62167219200 <= value <= 253402300799:
        raise BadInput(f"bad {flag} {text!r}: outside the years 0000..9999")
    return value
