"""A session's inbox: notices for its model, machine reports, never captain words.

The file, its drain (rename first, then read) and why a notice may come
twice but is never lost: docs/files/inbox.md.
"""
import itertools
import os
import time

from crewfile.core import logfile, logwrite, paths, records
from crewfile.core.atomic import replace
from crewfile.core.errors import CrewfileError, NotFound
from crewfile.core.locks import LockBusy, hold, note_without
from crewfile.core.text import ascii_int

TAKING = ".taking"      # inbox.taking: what a drain is taking, or left pending
MOVING = ".moving"      # inbox.moving: an inbox on its way onto inbox.taking
COUNT_LIMIT = 1 << 20   # bytes count() reads at most (some 4,000 wakes): a view's cost stays bounded
_counter = itertools.count(1)


class Notice:
    __slots__ = ("ts", "kind", "id", "text")

    def __init__(self, ts, kind, id, text):
        self.ts, self.kind, self.id, self.text = ts, kind, id, text

    def as_dict(self):
        return {"ts": self.ts, "kind": self.kind, "id": self.id, "text": self.text}


def new_id():
    return f"{int(time.time() * 1000):x}-{os.getpid()}-{next(_counter)}"


def _paths(crew, name):
    sdir = crew.session_dir(name)
    if not os.path.lexists(os.path.join(sdir, paths.META)):
        raise NotFound(f"no session '{name}'")
    return (os.path.join(sdir, paths.INBOX), os.path.join(sdir, paths.INBOX_READ),
            os.path.join(sdir, paths.LOCK))


def post(crew, name, kind, text):
    """Append one notice to NAME's inbox; return its id."""
    return post_many(crew, name, [(kind, None, text)])[0]


def post_many(crew, name, notices):
    """Append notices [(kind, id or None for a new one, text)] in one write; their ids.
    Past this process's bound on lock waits they go without the lock, and a
    line naming the holder is kept for the command to say (locks.take_notes)."""
    inbox, _read, lock = _paths(crew, name)
    out, lines = [], []
    for kind, nid, text in notices:
        nid = nid or new_id()
        out.append(nid)
        lines.append(records.new_line(kind, f"{nid} {text}"))
    try:
        held = hold(lock)
    except LockBusy as e:
        # Each time round, a drain renamed the inbox after we opened it:
        # that takes the lock, so the loop ends once the drains do.
        while not logwrite.append_unlocked(inbox, lines):
            pass
        note_without(e, f"posted to {inbox} without it")
        return out
    with held:
        logwrite.append_locked(inbox, lines)
    return out


def posted(crew, name, timeout=None):
    """(id, text) of the notices pending in NAME's inbox and of the drained
    ones (inbox.read and its rotations; at most 4 MiB of each). Under the
    lock (LockBusy after *timeout* s): a drain moves notices from file to
    file, and one read while it does so could be in none of them when each
    was read."""
    lock = _paths(crew, name)[2]
    with hold(lock, timeout):
        recs = logfile.records_backwards(every_file(crew, name), logfile.TailStats(), 1 << 22)
        return {tuple(rec.text.split(" ", 1)) if " " in rec.text else (rec.text, "")
                for rec in recs}


def ids(crew, name, timeout=None):
    """The ids of posted()'s notices."""
    return {nid for nid, _text in posted(crew, name, timeout)}


def every_file(crew, name):
    """The files a notice of NAME may be in: pending (oldest first), then drained."""
    sdir = crew.session_dir(name)
    read = os.path.join(sdir, paths.INBOX_READ)
    return _waiting(os.path.join(sdir, paths.INBOX)) + [
        logfile.rotated(read, i) for i in range(logfile.rotate_limits()[1] + 1)]


def _parse(raw):
    rec = records.parse(raw)
    if rec is None:
        return None
    nid, _, text = rec.text.partition(" ")
    return Notice(rec.ts, rec.kind, nid, text)


def _waiting(inbox):
    """The files that hold NAME's pending notices, oldest first."""
    return [inbox + TAKING, inbox + MOVING, inbox]


