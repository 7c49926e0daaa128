"""Wakes: which events are worth a turn of the primary (the filter), and
how they reach it (the sender).

The filter reads event lines `<ts> <session> <kind>[: <text>]` (what
crew-watch prints) and keeps those that should wake the primary:

- exempt sessions (every aside): only their conclusion and real problems
  (EXEMPT_PASS). The turn-by-turn and idle churn of a captain's conversation
  never wakes anyone;
- normal sessions: the actionable kinds (NORMAL_PASS); a repeat of the same
  kind from the same session with no other event of that session in between
  is folded into the first; after `paused` (a bounded human wait, not a
  wedge) its `idle` and `stale` are held until other activity;
- a primary session: nothing passes (its own turns must not wake it);
- a session without metadata: every line passes (waking is safer than
  losing); a line that is not an event passes unchanged, with a warning.

The class comes from sessions/NAME/meta ("exempt"), cached and re-read when
the file's identity (inode, mtime, size) changes, checked at most once per
input chunk and at every `registered` event.

Input is read in chunks of whatever is available and each chunk's output is
written in one write() before the next read: a live stream gets each line at
once, a file gets no system call per line, and nothing depends on
PYTHONUNBUFFERED.
"""
import os

from . import paths

EXEMPT_PASS = frozenset({"concluded", "problem", "blocked", "error", "lost"})
NORMAL_PASS = frozenset({"turn-ended", "done", "concluded", "blocked", "problem", "error",
                         "stale", "lost", "waiting", "ended"})
HELD_WHILE_PAUSED = frozenset({"idle", "stale"})
KEEPS_PAUSE = frozenset({"idle", "stale", "paused"})     # other kinds end a human wait
UNKNOWN, NORMAL, EXEMPT, PRIMARY = 0, 1, 2, 3
_CHUNK = 1 << 18

# Per-session slots (a list, for speed): class, meta identity, chunk checked,
# last kind seen, paused.
_CLS, _KEY, _GEN, _LAST, _PAUSED = range(5)
assert (NORMAL, EXEMPT, PRIMARY) == (1, 2, 3)     # spelled as numbers in Filter._lines


