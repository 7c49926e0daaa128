"""crew-watch: one event line for every new status record of every session.

The contract: docs/commands/crew-watch.md, docs/files/event-lines.md and
docs/files/cursor.md (a position, and how a rotation is followed); how it
follows: docs/internals.md.
"""
import os
import select
import time

from crewfile.agents import codexrollout
from crewfile.core import jsonio, notify, paths, records
from crewfile.core.atomic import write_all
from crewfile.core.errors import BadFile, BadInput, CrewfileError, Gone, failure_line, reason
from crewfile.core.kinds import KEEPS_PAUSE, LIFECYCLE, TURN_STATE
from crewfile.core.logfile import lines_end
from crewfile.core.names import is_name
from crewfile.core.notify import POLL, identity
from crewfile.core.output import age_text, json_lines
from crewfile.core.shapes import check, load
from crewfile.core.text import escape
from crewfile.session import verdict
from crewfile.session.sessions import Session
from crewfile.wake import cursors

DEFAULT_STALE = 600.0
DEFAULT_PROBE = 5.0
# What one read of a session takes at most (docs/internals.md, "crew-watch").
_READ_CHUNK = 1 << 18


class Tail:
    """Where one session's log has been read up to, and what it last said.
    SAVED: what the cursor keeps of it (docs/files/cursor.md)."""
    SAVED = ("ino", "off", "last", "last_kind", "turn", "ended", "stale", "lost", "n", "prev",
             "paused")
    __slots__ = SAVED + ("name", "dir", "status", "meta", "meta_key", "dir_id", "quiet_before",
                         "overlong", "seen_at")

    def __init__(self, name, sdir):
        self.name, self.dir = name, sdir
        self.ino, self.off = None, 0    # ino None: read every file from the oldest, from 0
        self.last = self.last_kind = None   # the newest record's time (epoch s) and kind
        self.turn = "unknown"
        self.ended = False
        self.stale = False      # a stale event was emitted for the current silence
        self.lost = False       # a lost event was emitted since the last registration
        self.meta = self.meta_key = None
        self.n = 0              # events emitted for this session (orders positions)
        self.prev = None        # kind of the newest event emitted (wake-filter's fold)
        self.paused = False     # in a human wait: `paused`, then only KEEPS_PAUSE kinds
        self.quiet_before = None    # a timestamp: records before it are read, not printed
        self.overlong = False   # inside a line too long to be a record: skipped to its end
        self.seen_at = time.monotonic()     # when its newest record was read (see silent_for)
        self.dir_id = identity(sdir)

    def generating(self):
        """Generating and not said stale yet: its silence is being timed."""
        return self.turn == "yes" and not self.ended and not self.stale and self.last is not None

    def silent_for(self, now):
        """Seconds since the newest record: by our monotonic clock when its time
        is ahead of *now*, so that no clock keeps a session from going stale."""
        return now - self.last if self.last <= now else time.monotonic() - self.seen_at

    def replaced(self):
        """Its directory is another now (same name, new inode): a new session."""
        return self.dir_id is not None and identity(self.dir) != self.dir_id

    def saved(self):
        return {k: getattr(self, k) for k in self.SAVED}

    def restore(self, d):
        """Take up a cursor entry, checked: each field absent, null or of its type."""
        for k in self.SAVED:
            if d.get(k) is not None:
                setattr(self, k, d[k])
        self.turn = self.turn or "unknown"


