"""The record line: `<RFC 3339 UTC timestamp, ms> <kind>[: <text>]` (protocol.md,
"Records"); text escaped, so a record is always one line of printable UTF-8.
No re: importing it costs ~6 ms of a command's ~20 ms budget."""
import time

from crewfile.core.errors import BadInput
from crewfile.core.text import escape, unescape

MAX_LINE = 16384          # bytes, newline included
MAX_KIND = 32
_KIND_FIRST = frozenset("abcdefghijklmnopqrstuvwxyz")
_NOT_KIND = str.maketrans("", "", "abcdefghijklmnopqrstuvwxyz0123456789-")
_MIN_MS, _MAX_MS = -62167219200000, 253402300799999     # 0000-01-01 .. 9999-12-31


def timestamp(now=None):
    """RFC 3339 UTC with milliseconds, always 24 characters: a four-digit year
    (strftime's %Y gave `0` for year 0000, which shifted a session name into an
    event's kind), a moment outside 0000..9999 clamped to the nearest end."""
    if now is None:
        now = time.time()
    ms = min(max(int(now * 1000), _MIN_MS), _MAX_MS)
    t = time.gmtime(ms // 1000)
    return "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ" % (
        t.tm_year, t.tm_mon, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec, ms % 1000)


def parse_timestamp(ts):
    """Seconds since the epoch for a record timestamp, by H. Hinnant's
    days_from_civil: calendar.timegm would import datetime, locale and re (~11 ms)."""
    y, m, d = int(ts[0:4]), int(ts[5:7]), int(ts[8:10])
    y -= m <= 2
    era, yoe = divmod(y, 400)
    doy = (153 * (m - 3 if m > 2 else m + 9) + 2) // 5 + d - 1
    days = era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468
    return (days * 86400 + int(ts[11:13]) * 3600 + int(ts[14:16]) * 60 + int(ts[17:19])
            + int(ts[20:23]) / 1000)


_RAW_CONTROLS = bytes([*range(0x20), 0x7F])


def printable_line(raw):
    """A record line (bytes, no newline) with its text escaped: itself when it
    already is (checked on bytes), else re-encoded (a hand-written line may not be)."""
    if len(raw.translate(None, _RAW_CONTROLS)) == len(raw) and (
            raw.isascii() or (b"\xc2" not in raw and b"\xe2\x80\xa8" not in raw
                              and b"\xe2\x80\xa9" not in raw)):
        return raw
    rec = parse(raw)
    if rec is None:
        return escape(raw.decode("utf-8", "replace")).encode()
    text = escape(rec.text)
    return f"{rec.ts} {rec.kind}: {text}".encode() if text else f"{rec.ts} {rec.kind}".encode()


def is_kind(kind):
    # One C call (a state query checks thousands): delete the allowed characters.
    return (isinstance(kind, str) and 0 < len(kind) <= MAX_KIND and kind[0] in _KIND_FIRST
            and not kind.translate(_NOT_KIND))


def check_kind(kind):
    if not is_kind(kind):
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
    if not is_timestamp(raw[:24]) or raw[24:25] != " " or "\n" in raw:
        return None
    kind, sep, text = raw[25:].partition(": ")
    if not is_kind(kind):
        return None
    return Record(raw[:24], kind, unescape(text))


_TS_DIGITS = bytes.maketrans(b"123456789", b"000000000")
_TS_SHAPE = b"0000-00-00T00:00:00.000Z"


def is_timestamp(ts):
    """True for `YYYY-MM-DDTHH:MM:SS.mmmZ` exactly: every digit made a 0, one C
    call (listings check three per job)."""
    return len(ts) == 24 and ts.isascii() and ts.encode().translate(_TS_DIGITS) == _TS_SHAPE


def bounded_lines(stream, limit=MAX_LINE):
    """The lines of a binary stream (newline stripped) in constant memory; a line
    longer than *limit* is drained and yielded as None."""
    while True:
        line = stream.readline(limit + 1)
        if not line:
            return
        if line.endswith(b"\n"):
            yield line[:-1]
        elif len(line) <= limit:
            yield line                    # the last line, without a newline
        else:
            while line and not line.endswith(b"\n"):
                line = stream.readline(1 << 16)
            yield None