class Filter:
    """feed(bytes) -> bytes to print; finish() -> bytes for a last partial line."""

    def __init__(self, crew, normal_pass=NORMAL_PASS, exempt_pass=EXEMPT_PASS, warn=None):
        self.sessions_dir = crew.sub(paths.SESSIONS) if crew is not None else None
        self.normal = frozenset(k.encode() for k in normal_pass)
        self.exempt = frozenset(k.encode() for k in exempt_pass)
        self.warn = warn or _warn
        self.state = {}
        self.gen = 0
        self.carry = b""
        self.bad = 0
        # kind word as read (b"idle", b"blocked:") -> the kind, one object per kind
        self._bare, self._texted, self._canon = {}, {}, {}

    def feed(self, data):
        data = self.carry + data
        lines = data.split(b"\n")
        self.carry = lines.pop()
        return self._lines(lines)

    def finish(self):
        """The input ended: a last line without a newline is still judged."""
        if not self.carry:
            return b""
        line, self.carry = self.carry, b""
        return self._lines([line])

    def _lines(self, lines):
        self.gen += 1
        gen = self.gen
        out = []
        keep = out.append
        state = self.state
        bare, texted = self._bare, self._texted
        normal, exempt = self.normal, self.exempt
        keeps_pause, held_paused = KEEPS_PAUSE_B, HELD_WHILE_PAUSED_B
        for line in lines:
            parts = line.split(b" ", 3)
            n = len(parts)
            if n == 4:
                kind = texted.get(parts[2])
            elif n == 3:
                kind = bare.get(parts[2])
            else:
                self._bad(line, keep)
                continue
            if kind is None or len(parts[0]) != 24:
                kind = self._kind(parts[2], n == 4) if len(parts[0]) == 24 else None
                if kind is None:
                    self._bad(line, keep)
                    continue
            st = state.get(parts[1])
            if st is None or st[2] != gen or kind == b"registered":
                st = self._refresh(parts[1], st, gen)
                if st is None:
                    self._bad(line, keep)
                    continue
            # slots: 0 class, 1 meta identity, 2 chunk checked, 3 last kind, 4 paused
            cls = st[0]
            if cls == 1:        # NORMAL
                if kind == b"paused":
                    st[4] = True
                    ok = False if kind not in normal else kind is not st[3]
                elif st[4]:
                    if kind not in keeps_pause:
                        st[4] = False
                        ok = kind in normal and kind is not st[3]
                    else:
                        ok = kind not in held_paused and kind in normal and kind is not st[3]
                else:
                    ok = kind in normal and kind is not st[3]
            elif cls == 2:      # EXEMPT
                ok = kind in exempt and kind is not st[3]
            elif cls == 3:      # PRIMARY
                ok = False
            else:
                ok = True
            st[3] = kind
            if ok:
                keep(line)
        if not out:
            return b""
        out.append(b"")
        return b"\n".join(out)

    def _kind(self, word, has_text):
        """Validate a kind word once and cache it (None: not a kind)."""
        from .records import is_kind
        kind = word
        if has_text:
            if not word.endswith(b":"):
                return None
            kind = word[:-1]
        try:
            ok = is_kind(kind.decode("ascii"))
        except UnicodeDecodeError:
            ok = False
        if not ok:
            return None
        kind = self._canon.setdefault(kind, kind)      # `is` compares kinds in the loop
        (self._texted if has_text else self._bare)[word] = kind
        return kind

    def _refresh(self, name, st, gen):
        """The session's slots, its class re-read if its meta file changed."""
        if st is None:
            try:
                text = name.decode("utf-8")
                from .names import check_name
                check_name(text)
            except Exception:
                return None
            st = [UNKNOWN, None, gen, None, False]
            self.state[name] = st
        st[_GEN] = gen
        if self.sessions_dir is None:
            return st
        meta = os.path.join(self.sessions_dir, name.decode("utf-8"), paths.META)
        try:
            s = os.stat(meta, follow_symlinks=False)
            key = (s.st_ino, s.st_mtime_ns, s.st_size)
        except OSError:
            key = None
        if key == st[_KEY] and st[_KEY] is not None:
            return st
        st[_KEY] = key
        st[_CLS] = UNKNOWN if key is None else _class_of(meta)
        return st

    def _bad(self, line, keep):
        self.bad += 1
        if self.bad <= 100:
            self.warn(f"not an event line, passed on unchanged: {line[:80]!r}")
        elif self.bad == 101:
            self.warn("more lines that are not events; no further warnings")
        keep(line)


KEEPS_PAUSE_B = frozenset(k.encode() for k in KEEPS_PAUSE)
HELD_WHILE_PAUSED_B = frozenset(k.encode() for k in HELD_WHILE_PAUSED)


def _class_of(meta_path):
    from .errors import CrewfileError
    from .shapes import load
    try:
        meta = load(meta_path, "meta")
    except CrewfileError:
        return UNKNOWN
    if meta is None:
        return UNKNOWN
    if meta.get("kind") == "primary":
        return PRIMARY
    return EXEMPT if meta.get("exempt") else NORMAL


def filter_stream(flt, fd_in=0, fd_out=1):
    """Run *flt* from fd_in to fd_out: one write per chunk read, before the next read."""
    from .atomic import write_all
    while True:
        data = os.read(fd_in, _CHUNK)
        if not data:
            break
        out = flt.feed(data)
        if out:
            write_all(fd_out, out)
    out = flt.finish()
    if out:
        write_all(fd_out, out)


def _warn(msg):
    import sys
    sys.stderr.write(f"wake-filter: {msg}\n")
    sys.stderr.flush()


# -- wake-send ----------------------------------------------------------------

DEFAULT_SAY = "crewfile: {n} waiting from {from}; run: inbox-drain {primary}"
DEFAULT_WINDOW = 0.5
DEFAULT_RETRY = 2.0
LOCK_WAIT = 1.0     # the longest wake-send waits for the primary's lock (then: the spool)