class Watcher:
    """The watch loop as a library: start(), then step() until you are done.
    out(bytes) writes events (default: to fd 1); warn(line) says (default: stderr)."""

    def __init__(self, crew, from_start=False, cursor=None, stale_after=DEFAULT_STALE,
                 probe_every=DEFAULT_PROBE, poll=None, out=None, warn=None, now=time.time,
                 positions=False, resume=None):
        self.crew = crew
        self.since_ts = None    # a record timestamp: events before it are not written
        # resume: a cursor its consumer writes once the events are safe; we only
        # read it (or create it). "-": it comes on stdin (ssh): resume_doc.
        self.resume = resume
        self.resume_doc = None
        self.positions = positions or resume is not None
        if resume is not None:
            cursor = None if resume == "-" else resume
        self.sessions_dir = crew.sub(paths.SESSIONS)
        self.from_start = from_start    # a session found is read from its first record
        self.cursor = cursor
        self.stale_after = float(stale_after)
        self.probe_every = float(probe_every)
        self.poll = poll
        self.out = out or _write_stdout
        self.warn = warn or notify.warn_stderr
        self.now = now
        self.tails = {}
        self.dirwatch = None    # notify.DirWatch on sessions/ and each session's directory
        self.roots = None       # identities of the crew directory and sessions/
        self.overflows = 0
        self.next_probe = 0.0
        self._saved = None      # the cursor state last written
        self._cursor_known = False
        self.busy = False               # writing a batch: a stop waits for its end
        self.stop_after_batch = False
        # Set by crew-watch following for ever: the signal wakeup pipe and the
        # events' pipe or socket; a wait ends when either is ready, so neither a
        # stop nor a reader gone waits for the next record.
        self.stop_fd = None
        self.reader_fd = None
        self._troubles = {}     # session name -> what is wrong with it, as last said
        self._skipped = set()   # (path, inode) of older log files skipped, said once
        self._rotated_past = set()  # (session, inode) whose log rotated past it unread, said once
        self._rollouts = {}     # session name -> why its rollout is not read, as last said
        self.backlog = set()    # sessions with more to read than one read takes
        self._budget = 0        # bytes the session being read may still consume
        self._unread_before = {}  # session name -> start time, when its end could not be found
        self._missing = False   # the crew directory was missing at the last probe
        self._poll_at = 0.0     # polling: when every session is read next

    # -- start ------------------------------------------------------------
    def start(self, follow=True):
        """Subscribe (when following with inotify), restore the cursor, scan."""
        if self.cursor or self.resume == "-":
            self._load_cursor()
        self.roots = self._root_ids()
        if follow and self.poll is None:
            self._subscribe()
        acks = self._first_position() if self.resume is not None and not self._cursor_known else []
        return acks + self._scan()

    def _first_position(self):
        """Write the starting position into an absent resume cursor before
        any event goes out: a restart before the first acknowledgement then
        resumes here, and nothing appended since is skipped."""
        for name in self._names():
            try:
                self._tail(name)
            except (OSError, CrewfileError):
                pass        # its first read says what is wrong with it
        self._cursor_known = True
        if self.resume == "-":
            # No file of ours: the consumer acknowledges these, one per session.
            return [("", _token(t, f"{t.name}:start", t.prev, t.paused) + b"\n")
                    for t in self.tails.values()]
        self._write_cursor()
        return []

    def _root_ids(self):
        return (identity(self.crew.root), identity(self.sessions_dir))

    def _load_cursor(self):
        try:
            if self.resume != "-":
                data = load(self.cursor, "cursor")
            elif (data := self.resume_doc) is not None:
                check("cursor", data, "(stdin)")
            if data is None:
                return
            saved = data["sessions"]
            for name, d in saved.items():
                if not is_name(name):
                    raise BadFile(self.cursor, f"bad session name {name!r}")
                check("cursor-entry", d, self.cursor)
        except BadFile as e:
            raise BadInput(f"cursor {e.path} is not a crew-watch cursor: {e.why}") from None
        except CrewfileError as e:
            raise BadInput(f"cursor {self.cursor}: {e}") from None
        self._cursor_known = True
        for name, d in saved.items():
            self.tails[name] = Tail(name, self.crew.session_dir(name))
            self.tails[name].restore(d)
        self._saved = jsonio.dumps(saved)

    def _subscribe(self):
        self.crew.ensure_sub(paths.SESSIONS)
        self.roots = self._root_ids()
        self.dirwatch = notify.DirWatch(self.warn)
        self._watch(self.sessions_dir)

    def _watch(self, d):
        """Subscribe to *d*, if not yet (one that cannot be watched is tried
        again at its next read); the watches ran out (said): from now on,
        re-read everything every POLL s."""
        if self.dirwatch is not None:
            self.dirwatch.add(d)
            if self.dirwatch.ino is None:
                self.close()
                self.poll = POLL
                self._poll_at = time.monotonic()

    def _check_roots(self):
        """Follow a replaced crew directory from its start; Gone if it is
        missing at two probes in a row."""
        now = self._root_ids()
        if None not in now:
            self._missing = False
        if now == self.roots:
            return []
        if None in now:
            if not self._missing:           # a restore may be half-way: look once more
                self._missing = True
                return []
            raise Gone(f"the crew directory {self.crew.root} is gone (deleted or unmounted,"
                       f" or its sessions/ removed); exiting so that a supervisor restarts"
                       f" crew-watch")
        self.warn(f"the crew directory {self.crew.root} was replaced; following the new one,"
                  f" every session from its first record")
        self.tails.clear()
        self.backlog.clear()
        if self.dirwatch is not None:
            self.dirwatch.close()
            self._subscribe()
        self.roots = now
        return self._scan()

    def _names(self):
        try:
            entries = paths.list_dir(self.sessions_dir)
        except FileNotFoundError:
            return []
        return sorted(e for e in entries if not e.startswith("."))

    def _scan(self):
        """Read every session from its saved position (new ones found too);
        forget those whose directory was removed."""
        names = self._names()
        for gone in (self.tails.keys() | self._troubles.keys()) - set(names):
            self.tails.pop(gone, None)
            self._troubles.pop(gone, None)
        return [e for name in names for e in self._read_session(name)]

    def _tail(self, name):
        """The session's Tail, made on its first read; None if *name* is not a
        session's. Raises what is wrong with its directory (a link, not a
        directory): checked first, so a session made unusable keeps its
        position for when it is usable again."""
        try:
            sdir = self.crew.session_dir(name)
        except BadInput:
            return None     # not a valid session name: not ours
        paths.check_dirs(sdir, inclusive=True)
        tail = self.tails.get(name)
        if tail is not None and tail.replaced():
            if self.dirwatch is not None:       # a new session from its start
                self.dirwatch.forget(sdir)
            del self.tails[name]
            tail = None
        if tail is None and not os.path.isdir(sdir):
            return None         # gone meanwhile
        self._watch(sdir)       # subscribe before the first read of it
        if tail is not None:
            return tail         # restored from a cursor, or read before
        tail = Tail(name, sdir)
        # A session that appears while we run, or that a cursor has not seen,
        # is new from its first record.
        if not (self.from_start or self._cursor_known):
            try:
                self._skip_to_end(tail)
            except (OSError, CrewfileError):
                # Its end cannot be found now: once it can be read, its
                # records from before we started are read, not printed.
                self._unread_before[name] = records.timestamp(self.now())
                raise
        elif name in self._unread_before:
            tail.quiet_before = self._unread_before.pop(name)
        self.tails[name] = tail
        return tail

    def _skip_to_end(self, tail):
        """Begin a session at the end of its log; take its state from the tail."""
        session = Session(self.crew, tail.name)
        try:
            fd = paths.open_file(session.status_path)
        except FileNotFoundError:
            return
        try:
            st = os.fstat(fd)
            tail.ino, tail.off = st.st_ino, lines_end(fd, st.st_size, within=records.MAX_LINE + 1)
        finally:
            os.close(fd)
        seen_turn = seen_life = False
        for rec in session.backwards():
            if tail.last is None:
                tail.last, tail.last_kind = rec.time, rec.kind
            if not seen_turn and rec.kind in TURN_STATE:
                tail.turn, seen_turn = TURN_STATE[rec.kind], True
            if not seen_life and rec.kind in LIFECYCLE:
                tail.ended, seen_life = LIFECYCLE[rec.kind], True
            if seen_turn and seen_life:
                break
        tail.prev, tail.paused = tail.last_kind, tail.last_kind == "paused"

    # -- reading ----------------------------------------------------------
    def _files(self, tail):
        """[(path, inode)] of the log, newest first (missing numbers skipped)."""
        out = []
        for path in Session(self.crew, tail.name).log_paths():
            try:
                out.append((path, os.lstat(path).st_ino))
            except FileNotFoundError:
                pass
        return out

    def _catch_up(self):
        """One round over the sessions with a backlog (not gone meanwhile): a read of each."""
        self.backlog.intersection_update(self.tails)
        return [e for name in sorted(self.backlog) for e in self._read_session(name)]

    def _read_session(self, name):
        """The events of one session's new records, at most _READ_CHUNK bytes
        of them (more: the session joins the backlog). A session that cannot
        be read is its own problem alone: said once per reason, as its
        `problem` event; its position is kept (unknown is not gone) for when
        it can be."""
        events = []
        self._budget = _READ_CHUNK
        self.backlog.discard(name)
        try:
            self._read_session_into(name, events)
        except FileNotFoundError:
            pass                    # removed while read: the next scan forgets it
        except (OSError, CrewfileError) as e:
            said = failure_line("crew-watch", e).rstrip("\n")
            if self._troubles.get(name) != said:
                self._troubles[name] = said
                self.warn(said.removeprefix("crew-watch: "))
                tail = self.tails.get(name) or Tail(name, self.crew.session_dir(name))
                events.append(self._synth(tail, self.now(), "problem", said, fault=True))
            return events
        if self._troubles.pop(name, None) is not None:
            self.warn(f"{name}: readable again; reading on from where it was")
        return events

    def _read_session_into(self, name, events):
        tail = self._tail(name)
        if tail is None:
            return
        for _attempt in range(10):
            files = self._files(tail)
            if not files:
                return
            inos = [ino for _p, ino in files]
            restart = tail.ino not in inos
            idx = len(files) - 1 if restart else inos.index(tail.ino)
            if restart and tail.ino is not None and (name, tail.ino) not in self._rotated_past:
                self._rotated_past.add((name, tail.ino))        # said once
                self.warn(f"{name}: its log rotated past what is kept while unread;"
                          f" reading on from the oldest file kept")
            for j in range(idx, -1, -1):
                path, ino = files[j]
                was = tail.ino, tail.off
                if j != idx or restart:
                    tail.ino, tail.off = ino, 0
                try:
                    done = self._read_file(tail, path, ino, current=(j == 0), events=events)
                except (OSError, CrewfileError) as e:
                    if j == 0 or isinstance(e, FileNotFoundError):
                        # The current file cannot be read now (a link or a FIFO
                        # in its place, another's): where we were holds for when
                        # it can, so a file put back is not read again from 0.
                        tail.ino, tail.off = was
                        raise           # the current file: the session's own problem
                    self._skip_older(tail, path, ino, e, events)
                    continue
                if name in self.backlog:
                    return              # its next turn reads on from here
                if not done:
                    break               # renamed under us: list the files again
            else:
                return

    def _skip_older(self, tail, path, ino, e, events):
        """An older file of the log that cannot be believed (a link, not a
        regular file, not yours) is skipped, said once as the session's
        `problem`, and the newer files are read on: one bad file does not
        silence the session's records in the others."""
        if (path, ino) in self._skipped:
            return
        self._skipped.add((path, ino))
        said = failure_line("crew-watch", e).rstrip("\n") + ": skipped, read on from the next file"
        self.warn(said.removeprefix("crew-watch: "))
        events.append(self._synth(tail, self.now(), "problem", said, fault=True))

    def _read_file(self, tail, path, ino, current, events):
        """Read complete lines of one file from tail.off; False if it is not
        *ino* any more. What was wrong is said in one line per read, not per
        line: a file of garbage is one bad file."""
        try:
            fd = paths.open_file(path)
        except FileNotFoundError:
            return False
        notes, bad, first_bad = [], 0, b""
        try:
            st = os.fstat(fd)
            if st.st_ino != ino:
                return False
            tail.ino = ino
            size = st.st_size
            if size < tail.off:
                notes.append("was truncated: read again from its start")
                tail.off = 0
            while tail.off < size:
                if self._budget <= 0:
                    self.backlog.add(tail.name)
                    break
                data = os.pread(fd, min(_READ_CHUNK, size - tail.off), tail.off)
                if not data:
                    break
                self._budget -= len(data)
                if tail.overlong:       # said when it began: the rest goes unsaid
                    end = data.find(b"\n")
                    tail.off += len(data) if end < 0 else end + 1
                    tail.overlong = end < 0
                    continue
                nl = data.rfind(b"\n")
                if nl < 0:
                    if len(data) > records.MAX_LINE:
                        notes.append("skipped an overlong line")
                        tail.off += len(data)
                        tail.overlong = True
                        continue
                    if not current:
                        notes.append("skipped a partial last line")
                        tail.off = size
                    break
                for raw in data[:nl].split(b"\n"):
                    if not self._record(tail, raw, events) and raw:
                        bad, first_bad = bad + 1, first_bad or raw[:80]
            if bad:
                notes.append(f"skipped {bad} malformed line{'s' if bad != 1 else ''}"
                             f" (the first: {first_bad!r})")
        finally:
            os.close(fd)
            if notes:
                self.warn(f"{tail.name}: {path}: {'; '.join(dict.fromkeys(notes))}")
        return True

    def _record(self, tail, raw, events):
        """One line of the log at tail.off (its newline after it); False if
        it is not a record."""
        rec = records.parse(raw)
        if rec is None:
            tail.off += len(raw) + 1
            return False
        t = rec.time
        quiet = tail.quiet_before is not None and rec.ts < tail.quiet_before
        if not quiet and tail.generating() and t - tail.last >= self.stale_after:
            events.append(self._stale_event(tail))      # positioned before this record
        tail.off += len(raw) + 1
        tail.last, tail.last_kind, tail.stale = t, rec.kind, False
        tail.seen_at = time.monotonic()
        if rec.kind in TURN_STATE:
            tail.turn = TURN_STATE[rec.kind]
        if rec.kind in LIFECYCLE:
            tail.ended = LIFECYCLE[rec.kind]
            if rec.kind == "registered":
                tail.lost = False
                tail.meta_key = None
        if quiet:
            self._saw(tail, rec.kind)
        else:
            line = _named(records.printable_line(raw), tail.name)
            events.append((rec.ts, self._line(tail, rec.kind, line)))
        return True

    def _stale_event(self, tail, now=None):
        """The `stale` event, stamped when the silence crossed the threshold,
        or *now* when the newest record is dated ahead of it."""
        tail.stale = True
        at = tail.last + self.stale_after
        return self._synth(tail, at if now is None or at <= now else now, "stale",
                           f"silent for {age_text(self.stale_after)} since {tail.last_kind}")

    def _synth(self, tail, when, kind, text, fault=False):
        """A synthesized event of *tail*, stamped *when* (seconds). fault: one
        of ours about its files, which leaves the context of its records as
        it was: the session's own next `problem` is not folded into it."""
        ts = records.timestamp(when)
        line = _named(records.format_line(ts, kind, text)[:-1].encode("utf-8"), tail.name)
        return (ts, self._line(tail, kind, line, synth=True, fault=fault))

    def _line(self, tail, kind, line, synth=False, fault=False):
        """The event line (bytes, newline added) for *kind*, emitted now for
        *tail*, keeping what a restart needs; with positions, its token."""
        prev, paused = tail.prev, tail.paused
        tail.n += 1
        if not fault:
            self._saw(tail, kind)
        if not self.positions:
            return line + b"\n"
        eid = f"{tail.name}:{tail.ino}:{tail.off}" + (":" + kind if synth else "")
        return line + _token(tail, eid, prev, paused) + b"\n"

    @staticmethod
    def _saw(tail, kind):
        """What the next event's context says: the kind before it, and
        whether the session is in a human wait."""
        tail.prev = kind
        if kind == "paused":
            tail.paused = True
        elif tail.paused and kind not in KEEPS_PAUSE:
            tail.paused = False

    # -- synthesized events -----------------------------------------------
    def _timers(self, probe):
        """stale, and at a probe error and lost, for the sessions read up to
        their end (one with a backlog is silent only as far as we have read)."""
        now = self.now()
        events = [self._stale_event(tail, now) for tail in self.tails.values()
                  if tail.name not in self.backlog and tail.generating()
                  and tail.silent_for(now) >= self.stale_after]
        if not probe:
            return events
        look = verdict.Look()
        for tail in list(self.tails.values()):
            meta = self._meta(tail, now, events)
            if (not meta or tail.ended or tail.lost or tail.last is None
                    or tail.name in self.backlog):
                continue
            if tail.turn == "yes" and meta.get("agent") == codexrollout.AGENT:
                self._read_rollout(tail.name)
            life = verdict.liveness(meta, look)
            if life.live == verdict.NOT_LIVE:
                tail.lost = True
                events.append(self._synth(tail, now, "lost", life.why.detail))
        return events

    def _read_rollout(self, name):
        """A Codex turn that ends in an error fires no hook: its rollout says
        so, and its record is appended once (agents.codexrollout), then read
        as any other. Why a rollout cannot be read is said once."""
        try:
            codexrollout.record_turn_error(Session(self.crew, name), os.environ)
            said = None
        except (OSError, CrewfileError) as e:
            said = escape(f"{name}: its rollout is not read: {reason(e)}")
        if said is not None and said != self._rollouts.get(name):
            self.warn(said)
        self._rollouts[name] = said

    def _meta(self, tail, now, events):
        """The session's metadata (None if absent or bad), re-read when the
        file's identity changes. A bad one is said once per identity: one
        line on stderr and an `error: meta unreadable` event in *events*
        (it passes wake-filter: the primary can act on it)."""
        path = os.path.join(tail.dir, paths.META)
        try:
            st = os.lstat(path)
        except OSError:
            return None
        key = (st.st_ino, st.st_mtime_ns, st.st_size, st.st_mode)
        if key != tail.meta_key:
            tail.meta_key = key
            try:
                tail.meta = load(path, "meta")
            except CrewfileError as e:
                tail.meta = None
                self.warn(f"{tail.name}: {e}")
                why = str(e).replace(path, "meta").replace("meta: ", "", 1)[:200]
                why = why.encode("utf-8", "replace").decode("utf-8")
                events.append(self._synth(tail, now, "error", f"meta unreadable: {why}",
                                          fault=True))
        return tail.meta

    # -- output -----------------------------------------------------------
    def emit(self, events):
        """Write a batch (sorted by time) in one go, then save the cursor."""
        self.busy = True
        try:
            if self.since_ts is not None:       # --since: the replay starts at that moment
                events = [e for e in events if e[0] >= self.since_ts]
            if events:
                if not self.positions:      # with positions, each session's log order
                    events.sort(key=lambda e: e[0])
                self.out(b"".join(line for _ts, line in events))
            if self.cursor and self.resume is None:
                self._write_cursor()
        finally:
            self.busy = False
        if self.stop_after_batch:
            raise KeyboardInterrupt

    def _write_cursor(self):
        """The cursor file, unless it says this already."""
        state = {name: t.saved() for name, t in self.tails.items()}
        text = jsonio.dumps(state)
        if text != self._saved:
            cursors.write(self.cursor, state)
            self._saved = text

    # -- the loop ---------------------------------------------------------
    def run_once(self):
        """Catch up, synthesize what is due now, write it all; return. A
        backlog is written a round at a time (see _READ_CHUNK)."""
        events = self.start(follow=False)
        while self.backlog:
            self.emit(events)
            events = self._catch_up()
        events += self._timers(probe=True)
        self.emit(events)

    def begin(self):
        """start() in follow mode and write the catch-up batch."""
        events = self.start(follow=True)
        self.from_start = True      # a session found from now on is new
        events += self._timers(probe=True)
        self.next_probe = time.monotonic() + self.probe_every
        if self.poll is not None:
            self._poll_at = time.monotonic() + self.poll
        self.emit(events)

    def step(self, max_wait=None):
        """Wait for something to do (at most max_wait seconds), do it, write
        it out. With a backlog, nothing is waited for: what came is read
        first, then one round of the backlog."""
        wait = 0.0 if self.backlog else self._wait_time()
        if max_wait is not None:
            wait = min(wait, max_wait)
        events = self._changed() if self._wait(wait) else []
        if self.dirwatch is None and time.monotonic() >= self._poll_at:
            self._poll_at = time.monotonic() + self.poll
            events += self._scan()
        probe = time.monotonic() >= self.next_probe
        if probe:
            self.next_probe = time.monotonic() + self.probe_every
            events += self._check_roots()
            # Read again: a session whose directory was replaced (no event of
            # the new one may come), and one in trouble (none may say it healed).
            replaced = {name for name, tail in self.tails.items() if tail.replaced()}
            for name in sorted(replaced | set(self._troubles)):
                events += self._read_session(name)
        events += self._catch_up()
        events += self._timers(probe)
        self.emit(events)

    def _wait_time(self):
        """Until the next probe, poll or stale, whichever comes first."""
        now, now_m = self.now(), time.monotonic()
        due = [self.next_probe - now_m]
        if self.dirwatch is None:
            due.append(self._poll_at - now_m)
        due += [self.stale_after - t.silent_for(now) for t in self.tails.values() if t.generating()]
        return max(0.0, min(due))

    def _wait(self, wait):
        """Wait up to *wait* seconds for inotify (True when it has events), a
        signal or the reader's end. A signal's stop ends the step's batch
        (emit raises) even if its handler's exception was lost (one raised in
        a finalizer is dropped by Python); a reader gone is a broken pipe now."""
        poller = select.poll()
        if self.dirwatch is not None:
            poller.register(self.dirwatch.fileno(), select.POLLIN)
        if self.stop_fd is not None:
            poller.register(self.stop_fd, select.POLLIN)
        if self.reader_fd is not None:
            poller.register(self.reader_fd, 0)      # POLLERR, POLLHUP: always reported
        # At most a day per poll(2): its timeout is a C int of ms.
        ready = dict(poller.poll(min(int(wait * 1000) + 1, 86400000) if wait > 0 else 0))
        if self.stop_fd is not None and ready.get(self.stop_fd):
            try:
                while os.read(self.stop_fd, 512):
                    pass
            except BlockingIOError:
                pass
            self.stop_after_batch = True
        if self.reader_fd is not None and ready.get(self.reader_fd):
            raise BrokenPipeError(32, "the reader of the events is gone")
        return self.dirwatch is not None and bool(ready.get(self.dirwatch.fileno()))

    def _changed(self):
        """Read what the directory events name: a new session, a session's
        log, its meta (read again at the next probe); a session whose
        directory went is forgotten. The queue overflowed: every session."""
        changes = self.dirwatch.changes(0, settle=0)      # _wait said it is readable
        if changes is None:
            self.overflows += 1
            self.warn("the inotify queue overflowed; reading every session from its position")
            return self._scan()
        dirty = set()
        for d, entry in changes:
            if d == self.sessions_dir:
                if entry and not entry.startswith("."):
                    dirty.add(entry)            # a session directory came, or was replaced
                continue
            name = os.path.basename(d)
            if d not in self.dirwatch.dirs:     # its directory is gone, and its watch
                self.tails.pop(name, None)
            elif entry.startswith(paths.STATUS):
                dirty.add(name)
            elif entry == paths.META and name in self.tails:
                self.tails[name].meta_key = None
        return [e for name in sorted(dirty) for e in self._read_session(name)]

    def follow(self):
        """begin(), then step() for ever. A caller stopping it on a signal
        sets stop_after_batch while `busy` (writing), else raises."""
        self.begin()
        while True:
            self.step()

    def close(self):
        if self.dirwatch is not None:
            self.dirwatch.close()
            self.dirwatch = None


