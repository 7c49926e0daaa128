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

from . import paths, records
from .kinds import KEEPS_PAUSE
from .records import MAX_LINE

# An event line at most: a record, a session name (64 at most) and a space, a
# TAB and a position token (a small JSON object; 4096 is far above any).
MAX_EVENT = MAX_LINE + 65 + 4096

EXEMPT_PASS = frozenset({"concluded", "problem", "blocked", "error", "lost"})
NORMAL_PASS = frozenset({"turn-ended", "done", "concluded", "blocked", "problem", "error",
                         "stale", "lost", "waiting", "ended"})
HELD_WHILE_PAUSED = frozenset({"idle", "stale"})
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
        self.overlong = False       # inside a line too long to be an event: drop until newline
        self.bad = 0
        # kind word as read (b"idle", b"blocked:") -> the kind, one object per kind
        self._bare, self._texted, self._canon = {}, {}, {}

    def feed(self, data):
        data = self.carry + data
        lines = data.split(b"\n")
        self.carry = lines.pop()
        if self.overlong:              # the rest of a line too long to be an event
            self.overlong = bool(not lines)
            if lines:
                lines.pop(0)
            if self.overlong:
                self.carry = b""
        if len(self.carry) > MAX_EVENT:
            self.warn(f"a line longer than {MAX_EVENT} bytes, dropped: {self.carry[:80]!r}")
            self.carry, self.overlong = b"", True      # memory stays bounded
        return self._lines(lines)

    def finish(self):
        """The input ended inside a line: its writer died mid-write (a pipe
        write over PIPE_BUF is cut by SIGKILL). A fragment is not an event:
        dropped, said; resumed from its cursor, the pipe delivers it whole."""
        if self.carry:
            self.warn(f"input ended inside a line, dropped: {self.carry[:80]!r}")
            self.carry = b""
        return b""

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
            token = None
            if b"\t" in line:      # a positioned line: `event TAB token` or `TAB token`
                line, _, token = line.partition(b"\t")
                if not line:
                    keep(b"\t" + token)        # an acknowledgement only: pass it on
                    continue
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
            if token is not None and not self._context(st, kind, token):
                self._bad(line + b"\t" + token, keep)
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
            if token is not None:
                keep(line + b"\t" + token if ok else b"\t" + token)
            elif ok:
                keep(line)
        if not out:
            return b""
        out.append(b"")
        return b"\n".join(out)

    def _context(self, st, kind, token):
        """Take the fold and pause context from a position token (False: not one).

        The watcher says what came before this event in the session, so the
        judgement does not depend on what this process happened to see: a
        filter restarted mid-stream judges exactly as one that saw it all."""
        from .jsonio import loads
        try:
            tok = loads(token)
            prev, paused = tok["prev"], tok["paused"]
            if prev is not None and not isinstance(prev, str):
                return False
        except (ValueError, TypeError, KeyError, AttributeError):
            return False
        st[_LAST] = kind if prev is not None and prev.encode() == kind else None
        st[_PAUSED] = bool(paused)
        return True

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
# The cursor is written at most this long after the first wake it covers was
# posted, not after every chunk: its write (the whole crew's positions, fsync)
# must not stand between the next append and its wake. What a crash loses of
# it is replayed, and recognised by id.
ACK_DELAY = 0.2
MAX_HELD = 10000            # wakes held in memory before input is no longer read
MAX_TEXT = 8192             # a notice must stay within one record


