"""A session's inbox: notices for its model, machine reports, never captain words.

sessions/NAME/inbox holds records `<ts> <kind>: <id> <text>` (kind `wake`,
`job`, ...; id unique, stable). Posting appends under the session lock.
Draining, under the same lock, copies the pending notices to inbox.read and
empties the inbox, so a notice posted during a drain waits for the next one.
A crash between the copy and the emptying delivers a notice twice, never
loses one: its id lets a reader see the repeat.
"""
import os
import time

from . import logfile, paths, records, spool
from .errors import NotFound

_counter = 0


class Notice:
    __slots__ = ("ts", "kind", "id", "text")

    def __init__(self, ts, kind, id, text):
        self.ts, self.kind, self.id, self.text = ts, kind, id, text

    def as_dict(self):
        return {"ts": self.ts, "kind": self.kind, "id": self.id, "text": self.text}


def new_id(now=None):
    global _counter
    _counter += 1
    now = time.time() if now is None else now
    return f"{int(now * 1000):x}-{os.getpid()}-{_counter}"


def _paths(crew, name):
    sdir = crew.session_dir(name)
    if not os.path.lexists(os.path.join(sdir, paths.META)):
        raise NotFound(f"no session {name!r}")
    return (os.path.join(sdir, paths.INBOX), os.path.join(sdir, paths.INBOX_READ),
            os.path.join(sdir, paths.LOCK))


def post(crew, name, kind, text):
    """Append one notice to NAME's inbox; return its id."""
    return post_many(crew, name, [(kind, None, text)])[0]


def post_many(crew, name, notices):
    """Append notices [(kind, id or None for a new one, text)] in one write; their ids.

    A caller that gives ids (wake-send: the event's own id) can tell a
    notice it posted before a crash from a new one (see ids())."""
    _paths(crew, name)
    out, lines = [], []
    for kind, nid, text in notices:
        nid = nid or new_id()
        out.append(nid)
        lines.append(records.new_line(kind, f"{nid} {text}"))
    spool.append(crew.session_dir(name), paths.INBOX, lines)
    return out


def ids(crew, name, limit_bytes=1 << 22):
    """The ids of the notices pending in NAME's inbox and of the drained ones
    (inbox.read and its rotations; at most limit_bytes of each)."""
    inbox, read, _lock = _paths(crew, name)
    found = set()
    keep = logfile.rotate_limits()[1]
    for path in [inbox] + [logfile.rotated(read, i) for i in range(keep + 1)]:
        for raw in logfile.lines_backwards(path, logfile.TailStats(), limit_bytes):
            n = _parse(raw)
            if n is not None:
                found.add(n.id)
    return found


def _parse(raw):
    rec = records.parse(raw)
    if rec is None:
        return None
    nid, _, text = rec.text.partition(" ")
    return Notice(rec.ts, rec.kind, nid, text)


def pending(crew, name, at=None):
    """The notices waiting in NAME's inbox, oldest first (nothing removed).
    at: NAME's directory, opened by a caller that has read its meta there
    (Session.opened)."""
    if at is None:
        inbox = _paths(crew, name)[0]
    else:
        inbox = os.path.join(crew.session_dir(name), paths.INBOX)
    stats = logfile.TailStats()
    out = [n for n in map(_parse, logfile.lines_backwards(inbox, stats, at=at)) if n]
    out.reverse()
    return out


def drain(crew, name, take=None):
    """Take the pending notices out of NAME's inbox; (notices, skipped garbage).

    take: None for all, or a callable given the pending notices (oldest
    first) that returns how many of the oldest to take; the rest stay
    pending, in order (see drain_part)."""
    taken, _rest, garbage = drain_part(crew, name, take)
    return taken, garbage


def drain_part(crew, name, take=None):
    """drain() that also returns the notices left pending: (taken, rest, garbage).

    Under the session lock: the taken ones are appended to inbox.read, then
    the inbox is emptied (all taken) or atomically replaced by the rest. A
    crash between the two can hand a notice over twice (same id), never
    lose one."""
    inbox, read, _lock = _paths(crew, name)
    with spool.lock(crew.session_dir(name)):
        try:
            fd = paths.open_file(inbox, os.O_RDWR)
        except FileNotFoundError:
            return [], [], 0
        try:
            with os.fdopen(os.dup(fd), "rb") as f:
                data = f.read()
            lines = data.split(b"\n")
            if lines and lines[-1]:
                lines[-1] = b""         # unfinished line: no writer holds the lock, so garbage
            notices, garbage, raws = [], 0, []
            for raw in lines:
                if not raw:
                    continue
                n = _parse(raw)
                if n is None:
                    garbage += 1
                else:
                    notices.append(n)
                    raws.append(raw.decode("utf-8") + "\n")
            k = len(notices) if take is None else max(0, min(len(notices), take(notices)))
            if k == 0 and not garbage:
                return [], notices, 0
            logfile.append_locked(read, raws[:k], rotate=logfile.rotate_limits())
            if k == len(notices):
                os.ftruncate(fd, 0)
            else:
                from .atomic import replace
                replace(inbox, "".join(raws[k:]))
        finally:
            os.close(fd)
    return notices[:k], notices[k:], garbage


def withdraw(crew, name, nid, timeout=None):
    """Take notice *nid* back out of NAME's inbox if it is still pending;
    True if it was (and is now gone for good), False if it was drained (or
    never there). Under the session lock (spool appended first; LockBusy
    after *timeout* seconds), so a drain either handed it over before or
    will never see it. The inbox without it is an atomic, durable replace:
    a crash never brings it back."""
    from .atomic import replace
    inbox = _paths(crew, name)[0]
    with spool.lock(crew.session_dir(name), timeout):
        try:
            fd = paths.open_file(inbox)
        except FileNotFoundError:
            return False
        with os.fdopen(fd, "rb") as f:
            lines = f.read().split(b"\n")
        for i, raw in enumerate(lines[:-1]):        # complete lines only
            n = _parse(raw)
            if n is not None and n.id == nid:
                replace(inbox, b"\n".join(lines[:i] + lines[i + 1:]))
                return True
    return False



def count(crew, name, kind=None, at=None):
    """How many notices (of *kind*, or all) wait in NAME's inbox, without
    making a Notice of each: a view that only counts (crew-status's wakes,
    crew-top's WAKES) then costs a fraction of what pending() does on a
    pending inbox of many megabytes. Counts the complete lines that begin
    as a notice of that kind would: a timestamp, then ` KIND: `. No regular
    expression: `re` would cost crew-status --tmux 20 ms of start-up.
    at: as for pending()."""
    want = b" " if kind is None else f" {kind}: ".encode()
    if at is None:
        path = _paths(crew, name)[0]
    else:
        path = os.path.join(crew.session_dir(name), paths.INBOX)
    try:
        fd = paths.open_file(path, at=at)
    except FileNotFoundError:
        return 0
    n, carry, skipping = 0, b"", False
    try:
        while True:
            data = os.read(fd, 1 << 20)
            if not data:
                return n
            if skipping:            # the rest of a line too long to be a record
                nl = data.find(b"\n")
                if nl < 0:
                    continue
                data, skipping = data[nl + 1:], False
            data = carry + data
            end = data.rfind(b"\n") + 1
            n += sum(1 for line in data[:end].split(b"\n")
                     if line[24:24 + len(want)] == want and len(line) < records.MAX_LINE
                     and records.is_timestamp(line[:24].decode("latin-1")))
            carry = data[end:]
            if len(carry) > records.MAX_LINE:       # memory stays bounded
                carry, skipping = b"", True
    finally:
        os.close(fd)
