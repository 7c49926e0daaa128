"""An append-only file of records read: the one tail reader, backwards in
blocks, so a query costs the same on a long log as on a new one, and the
names rotation gives (logwrite.py appends and rotates: a reader such as the
status line never loads a lock or a writer)."""
import os

from crewfile.core import jsonio, paths, records

BLOCK = 65536
SHARED = 64         # records a question of a state query parses before reading on alone (Backwards)
DEFAULT_ROTATE_BYTES = 1 << 20
DEFAULT_KEEP = 5
MAX_KEEP = 1000


def rotate_limits():
    """(bytes, keep) from CREWFILE_ROTATE_BYTES / CREWFILE_ROTATE_KEEP, bounded: a
    stray huge keep would make every reader list that many file names."""
    env = os.environ
    try:
        size = int(env.get("CREWFILE_ROTATE_BYTES") or DEFAULT_ROTATE_BYTES)
        keep = int(env.get("CREWFILE_ROTATE_KEEP") or DEFAULT_KEEP)
    except ValueError:
        size, keep = DEFAULT_ROTATE_BYTES, DEFAULT_KEEP
    return max(size, records.MAX_LINE), min(max(keep, 1), MAX_KEEP)


def rotated(path, i):
    return path if i == 0 else f"{path}.{i}"


def lines_end(fd, size, within=None):
    """The offset just past the last complete line in the first *size* bytes
    (0 if none). *within*: look back no further than that many bytes, and
    past them take the place the search stopped (an overlong line's middle)."""
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return size
    floor = 0 if within is None else max(0, size - within)
    keep = size
    while keep > floor:
        start = max(floor, keep - BLOCK)
        nl = os.pread(fd, keep - start, start).rfind(b"\n")
        if nl >= 0:
            return start + nl + 1
        keep = start
    return floor


class TailStats:
    """What a backwards read skipped, so a command can say so."""
    __slots__ = ("partial", "garbage")

    def __init__(self):
        self.partial = self.garbage = 0

    def warning(self):
        parts = []
        if self.partial:
            parts.append("a partial trailing line")
        if self.garbage:
            parts.append(f"{self.garbage} malformed line{'s' if self.garbage != 1 else ''}")
        return "skipped " + " and ".join(parts) if parts else ""


def objects_backwards(path, limit_bytes, marks):
    """The JSON objects of another program's JSON-lines file (an agent's
    transcript, a Codex rollout: read through links), newest first, within
    *limit_bytes* of its end. Only a line naming one of *marks* (bytes) is
    parsed; one that is not a JSON object is skipped."""
    for line in lines_backwards(path, TailStats(), limit_bytes, max_line=None, outside=True,
                                only=tuple(marks)):
        try:
            entry = jsonio.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            yield entry


def lines_backwards(path, stats, limit_bytes=None, max_line=records.MAX_LINE, outside=False,
                    at=None, ended=False, only=None):
    """Yield the complete lines of *path* (bytes, no newline), last first, reading
    back at most *limit_bytes*. A line over *max_line* is garbage, dropped and
    counted (memory stays bounded). ended: the file is whole (a job's output),
    its text after the last newline is a line. outside, at: as for open_file.
    only: byte strings; just the lines holding one of them are yielded, found
    by bytes.find (a block holding none costs one search per string, no split
    into lines)."""
    try:
        fd, st = paths.open_stat(path, outside=outside, at=at)
    except FileNotFoundError:
        return
    try:
        floor = 0 if limit_bytes is None else max(0, st.st_size - limit_bytes)
        pos, carry = st.st_size, b""
        # The text after the last newline is a fragment to drop: empty when the
        # file ends with a newline, else a record still being written; told by
        # the first block read. dropping: the next piece split off is dropped
        # (that fragment, or the rest of a line too long to hold).
        dropping = None
        while pos > floor:
            n = min(BLOCK, pos - floor)
            pos -= n
            block = os.pread(fd, n, pos)
            if dropping is None:
                closed = len(block) == n and block.endswith(b"\n")
                if not closed and not ended:
                    stats.partial += 1
                dropping = closed or not ended
            chunk = block + carry
            if only is None:
                carry, *tail = chunk.split(b"\n")
            else:
                carry, newline, rest = chunk.partition(b"\n")
                tail = _holding(rest, only) if newline else []
            if tail:
                if dropping:
                    tail.pop()
                    dropping = False
                yield from (line for line in reversed(tail) if line is not None)
            elif dropping:
                carry = b""
                continue
            if max_line is not None and len(carry) > max_line and pos > floor:
                stats.garbage += 1          # garbage too long to hold: dropped, counted once
                carry, dropping = b"", True
        if (pos == 0 and not dropping and (carry or ended and st.st_size > 0)
                and (only is None or any(mark in carry for mark in only))):
            yield carry
    finally:
        os.close(fd)