class Sender:
    """Post wakes to the primary's inbox; acknowledge them; announce bursts in its pane.

    wake(line) takes one input line; flush() posts what was taken, all in one
    append, then (with a cursor) writes the acknowledged position: the
    position a restart resumes from never passes a wake that is not in the
    inbox. A positioned line (`event TAB token`, see protocol.md) posts its
    wake under the event's own id; ids already in the inbox or among the
    newest drained notices (a crash between the append and the cursor) are
    not posted again. A line `TAB token` acknowledges a filtered-out event.

    The primary not registered yet, or the inbox not writable: the wakes are
    held (in memory, and, with a cursor, unacknowledged in the status logs,
    so a restart replays them) and flush() is retried; input is not read
    while MAX_HELD wait. Each change of that state is logged once.

    tick() is called when due(): a window after the first wake of a burst, it
    types one line (through delivery.deliver: live, idle, no dialog, no
    captain typing, re-checked before Enter) naming how many wake notices
    wait in the inbox and from whom. The count is read from the inbox
    itself, so wakes drained meanwhile are not announced. A refused delivery
    is retried every *retry* seconds while unannounced wakes wait; once
    announced, a wake is not announced again, unless the primary took only
    part of what waited (its hook shows a turn what fits inline): then the
    rest is announced once more. Refusals are logged once per
    change of reason.

    A primary whose lock is stuck (held past LOCK_WAIT) does not stop the
    stream: its wakes are kept in its spool (said once, naming the holder)
    and appended when the lock frees; until a post gets the lock again,
    posts do not wait for it.
    """

    def __init__(self, crew, primary, window=DEFAULT_WINDOW, retry=DEFAULT_RETRY, say=DEFAULT_SAY,
                 log=None, clock=None, deliver=None, warn=None, cursor=None, host=None):
        import time
        from .names import check_name
        from .sessions import Session
        check_name(primary)
        self.crew = crew
        self.host = host            # the events come from this host's crew (see wake())
        self.sess = Session(crew, primary)
        self.primary = primary
        self.window, self.retry, self.say = window, retry, say
        self.log = log or (lambda msg: None)
        self.warn = warn or self.log
        self.stuck = False          # the primary's lock was stuck at the last post
        self.clock = clock or time.monotonic
        self._deliver = deliver
        self.due_at = None          # when to try to announce; None: nothing to announce
        self.retry_at = None        # when to try flush() again; None: nothing held
        self.ack_at = None          # when to write the cursor; None: nothing to acknowledge
        self.announced = set()      # ids of wake notices already announced
        self.seen = set()           # the wakes waiting at the last announcement
        self.held = []              # [(id or None, text)] not yet in the inbox
        self.acks = []              # [(session, state)] to acknowledge once held is posted
        self.cursor = cursor
        self.known = None           # ids found in the inbox before our first post
        self.said = {}              # topic -> the state last logged
        self.acked = {}
        if cursor:
            from .atomic import read_json
            from .errors import BadInput
            try:
                data = read_json(cursor) or {"sessions": {}}
                self.acked = dict(data["sessions"])
            except (ValueError, KeyError, TypeError):
                raise BadInput(f"cursor {cursor} is not a crew-watch cursor") from None

    def say_once(self, topic, state, msg):
        """Log *msg* if *topic*'s state changed since it was last logged."""
        if self.said.get(topic) != state:
            self.said[topic] = state
            self.log(msg)

    def wake(self, line):
        """Take one input line (str, no newline); flush() posts it."""
        body, tab, token = line.partition("\t")
        eid = None
        if tab:
            from .jsonio import loads
            try:
                from .errors import BadFile
                from .names import is_name
                from .shapes import check
                tok = loads(token)
                eid, sname, state = tok["id"], tok["s"], tok["at"]
                if not (isinstance(eid, str) and eid and " " not in eid and is_name(sname)):
                    raise ValueError
                check("cursor-entry", state, "(token)")   # what crew-watch will read back
                self.acks.append((sname, state))
            except (ValueError, TypeError, KeyError, AttributeError, BadFile):
                self.log(f"not a position token, taken as text: {token[:80]!r}")
                body, eid = line, None
        if not body:
            return
        name = body.split(" ", 2)[1] if body.count(" ") >= 2 else ""
        if self.host:
            # Another machine's crew: its session names (and ids) qualified by
            # host, so its w1 is never ours, nor ever taken for the primary.
            if name:
                ts, _, rest = body.partition(" ")
                body = f"{ts} {self.host}:{rest}"
            if eid is not None:
                eid = f"{self.host}:{eid}"
        elif name == self.primary:
            return              # the primary's own events never wake it
        if len(body) > MAX_TEXT:
            body = body[:MAX_TEXT] + " [cut]"
        self.held.append((eid, body))

    def holding(self):
        """True if so many wakes wait for the inbox that input should not be read."""
        return len(self.held) >= MAX_HELD

    def flush(self):
        """Post the held wakes, then acknowledge; True if nothing is left held."""
        from . import inbox
        from .errors import CrewfileError, NotFound
        if self.held:
            try:
                if self.known is None:
                    try:
                        self.known = inbox.ids(self.crew, self.primary)
                    except NotFound:
                        raise
                    except CrewfileError as e:
                        # Only the check for repeats needs those files: a damaged
                        # inbox.read must not hold every wake back.
                        self.say_once("ids", "damaged", f"cannot read the notices {self.primary}"
                                      f" already has ({e}); posting without that check")
                        self.known = set()
                fresh = [("wake", eid, text) for eid, text in self.held
                         if eid is None or eid not in self.known]
                if fresh:
                    self._post(fresh)
            except NotFound:
                self.say_once("inbox", "absent", f"{self.primary} is not registered; holding"
                              f" {len(self.held)} wake(s) until it is")
                self.retry_at = self.clock() + self.retry
                return False
            except CrewfileError as e:
                self.say_once("inbox", "failing", f"cannot post to {self.primary}'s inbox ({e});"
                              f" holding {len(self.held)} wake(s), retrying")
                self.retry_at = self.clock() + self.retry
                return False
            if self.said.get("inbox") not in (None, "ok"):
                self.say_once("inbox", "ok", f"posting to {self.primary}'s inbox again")
            self.held = []
            if fresh and self.due_at is None:
                self.due_at = self.clock() + self.window
        self.retry_at = None
        if not self.cursor:
            self.acks = []
        elif self.acks and self.ack_at is None:
            self.ack_at = self.clock() + ACK_DELAY
        return True

    def _post(self, fresh):
        from . import inbox, locks, spool
        old = locks.bound_waits(0 if self.stuck else LOCK_WAIT)
        try:
            inbox.post_many(self.crew, self.primary, fresh)
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

    def acknowledge(self):
        """Write the cursor for everything posted so far (see ACK_DELAY); not
        while wakes are held (their acknowledgements wait for them)."""
        self.ack_at = None
        if not self.acks or self.held:
            return
        for sname, state in self.acks:
            old = self.acked.get(sname)
            if old is None or int(state.get("n") or 0) >= int(old.get("n") or 0):
                self.acked[sname] = state
        self.acks = []
        if self.cursor:
            from . import jsonio
            from .atomic import replace
            replace(self.cursor, jsonio.dumps({"version": 1, "sessions": self.acked}) + "\n")

    def due(self):
        """When tick() or flush() wants to run next (monotonic), or None."""
        times = [t for t in (self.due_at, self.retry_at, self.ack_at) if t is not None]
        return min(times) if times else None

    def tick(self):
        """Announce what waits, if the primary can take it now. True if typed."""
        from . import inbox
        from .errors import CrewfileError, NotFound
        self.due_at = None
        try:
            waiting = [n for n in inbox.pending(self.crew, self.primary) if n.kind == "wake"]
        except NotFound:
            return False            # flush() says so; nothing can be waiting
        except CrewfileError as e:
            return self._cannot(e)
        ids = {n.id for n in waiting}
        fresh = [n for n in waiting if n.id not in self.announced]
        self.announced &= ids
        # The primary's hook took part of what was announced and left the rest
        # (more than it can show in one turn): announce the rest once more.
        partly = bool(waiting) and ids < self.seen
        if not fresh and not partly:
            if waiting:
                self.due_at = self.clock() + self.retry     # watch for a partial take
            return False
        from .delivery import UNCONFIRMED
        text = self.message(waiting)
        deliver = self._deliver
        if deliver is None:
            from .delivery import deliver
        try:
            ok, reason = deliver(self.sess, text)
        except CrewfileError as e:  # a damaged meta or inbox: said once, tried again
            return self._cannot(e)
        if ok or reason.code == UNCONFIRMED:
            # Unconfirmed: Enter was pressed and the prompt line cleared, but no
            # turn-started came. Not announced again (it may have been taken
            # late); the wakes stay in the inbox for its next turn's hook.
            self.announced |= ids
            self.seen = ids
            self.due_at = self.clock() + self.retry
            self.said.pop("announce", None)
            self.log(f"announced {len(waiting)} wake(s) to {self.primary}: {text}" if ok else
                     f"announced {len(waiting)} wake(s) to {self.primary}, unconfirmed"
                     f" ({reason.detail}); they stay in its inbox: {text}")
        else:
            self.due_at = self.clock() + self.retry
            self.say_once("announce", reason.code,
                          f"holding the announcement of {len(fresh)} wake(s) for {self.primary}"
                          f" (they are in its inbox): {reason}")
        return ok

    def _cannot(self, err):
        """A file of the primary's is damaged: keep going, say so once, retry."""
        self.due_at = self.clock() + self.retry
        self.say_once("announce", "damaged", f"cannot announce to {self.primary} ({err});"
                      f" the wakes stay in its inbox; retrying every {self.retry:g} s")
        return False

    def message(self, waiting):
        senders = []
        for n in waiting:
            parts = n.text.split(" ", 2)
            # Whatever a line named as its session is typed into the pane:
            # escaped (no control character reaches the keys), and short.
            who = records.escape(parts[1])[:40] if len(parts) > 1 and parts[1] else "?"
            if who not in senders:
                senders.append(who)
        shown = ", ".join(senders[:5]) + (f" and {len(senders) - 5} more" if len(senders) > 5 else "")
        n = len(waiting)
        return self.say.format(n=f"{n} wake{'s' if n != 1 else ''}", count=n, primary=self.primary,
                               **{"from": shown})


