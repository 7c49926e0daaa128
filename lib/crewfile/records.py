"""The record line: `<RFC 3339 UTC timestamp, ms> <kind>[: <text>]`.

One format serves status logs, inboxes and (with a session name inserted) the
event stream. Text is escaped so that a record is always exactly one line of
printable UTF-8: a reader splitting on b"\\n" can never see half a record.
"""
import re
import time

from .errors import BadInput

MAX_LINE = 16384          # bytes, newline included
MAX_KIND = 32
KIND_RE = re.compile(r"[a-z][a-z0-9-]*\Z")
_RECORD_RE = re.compile(
    r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z) ([a-z][a-z0-9-]*)(?:: (.*))?\Z", re.S)
_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_UNESCAPES = {"\\": "\\", "n": "\n", "r": "\r", "t": "\t"}
_NEEDS_ESCAPE = re.compile("[\\\\\x00-\x1f\x7f-\x9f\u2028\u2029]")
_ESCAPED = re.compile(r"\\(x[0-9a-f]{2}|u[0-9a-f]{4}|.)", re.S)


def timestamp(now=None):
    """RFC 3339 UTC with milliseconds, e.g. 2026-11-29T22:01:17.123Z."""
    if now is None:
        now = time.time()
    ms = int(now * 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + ".%03dZ" % (ms % 1000)


def parse_timestamp(ts):
    """Seconds since the epoch for a record timestamp (no time-zone lookups)."""
    import calendar
    return calendar.timegm((int(ts[0:4]), int(ts[5:7]), int(ts[8:10]), int(ts[11:13]),
                            int(ts[14:16]), int(ts[17:19]), 0, 0, 0)) + int(ts[20:23]) / 1000


def _escape_char(m):
    c = m.group(0)
    if c in _ESCAPES:
        return _ESCAPES[c]
    n = ord(c)
    return "\\x%02x" % n if n < 0x100 else "\\u%04x" % n


def escape(text):
    """Make *text* one printable line; reversible with unescape()."""
    return _NEEDS_ESCAPE.sub(_escape_char, text)


def _unescape_seq(m):
    s = m.group(1)
    if s[0] in "xu" and len(s) > 1:
        return chr(int(s[1:], 16))
    return _UNESCAPES.get(s, "\\" + s)


def unescape(text):
    return _ESCAPED.sub(_unescape_seq, text)


def check_kind(kind):
    if not isinstance(kind, str) or not KIND_RE.match(kind) or len(kind) > MAX_KIND:
        raise BadInput(f"bad kind {kind!r}: a lower-case word of letters, digits and"
                       f" hyphens, at most {MAX_KIND} characters")
    return kind


class Record:
    """One parsed record; `text` is unescaped ('' when the record has none)."""
    __slots__ = ("ts", "kind", "text")

    def __init__(self, ts, kind, text=""):
        self.ts, self.kind, self.text = ts, kind, text

    @property
    def time(self):
        return parse_timestamp(self.ts)

    def line(self):
        """The record as it is written: one line, newline included."""
        return format_line(self.ts, self.kind, self.text)

    def __repr__(self):
        return f"Record({self.ts!r}, {self.kind!r}, {self.text!r})"

    def __eq__(self, other):
        return isinstance(other, Record) and (self.ts, self.kind, self.text) == (
            other.ts, other.kind, other.text)


def format_line(ts, kind, text=""):
    """Build and check one record line; raises BadInput if it cannot be written."""
    check_kind(kind)
    line = f"{ts} {kind}: {escape(text)}\n" if text else f"{ts} {kind}\n"
    try:
        data = line.encode("utf-8")
    except UnicodeEncodeError:
        raise BadInput("text is not valid UTF-8") from None
    if len(data) > MAX_LINE:
        raise BadInput(f"record longer than {MAX_LINE} bytes ({len(data)})")
    return line


def new_line(kind, text="", now=None):
    return format_line(timestamp(now), kind, text)


def parse(raw):
    """Parse one line (bytes or str, with or without newline); None if garbage."""
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError:
            return None
    if raw.endswith("\n"):
        raw = raw[:-1]
    m = _RECORD_RE.match(raw)
    if not m or "\n" in raw:
        return None
    text = m.group(3) or ""
    return Record(m.group(1), m.group(2), unescape(text) if "\\" in text else text)