def first_position(crew, cursor):
    """Create an absent resume cursor at the end of every log now, so that
    whatever starts the pipe later (and however often it dies before its
    first acknowledgement) delivers every record appended from now on."""
    if os.path.lexists(cursor):
        return
    w = Watcher(crew, resume=cursor)
    w._load_cursor()
    if not w._cursor_known:
        w._first_position()


def _token(tail, eid, prev, paused):
    """TAB and the position token (docs/files/event-lines.md): the event's id,
    the session's context before it, the cursor state after it."""
    return b"\t" + jsonio.dumps({"id": eid, "s": tail.name, "prev": prev, "paused": paused,
                                 "at": tail.saved()}).encode("utf-8")


def _named(line, name):
    """The event line of a record line (bytes, no newline): *name* after the timestamp."""
    return line[:24] + b" " + name.encode() + line[24:]


def _write_stdout(data):
    write_all(1, data)


def write_json_lines(data):
    """An `out` for Watcher writing each event as one JSON object per line:
    {"ts", "session", "kind", "text"}, the text unescaped."""
    objs = []
    for line in data.decode("utf-8").splitlines():
        ts, session, rest = line.split(" ", 2)
        rec = records.parse(f"{ts} {rest}")
        objs.append({"ts": ts, "session": session, "kind": rec.kind, "text": rec.text})
    _write_stdout(json_lines(objs).encode("utf-8"))

