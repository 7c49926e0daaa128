"""The command line's numbers (protocol.md, "Durations and numbers"): no flag takes
` 60`, `+5`, `1_000`, `1e3` or a non-ASCII digit (`int("٣")` is 3). No re: start-up.
"""
from crewfile.core.errors import BadInput

MAX_SECONDS = 366 * 86400        # no duration longer than a year
_UNITS = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))
_DIGITS = frozenset("0123456789")
_MAX_DIGITS = 12
GRAMMAR = "a duration such as 90, 90s, 1.5s, 30m, 1h30m or 2d"
# A flag that takes whole seconds only offers examples it accepts.
WHOLE_GRAMMAR = "a whole number of seconds as a duration such as 90, 90s, 30m, 1h30m or 2d"


def _number(text):
    """A non-negative decimal of ASCII digits (`12`, `1.5`), or None."""
    whole, dot, frac = text.partition(".")
    if (not whole or len(whole) + len(frac) > _MAX_DIGITS or not set(whole) <= _DIGITS
            or (dot and (not frac or not set(frac) <= _DIGITS))):
        return None
    return float(text) if dot else int(whole)


def parse_duration(text, flag, positive=True, whole=False, default=None):
    """Seconds in *text* (at most MAX_SECONDS; above 0 if *positive*; an int
    if *whole*); BadInput naming *flag* otherwise; *default* for an option
    not given (None), as an empty one is bad like any other."""
    if text is None:
        return default
    total = _parse(text)
    if total is None or total > MAX_SECONDS:
        grammar = WHOLE_GRAMMAR if whole else GRAMMAR
        raise BadInput(f"bad {flag} {_shown(text)}: {grammar} (at most {MAX_SECONDS // 86400}d)")
    if positive and total <= 0:
        raise BadInput(f"bad {flag} {_shown(text)}: more than 0 seconds")
    if whole:
        if total != int(total):
            raise BadInput(f"bad {flag} {_shown(text)}: a whole number of seconds")
        return int(total)
    return total


def _parse(text):
    if not isinstance(text, str) or not text:
        return None
    bare = _number(text)
    if bare is not None:
        return bare
    total, rest, units = 0, text, _UNITS
    while rest:
        for i, (unit, size) in enumerate(units):
            head, sep, tail = rest.partition(unit)
            if sep and head:
                value = _number(head)
                if value is None:
                    return None
                total += value * size
                rest, units = tail, units[i + 1:]
                break
        else:
            return None
    return total


def parse_count(text, flag, least=0, most=10 ** 6, default=None):
    """A whole number of ASCII digits from *least* to *most*; BadInput naming
    *flag*; *default* for an option not given (None)."""
    if text is None:
        return default
    value = _number(text) if isinstance(text, str) else None
    if type(value) is not int or not least <= value <= most:
        raise BadInput(f"bad {flag} {_shown(text)}: a whole number from {least} to {most}"
                       " (ASCII digits only)")
    return value


def _shown(text):
    """*text* quoted for an error line, cut short if long (a 400-digit number)."""
    return "'" + (text if len(text) <= 40 else text[:40] + "...") + "'"   # escaped once, by the error line
