"""The one escaper: what crewfile did not write itself reaches a record line or
a terminal only through escape(), which makes it one printable line (no control
character, no line separator); unescape() gives the text back. Beside it, the
numbers read from text someone else wrote (a record's, an environment's)."""

_ESCAPES = {0x5C: "\\\\", 0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t"}
_ESCAPE_TABLE = {c: _ESCAPES.get(c, "\\x%02x" % c)
                 for c in [*range(0x20), *range(0x7F, 0xA0), 0x5C]}
_ESCAPE_TABLE.update({0x2028: "\\u2028", 0x2029: "\\u2029"})
_UNESCAPES = {"\\": "\\", "n": "\n", "r": "\r", "t": "\t"}
_HEX = frozenset("0123456789abcdef")


def ascii_int(text):
    """The number *text* writes in ASCII digits alone, else None: str.isdigit()
    also takes digits such as '²', and int() refuses over 4,300 digits."""
    if not (text.isascii() and text.isdigit()):
        return None
    try:
        return int(text)
    except ValueError:
        return None


def seconds_within(text, default, most):
    """*text* (an environment's value) as seconds in 0..*most*; *default* when
    it is empty or no number. nan is no number: it would switch a check off."""
    try:
        value = float(text or default)
    except ValueError:
        return default
    return min(max(0.0, value), most) if value == value else default


def escape(text):
    """*text* as one printable line (unescape() reverses it): nothing can forge a
    row or reach a terminal as a control sequence."""
    return text.translate(_ESCAPE_TABLE)


def unescape(text):
    if "\\" not in text:
        return text
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c != "\\" or i + 1 == n:
            out.append(c)
            i += 1
            continue
        e = text[i + 1]
        width = 2 if e == "x" else 4 if e == "u" else 0
        digits = text[i + 2:i + 2 + width]
        if (width and len(digits) == width and set(digits) <= _HEX
                and not 0xD800 <= int(digits, 16) <= 0xDFFF):     # a lone surrogate is no text
            out.append(chr(int(digits, 16)))
            i += 2 + width
        else:
            out.append(_UNESCAPES.get(e, "\\" + e))
            i += 2
    return "".join(out)