def send_stream(sender, fd_in=0):
    """Feed lines from fd_in to *sender*, posting each chunk before the next
    read and acknowledging within ACK_DELAY; announce when due. At end of
    input: post what is held (retrying while the primary cannot take it), one
    last announcement, acknowledge, return."""
    try:
        _send_loop(sender, fd_in)
    finally:
        # Stopped (SIGTERM as KeyboardInterrupt, end of input): acknowledge what
        # is posted; with wakes still held, their acks wait too (replayed).
        sender.acknowledge()


def _send_loop(sender, fd_in):
    import select
    import time
    carry = b""
    eof = False
    while True:
        due = sender.due()
        timeout = None if due is None else max(0.0, due - sender.clock())
        if eof or sender.holding():
            if due is None:
                break
            time.sleep(timeout)
            ready = []
        else:
            ready, _, _ = select.select([fd_in], [], [], timeout)
        if ready:
            data = os.read(fd_in, _CHUNK)
            if not data:
                eof = True
            lines = (carry + data).split(b"\n")
            carry = lines.pop()
            if not data and carry:      # a fragment of a writer killed mid-write (see Filter.finish)
                sender.warn(f"input ended inside a line, dropped: {carry[:80]!r}")
                carry = b""
            if len(carry) > MAX_EVENT:
                carry = carry[:MAX_EVENT]     # a wake is one line: what follows adds nothing
            for raw in lines:
                if raw:
                    sender.wake(raw.decode("utf-8", "replace"))
            sender.flush()
        now = sender.clock()
        if sender.retry_at is not None and now >= sender.retry_at:
            sender.flush()
        if sender.ack_at is not None and (now >= sender.ack_at or eof):
            sender.acknowledge()
        if sender.due_at is not None and (now >= sender.due_at or (eof and not sender.held)):
            if eof and now < sender.due_at:
                time.sleep(sender.due_at - now)
            sender.tick()
            if eof and not sender.held:
                break
        if eof and not sender.held and sender.due_at is None:
            break