def _holding(text, marks):
    """text.split(b"\n"), less the pieces that hold none of *marks*, found by
    search, not by a look at every line; its last piece stays, None unless
    it holds one (lines_backwards drops it when it is a fragment)."""
    starts = set()
    for mark in marks:
        at = text.find(mark)
        while at >= 0:
            starts.add(text.rfind(b"\n", 0, at) + 1)
            end = text.find(b"\n", at)
            at = -1 if end < 0 else text.find(mark, end)
    last = text.rfind(b"\n") + 1
    pieces = [text[start:text.index(b"\n", start)] for start in sorted(starts) if start != last]
    pieces.append(text[last:] if last in starts else None)
    return pieces


def _parsed(lines, stats):
    for raw in lines:
        rec = records.parse(raw)
        if rec is None:
            stats.garbage += 1
        else:
            yield rec


def records_backwards(paths, stats, limit_bytes=None):
    """Parsed records of several files (newest file first), last record first."""
    for path in paths:
        yield from _parsed(lines_backwards(path, stats, limit_bytes), stats)


class Backwards:
    """One backwards read shared by the questions of one state query: each file
    read once, no further back than *limit_bytes* over the file and its
    rotations together (protocol.md: "the last 1 MiB of the log")."""
    __slots__ = ("paths", "stats", "limit", "at", "_gen", "_seen")

    def __init__(self, paths, stats, limit_bytes=None, at=None):
        self.paths, self.stats, self.limit, self.at = paths, stats, limit_bytes, at
        # A generator of the module, not a method: one holding self would make a
        # cycle, and crew-status (the cyclic collector off) would keep each file open.
        self._gen = _records_within(paths, stats, limit_bytes, at)
        self._seen = []

    def __iter__(self):
        i = 0
        while True:
            if i == len(self._seen):
                rec = next(self._gen, None)
                if rec is None:
                    return
                self._seen.append(rec)
            yield self._seen[i]
            i += 1

    def last_of(self, kinds):
        """The newest record whose kind is in *kinds*, or None. Past the first
        SHARED records, a read of its own parses only the lines naming one of
        *kinds*: the newest `registered` of a long life lies a MiB back, and
        parsing every record on the way cost the status line 40 ms a session."""
        for i, rec in enumerate(self):
            if rec.kind in kinds:
                return rec
            if i + 1 == SHARED:
                marks = tuple(f" {kind}".encode() for kind in kinds)
                return next((rec for rec in _records_within(self.paths, TailStats(), self.limit,
                                                            self.at, marks)
                             if rec.kind in kinds), None)
        return None

    def last(self):
        """The newest record, or None, with no byte limit: a log whose last
        *limit_bytes* hold no record at all is read further back."""
        rec = next(iter(self), None)
        if rec is not None or self.limit is None:
            return rec
        found = last_records(self.paths, 1, TailStats())
        return found[0] if found else None


def _records_within(paths, stats, left, at, only=None):
    """Backwards' read: the records of *paths*, last first, *left* bytes at most
    over them all. Past the current file, the directory (*at*) is listed once,
    so a rotation not there (most logs have none) costs no open. only: as for
    lines_backwards."""
    names = None
    for i, path in enumerate(paths):
        if left is not None and left <= 0:
            return
        base = path.rpartition("/")[2]
        if i == 1 and at is not None:
            try:
                names = frozenset(os.listdir(at))
            except OSError:
                pass                # every rotation tried
        if names is not None and base not in names:
            continue
        yield from _parsed(lines_backwards(path, stats, left, at=at, only=only), stats)
        if left is not None:
            try:
                left -= os.lstat(path if at is None else base, dir_fd=at).st_size
            except OSError:
                pass


def last_records(paths, n, stats, since=None):
    """The last *n* records (None: no limit), oldest first; with *since*
    (seconds since the epoch), none older than it."""
    out = []
    if n == 0:
        return out
    for rec in records_backwards(paths, stats):
        if since is not None and rec.time < since:
            break
        out.append(rec)
        if len(out) == n:
            break
    out.reverse()
    return out
