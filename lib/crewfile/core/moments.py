"""Moments a person types (`--until`, `--since`): protocol.md's "Moments", read
only when they have one meaning (dateutil alone read `-5m` as 00:05 and `Dec 32`
as 2032-12-01), so dateutil must agree with what was typed, field by field.
Imported only when such a flag is given: its start-up costs tens of ms.
"""
import calendar
import datetime
import re
import time
import warnings

from crewfile.core.durations import parse_duration
from crewfile.core.errors import BadInput

EXAMPLES = ("a moment such as '2026-12-01 08:00', 'Dec 1 8am', '08:00', '2026-12-01T08:00Z',"
            " a duration such as 2h, or -5m (5 minutes ago)")

_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_FULL_NAMES = {m.lower() for m in calendar.month_name[1:]} | {"sept"}
_TIME = r"(?P<hour>\d{1,2})(?::(?P<minute>\d{2})(?::(?P<second>\d{2})(?:\.\d{1,6})?)?)?\s*(?P<half>am|pm)?"
_ZONE = r"(?:\s*(?P<zone>z|utc|gmt|[+-]\d{2}:?\d{2}))?"
_FORMS = [re.compile(form + _ZONE + r"$", re.IGNORECASE | re.ASCII) for form in (
    r"(?P<year>\d{4})-(?P<month>\d{2})-(?P<day>\d{2})(?:[ T]" + _TIME + ")?",
    r"(?P<monthname>[a-z]{3,9})\.?\s+(?P<day>\d{1,2})(?:,?\s+(?P<year>\d{4}))?(?:,?\s+" + _TIME + ")?",
    _TIME,
)]


def parse_moment(text, flag, future, now=None):
    """Seconds since the epoch for *text*; a DURATION counts from *now*
    forwards if *future*, else backwards. BadInput naming *flag*."""
    now = time.time() if now is None else now
    if not isinstance(text, str) or not text.strip() or len(text) > 100:
        raise _bad(flag, text)
    text = text.strip()
    ago = text.startswith("-")
    seconds = _duration(text[1:] if ago else text)
    if seconds is not None:
        return now + seconds if future and not ago else now - seconds
    fields = _fields(text)
    if fields is None:
        raise _bad(flag, text)
    value = _read(text, fields, flag, future, now)
    if not -62167219200 <= value <= 253402300799:
        raise BadInput(f"bad {flag} '{text}': outside the years 0000..9999")
    return value


def _bad(flag, text):
    shown = text[:100] if isinstance(text, str) else ""
    return BadInput(f"bad {flag} '{shown}': {EXAMPLES}")


def _duration(text):
    """Seconds for a DURATION with a unit, else None (a bare number is no moment)."""
    if not text or text[-1] not in "dhms":
        return None
    try:
        return parse_duration(text, "", positive=False)
    except BadInput:
        return None


def _fields(text):
    """The typed fields of a date/time form ({name: str or None}), or None."""
    for form in _FORMS:
        m = form.match(text)
        if m is None:
            continue
        fields = dict.fromkeys(("year", "month", "monthname", "day", "hour", "minute",
                                "second", "half", "zone"))
        fields.update(m.groupdict())
        name = fields["monthname"]
        if name is not None:
            month = name[:3].lower()
            if month not in _MONTHS or not (len(name) == 3 or name.lower() in _FULL_NAMES):
                return None
            fields["month"] = str(_MONTHS.index(month) + 1)
        if fields["hour"] is not None and fields["minute"] is None and fields["half"] is None:
            return None              # `8` alone: an hour? a day? refused
        return fields
    return None


def _read(text, fields, flag, future, now):
    try:
        from dateutil import parser
    except ImportError:
        raise BadInput(f"{flag} needs python-dateutil (pip install python-dateutil)") from None
    today = datetime.datetime.fromtimestamp(now).replace(hour=0, minute=0, second=0,
                                                         microsecond=0)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")          # a warning is a meaning not taken: refused
            moment = parser.parse(text, default=today)
        if not _agrees(moment, fields):
            raise ValueError("not a date")
        if moment.tzinfo is None:
            moment = moment.astimezone()         # the local zone, as the person meant it
        value = moment.timestamp()
        # A time alone takes today's date; for a moment to come, one already
        # past means tomorrow (said at 20:00, 08:00 is tomorrow morning).
        if future and fields["day"] is None and value <= now:
            value = (moment + datetime.timedelta(days=1)).timestamp()
    except (ValueError, OverflowError, Warning):
        raise _bad(flag, text) from None
    return value


def _agrees(moment, fields):
    """Did the reader take each typed field as typed (`Dec 32` is no year 2032)?"""
    hour = fields["hour"] and int(fields["hour"])
    if hour is not None and fields["half"]:
        if not 1 <= hour <= 12:
            return False
        hour = hour % 12 + (12 if fields["half"].lower() == "pm" else 0)
    for typed, read in ((fields["year"], moment.year), (fields["month"], moment.month),
                        (fields["day"], moment.day), (hour, moment.hour),
                        (fields["minute"], moment.minute), (fields["second"], moment.second)):
        if typed is not None and int(typed) != read:
            return False
    return True