def pending(crew, name):
    """The notices waiting in NAME's inbox, oldest first (nothing removed)."""
    return [n for path in _waiting(_paths(crew, name)[0])
            for raw in _whole_lines(path).split(b"\n") if len(raw) < records.MAX_LINE
            if (n := _parse(raw)) is not None]


def _whole_lines(path):
    """The complete lines of *path* (b"" when absent): a last line without a
    newline is a dead writer's, or a poster's that writes it again."""
    data = paths.read_bytes(path) or b""
    return data[:data.rfind(b"\n") + 1]


def _gather(inbox):
    """Under the session lock: what waits, gathered into inbox.taking
    (docs/files/inbox.md); its path."""
    taking, moving = inbox + TAKING, inbox + MOVING
    if not os.path.lexists(moving):
        try:
            os.close(paths.open_file(inbox))    # a link or a FIFO is refused, not moved
            os.rename(inbox, taking if not os.path.lexists(taking) else moving)
        except FileNotFoundError:
            pass
        if not os.path.lexists(moving):
            return taking
    logwrite.append_locked(taking, _whole_lines(moving))
    os.unlink(moving)
    return taking


def drain(crew, name, take=None):
    """Take the pending notices out of NAME's inbox; (notices, skipped garbage)."""
    taken, _rest, garbage = drain_part(crew, name, take)
    return taken, garbage


def drain_part(crew, name, take=None, offer_to=None):
    """drain() that also returns the notices left pending: (taken, rest, garbage).
    take(pending) says how many of the oldest to take (None: all); offer_to()
    names the agent life (pid, start, transcript) they are `offered` to."""
    inbox, read, lock = _paths(crew, name)
    with hold(lock):
        taking = _gather(inbox)
        data = _whole_lines(taking)
        garbage = 0
        notices, raws = [], []
        for raw in data.split(b"\n"):
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
            if not notices and os.path.lexists(taking):
                os.unlink(taking)          # an empty inbox, renamed
            return [], notices, 0
        if offer_to is not None and k:
            # Before inbox.read: a crash between the two repeats a notice, never loses it.
            _offer(os.path.join(os.path.dirname(inbox), paths.OFFERED), offer_to(), raws[:k])
        logwrite.append_locked(read, raws[:k], rotate=logfile.rotate_limits())
        if k == len(notices):
            os.unlink(taking)
        else:
            replace(taking, "".join(raws[k:]))
    return notices[:k], notices[k:], garbage


OFFERED_HEAD = "agent"
TRANSCRIPT_TAIL = 8 << 20   # bytes of an agent's transcript searched for offered ids


def _offer(path, life, raws):
    """Record *raws* (whole notice lines) as offered to *life*, with any
    still recorded there (the same hand-over's earlier part), atomically."""
    pid, start, transcript = life
    old = _read_offered(path)
    head = " ".join([OFFERED_HEAD, "-" if pid is None else str(pid),
                     "-" if start is None else str(start),
                     transcript if transcript and "\n" not in transcript else "-"])
    replace(path, "".join([head + "\n"] + (old[1] if old else []) + raws))


def _read_offered(path):
    """(life, raws) of an offered file, or None when absent or without its
    head line. life: (pid, start, transcript), each None where unknown."""
    data = _whole_lines(path)
    if not data.startswith(OFFERED_HEAD.encode() + b" "):
        return None
    head, _, body = data.partition(b"\n")
    fields = head.decode("utf-8", "replace").split(" ", 3) + ["-"] * 3
    pid, start = (ascii_int(f) for f in fields[1:3])
    transcript = None if fields[3] == "-" else fields[3]
    raws = [raw.decode("utf-8", "replace") + "\n" for raw in body.split(b"\n")
            if raw and _parse(raw) is not None]
    return (pid, start, transcript), raws


def offered(crew, name):
    """NAME's notices handed to an agent and not yet confirmed: (life, notices)
    or None (docs/files/inbox.md, `offered`)."""
    got = _read_offered(os.path.join(crew.session_dir(name), paths.OFFERED))
    if got is None:
        return None
    return got[0], [_parse(raw.encode()) for raw in got[1]]