class Sender:
    """Post each wake to the primary's inbox at once; announce bursts in its pane.

    wake(line) appends the event line as a `wake` notice (durable first:
    nothing is lost if typing fails). tick() is called when due(): a window
    after the first wake of a burst, it types one line (through
    delivery.deliver: live, idle, no dialog, no captain typing, re-checked
    before Enter) naming how many wake notices wait in the inbox and from
    whom. The count is read from the inbox itself, so wakes drained in the
    meantime (by the primary's hook) are not announced. A refused delivery
    is retried every *retry* seconds while unannounced wakes wait; once
    announced, a wake is not announced again.

    A primary whose lock is stuck (held past LOCK_WAIT) does not stop the
    stream: its wakes are kept in its spool (said once, naming the holder)
    and appended when the lock frees; until a post gets the lock again,
    posts do not wait for it.
    """

    def __init__(self, crew, primary, window=DEFAULT_WINDOW, retry=DEFAULT_RETRY, say=DEFAULT_SAY,
                 log=None, clock=None, deliver=None, warn=None):
        import time
        from .sessions import Session
        self.crew = crew
        self.sess = Session(crew, primary)
        self.sess.meta      # NotFound for an unknown primary
        self.primary = primary
        self.window, self.retry, self.say = window, retry, say
        self.log = log or (lambda msg: None)
        self.warn = warn or self.log
        self.stuck = False          # the primary's lock was stuck at the last post
        self.clock = clock or time.monotonic
        self._deliver = deliver
        self.due_at = None          # when to try to announce; None: nothing to announce
        self.announced = set()      # ids of wake notices already announced

    def wake(self, line):
        """Post one event line (str, no newline) as a wake notice."""
        from . import inbox
        name = line.split(" ", 2)[1] if line.count(" ") >= 2 else ""
        if name == self.primary:
            return None         # the primary's own events never wake it
        if len(line) > 8192:
            line = line[:8192] + " [cut]"     # a notice must stay within one record
        from . import locks, spool
        old = locks.bound_waits(0 if self.stuck else LOCK_WAIT)
        try:
            nid = inbox.post(self.crew, self.primary, "wake", line)
        finally:
            locks.restore_waits(old)
        if spool.kept:
            if not self.stuck:
                self.warn(spool.kept[-1])
            self.stuck = True
            spool.kept.clear()
        elif self.stuck:
            self.stuck = False
            self.warn(f"{self.primary}'s lock is free again; kept wakes appended")
        if self.due_at is None:
            self.due_at = self.clock() + self.window
        return nid

    def due(self):
        return self.due_at

    def tick(self):
        """Announce what waits, if the primary can take it now. True if typed."""
        from . import inbox
        self.due_at = None
        waiting = [n for n in inbox.pending(self.crew, self.primary) if n.kind == "wake"]
        fresh = [n for n in waiting if n.id not in self.announced]
        self.announced &= {n.id for n in waiting}
        if not fresh:
            return False
        text = self.message(waiting)
        deliver = self._deliver
        if deliver is None:
            from .delivery import deliver
        ok, reason = deliver(self.sess, text)
        if ok:
            self.announced |= {n.id for n in waiting}
            self.log(f"announced {len(waiting)} wake(s) to {self.primary}: {text}")
        else:
            self.due_at = self.clock() + self.retry
            self.log(f"held {len(fresh)} new wake(s) for {self.primary}: {reason}")
        return ok

    def message(self, waiting):
        senders = []
        for n in waiting:
            parts = n.text.split(" ", 2)
            who = parts[1] if len(parts) > 1 else "?"
            if who not in senders:
                senders.append(who)
        shown = ", ".join(senders[:5]) + (f" and {len(senders) - 5} more" if len(senders) > 5 else "")
        n = len(waiting)
        return self.say.format(n=f"{n} wake{'s' if n != 1 else ''}", count=n, primary=self.primary,
                               **{"from": shown})


def send_stream(sender, fd_in=0):
    """Feed event lines from fd_in to *sender*; announce when due; return at end of input."""
    import select
    import time
    carry = b""
    eof = False
    while not eof:
        due = sender.due()
        timeout = None if due is None else max(0.0, due - sender.clock())
        ready, _, _ = select.select([fd_in], [], [], timeout)
        if ready:
            data = os.read(fd_in, _CHUNK)
            if not data:
                eof = True
            lines = (carry + data).split(b"\n")
            carry = lines.pop() if data else b""
            if eof and lines and lines[-1] == b"":
                lines.pop()
            for raw in lines:
                if raw:
                    sender.wake(raw.decode("utf-8", "replace"))
        due = sender.due()
        if due is not None and (eof or sender.clock() >= due):
            if eof and sender.clock() < due:
                time.sleep(due - sender.clock())
            sender.tick()
