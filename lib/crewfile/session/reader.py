"""A session's files as a reader sees them: its metadata, its status log
read backwards, and the state a view shows (docs/files/session-dir.md).
Nothing here locks or writes, so crew-status, run by tmux every few seconds,
loads no writer; sessions.py's Session adds the writes."""
import os
import stat
import time

from crewfile.core import logfile, paths
from crewfile.core.errors import CrewfileError, NotFound
from crewfile.core.kinds import LIFECYCLE
from crewfile.core.liveness import alive, descends_from
from crewfile.core.names import is_name
from crewfile.core.shapes import load

STATE_SCAN_BYTES = 1 << 20     # how far back a state query looks, at most


class SessionReader:
    """One registered session as a reader sees it: its paths, metadata and
    status log (sessions.Session adds the writes)."""

    def __init__(self, crew, name, meta=None):
        """meta: its metadata when the caller has just read it (a tick reads all at once)."""
        self.crew = crew
        self.name = name
        self.dir = crew.session_dir(name)
        self.meta_path = os.path.join(self.dir, paths.META)
        self.status_path = os.path.join(self.dir, paths.STATUS)
        self.lock_path = os.path.join(self.dir, paths.LOCK)
        self._meta = meta
        self.at = None          # its directory, while opened(): every read is made in it

    def opened(self):
        """`with sess.opened():` a series of reads, each file opened by name in
        its directory, the directories above checked once. NotFound if absent."""
        try:
            self.at = paths.open_dir(self.dir)
        except FileNotFoundError:
            raise NotFound(f"no session '{self.name}'") from None
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        fd, self.at = self.at, None
        os.close(fd)

    @property
    def meta(self):
        if self._meta is None:
            self._meta = load(self.meta_path, "meta", at=self.at)
            if self._meta is None:
                raise not_found(self.crew, self.name)
        return self._meta

    def reread(self):
        """Forget the metadata read so far: the next use reads it afresh."""
        self._meta = None
        return self

    def exists(self):
        return os.path.lexists(self.meta_path)

    def log_paths(self):
        """The current status log, then its rotations, newest first."""
        keep = logfile.rotate_limits()[1]
        return [logfile.rotated(self.status_path, i) for i in range(keep + 1)]

    def last_records(self, n, stats):
        return logfile.last_records(self.log_paths(), n, stats)

    def scan(self, stats=None):
        """One backwards read of the log for a state query (logfile.Backwards)."""
        return logfile.Backwards(self.log_paths(), stats or logfile.TailStats(),
                                 STATE_SCAN_BYTES, at=self.at)

    def last_of(self, kinds, stats=None):
        return self.scan(stats).last_of(kinds)

    def backwards(self, stats=None):
        """Its records, newest first, each file read back STATE_SCAN_BYTES at most."""
        return logfile.records_backwards(self.log_paths(), stats or logfile.TailStats(),
                                         STATE_SCAN_BYTES)

    def newest_this_life(self, test):
        """The newest record passing *test* since the newest `registered`
        (the session's current life), or None."""
        for rec in self.backwards():
            if rec.kind == "registered":
                return None
            if test(rec):
                return rec
        return None

    def ended(self, stats=None):
        rec = self.last_of(LIFECYCLE, stats)
        return bool(rec and LIFECYCLE[rec.kind])

    def recorded_agent(self, ancestor_of=None):
        """The agent process its meta records, as (pid, start, alive); pid None
        if none is recorded. With *ancestor_of* (a hook's pid), alive only if
        it is that process or its ancestor: this agent, not an earlier one."""
        pid, start = self.meta.get("pid"), self.meta.get("pid_start")
        if not isinstance(pid, int):
            return None, None, False
        live = alive(pid, start) and (ancestor_of is None or descends_from(ancestor_of, pid))
        return pid, start, live