def settle(crew, name, went_on):
    """Settle NAME's offered notices, if any (one stat when there are none;
    docs/files/inbox.md): went_on(pid, start) says the life that took them
    went on past the hand-over. Returns how many were put back."""
    path = os.path.join(crew.session_dir(name), paths.OFFERED)
    if not os.path.lexists(path):
        return 0
    inbox, _read, lock = _paths(crew, name)
    with hold(lock):
        got = _read_offered(path)
        back = []
        if got is not None and not went_on(*got[0][:2]):
            seen = _in_transcript(got[0][2], [_parse(r.encode()).id for r in got[1]])
            taking = _gather(inbox)
            waiting = _whole_lines(taking)
            there = {n.id for n in map(_parse, waiting.split(b"\n")) if n is not None}
            back = [r for r in got[1] if _parse(r.encode()).id not in seen | there]
            if back:
                replace(taking, "".join(back).encode("utf-8") + waiting)
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    return len(back)


def _in_transcript(path, wanted):
    """Which of the ids *wanted* the last TRANSCRIPT_TAIL bytes of the agent's
    transcript name (the CLI writes a hook's context there before it sends it,
    and a resumed agent sends it again). Unreadable: none."""
    if not path or not wanted:
        return set()
    want = {nid.encode(): nid for nid in wanted}
    found = set()
    try:        # the one tail reader, as for every other transcript
        for line in logfile.lines_backwards(path, logfile.TailStats(), TRANSCRIPT_TAIL,
                                            max_line=None, outside=True, only=tuple(want)):
            found.update(nid for raw, nid in want.items() if raw in line)
            if len(found) == len(want):
                break
    except (OSError, CrewfileError):
        return set()
    return found


def withdraw(crew, name, nid, timeout=None):
    """Take notice *nid* back out of NAME's inbox if it is still pending;
    True if it was (and is now gone for good), False if it was drained (or
    never there). Under the session lock (LockBusy after *timeout* s)."""
    inbox, _read, lock = _paths(crew, name)
    with hold(lock, timeout):
        taking = _gather(inbox)
        lines = _whole_lines(taking).split(b"\n")
        for i, raw in enumerate(lines):
            n = _parse(raw) if raw else None
            if n is not None and n.id == nid:
                replace(taking, b"\n".join(lines[:i] + lines[i + 1:]))
                return True
    return False


def count(crew, name, kind=None, at=None, limit=COUNT_LIMIT):
    """How many notices (of *kind*, or all) wait in NAME's inbox: (n, more),
    reading at most *limit* bytes (docs/files/inbox.md, "Counting readers").
    No `re`: it would cost crew-status --tmux 20 ms of start-up."""
    if at is None:
        inbox = _paths(crew, name)[0]
    else:                       # the caller has checked NAME's meta there
        inbox = os.path.join(crew.session_dir(name), paths.INBOX)
    n, left = 0, limit
    for path in _waiting(inbox):
        got, read, more = _count(path, kind, at, left)
        n, left = n + got, None if left is None else left - read
        if more:
            return n, True
    return n, False


def has(crew, name, kind):
    """True if a notice of *kind* waits in NAME's inbox: read up to the
    first one (a hook asks this on every Stop; pending() would make a
    notice of every line)."""
    inbox = _paths(crew, name)[0]
    return any(_count(path, kind, None, None, first=True)[0] for path in _waiting(inbox))


def _count(path, kind, at, limit, first=False):
    """count() of one of the files where notices wait: (n, bytes read, more
    left unread past *limit*, None for no limit). first: stop at the first."""
    want = b" " if kind is None else f" {kind}: ".encode()
    try:
        fd = paths.open_file(path, at=at)
    except FileNotFoundError:
        return 0, 0, False
    n, carry, skipping, read = 0, b"", False, 0
    try:
        while True:
            size = 1 << 20 if limit is None else min(1 << 20, limit - read)
            data = os.read(fd, size) if size > 0 else b""
            if not data:
                # at the limit: more if the file goes on
                return n, read, size <= 0 and bool(os.read(fd, 1))
            read += len(data)
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
            if first and n:
                return n, read, False
            carry = data[end:]
            if len(carry) > records.MAX_LINE:       # memory stays bounded
                carry, skipping = b"", True
    finally:
        os.close(fd)