def names(crew):
    """Registered session names, sorted (directories without meta are
    skipped; an entry that cannot be told apart is kept: see is_registered)."""
    try:
        entries = paths.list_dir(crew.sub(paths.SESSIONS))
    except FileNotFoundError:
        return []
    return sorted(name for name in entries if is_registered(crew, name))


def readable(crew, exclude=None):
    """(SessionReader, meta) of each registered session but *exclude* whose
    meta can be read: a damaged one is its own problem, said by its reader."""
    for name in names(crew):
        if name == exclude:
            continue
        sess = SessionReader(crew, name)
        try:
            meta = sess.meta
        except CrewfileError:
            continue
        yield sess, meta


def not_found(crew, name):
    """The NotFound for NAME, which no session has: a mistyped name is
    offered the registered ones a typo away, not told to register the typo."""
    try:
        close = [other for other in names(crew) if _one_typo(name, other)][:3]
    except (CrewfileError, OSError):
        close = []          # the crew cannot be listed: said by whatever lists it
    hint = ("did you mean " + " or ".join(repr(c) for c in close) + "?" if close
            else "register it with session-add")
    return NotFound(f"no session '{name}' ({hint})")


def _one_typo(a, b):
    """*a* and *b* differ by one typo: a character changed, added or dropped,
    or two neighbours swapped."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        return len(diff) == 1 or (len(diff) == 2 and diff[1] == diff[0] + 1
                                  and (a[diff[0]], a[diff[1]]) == (b[diff[1]], b[diff[0]]))
    short, longer = sorted((a, b), key=len)
    at = next((i for i in range(len(short)) if short[i] != longer[i]), len(short))
    return short[at:] == longer[at + 1:]


def is_registered(crew, name, is_dir=None):
    """NAME's directory holds a meta, or its entry cannot be told apart (a
    link, a file, a directory we cannot search): kept, so that every reader
    refuses it aloud and nudge-tick holds, not disarms, a schedule for it.
    is_dir: True when a listing's d_type said a directory (not a link): no
    lstat(2) asks it again (paths.list_dir(kinds=True))."""
    if not is_name(name):
        return False
    entry = os.path.join(crew.sub(paths.SESSIONS), name)
    try:
        if is_dir is not True and not stat.S_ISDIR(os.lstat(entry).st_mode):
            return True
        os.lstat(os.path.join(entry, paths.META))
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError:
        return True
    return True


def state(sess, look=None, now=None, recs=None):
    """The session's current state as a dict (what status-show and session-ls
    print); recs: a scan() of its log the caller shares, so it is read once."""
    from crewfile.session import verdict  # the hook's budget (tmux)
    recs = recs or sess.scan()
    last = recs.last()
    v = verdict.of(sess, look, recs.stats, recs)
    return state_of(sess, v, last, recs.stats.warning(), now)


def state_of(sess, v, last, warning="", now=None):
    """state()'s dict from its parts (crew-top probes liveness anew, records not reread)."""
    from crewfile.session import verdict  # the hook's budget (tmux)
    now = time.time() if now is None else now
    meta = sess.meta
    return {
        "name": sess.name,
        "kind": meta.get("kind", "crew"),
        "exempt": bool(meta.get("exempt")),
        "last": last.line().rstrip("\n") if last else None,
        "last_kind": last.kind if last else None,
        "last_text": last.text if last else None,
        "age": (now - last.time) if last else None,
        "live": LIVE_WORD[v.live],
        "why": v.why.code if v.why else None,
        "why_detail": v.why.detail if v.why else None,
        "stopped": v.stopped,
        "foreground": v.foreground,
        "generating": v.generating,
        "waiting": v.dialog == verdict.YES,
        "ended": v.ended,
        "cwd": meta.get("cwd"),
        "tmux": meta.get("tmux"),
        "tmux_socket": meta.get("tmux_socket"),
        "pid": meta.get("pid"),
        "warning": warning,
    }


LIVE_WORD = {"live": "yes", "not-live": "no", "unknown": "unknown"}
