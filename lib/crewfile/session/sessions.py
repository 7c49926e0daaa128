"""Sessions: registration, metadata, status records and derived state
(the directory sessions/NAME: docs/files/session-dir.md)."""
import os
import stat
import time

from crewfile.core import logfile, paths, records
from crewfile.core.errors import BadFile, BadInput, CrewfileError, NotFound, Refused, SystemFailure
from crewfile.core.kinds import LIFECYCLE
from crewfile.core.liveness import agent_of, alive, descends_from, process_start, started_at
from crewfile.core.names import current_user, is_name
from crewfile.core.shapes import load
# The writers' modules (atomic, locks) are imported where a write happens:
# crew-status, run by tmux every few seconds, only reads.

KINDS = ("crew", "aside", "primary")
STATE_SCAN_BYTES = 1 << 20     # how far back a state query looks, at most


class Session:
    """One registered session: its paths and metadata."""

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
        self.notes = []         # what its writes had to say (a lock's holder), to print

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

    def append(self, kind, text="", now=None):
        """Append one status record (the single writer of status logs)."""
        self.append_lines([records.new_line(kind, text, now)])

    def append_lines(self, lines):
        """Append under the session lock; False when the bound on lock waits ran
        out (appended without it, the holder named in self.notes)."""
        from crewfile.core.locks import LockBusy, hold  # crew-status's budget: it never locks
        paths.check_dirs(self.dir, inclusive=True)      # not a planted link
        self.meta        # registered, and its meta usable: the same rule as every reader
        try:
            held = hold(self.lock_path)
        except LockBusy as e:
            logfile.append_unlocked(self.status_path, lines)
            self.notes.append(f"{e}; appended to {self.status_path} without it, not rotated")
            return False
        with held:
            logfile.append_locked(self.status_path, lines, rotate=logfile.rotate_limits())
        return True

    def append_held(self, kind, text=""):
        """append() for a caller that already holds the session lock; returns the line."""
        line = records.new_line(kind, text)
        logfile.append_locked(self.status_path, [line], rotate=logfile.rotate_limits())
        return line

    def last_records(self, n, stats):
        return logfile.last_records(self.log_paths(), n, stats)

    def scan(self, stats=None):
        """One backwards read of the log for a state query (logfile.Backwards)."""
        return logfile.Backwards(self.log_paths(), stats or logfile.TailStats(),
                                 STATE_SCAN_BYTES, at=self.at)

    def last_of(self, kinds, stats):
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
        rec = self.last_of(LIFECYCLE, stats or logfile.TailStats())
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

    def update_meta(self, **fields):
        """Merge *fields* into the metadata under the session lock; return it.
        Lock still held past the bound: nothing written (a replace without the
        lock could undo the holder's change), the holder named in self.notes."""
        from crewfile.core.locks import LockBusy, hold  # crew-status's budget: it never locks
        fields = {k: v for k, v in fields.items() if v is not None}
        try:
            held = hold(self.lock_path)
        except LockBusy as e:
            self.notes.append(f"{e}; {self.meta_path} not updated ({', '.join(sorted(fields))})")
            return dict(self.meta, **fields)
        with held:
            meta = dict(self.reread().meta, **fields)
            write_meta(self.meta_path, meta)
            self._meta = meta
        return meta


def tmux_env(env):
    """The environment that names a pane's own tmux server: $TMUX wins over
    CREWFILE_TMUX, because $TMUX_PANE is a pane of $TMUX's server."""
    if env.get("TMUX"):
        return {k: v for k, v in env.items() if k != "CREWFILE_TMUX"}
    return env


def pane_fields(target, env=None, agent_from=None):
    """Meta fields naming a pane with its server (a pane id alone could name
    any server's pane); with *agent_from* (a hook's pid), its ancestor in
    that pane as the agent's pid and pid_start."""
    from crewfile.session import tmux  # the hook's and crew-status's budget (subprocess)
    socket = tmux.socket_path(env)
    try:
        found = tmux.pane_info(target, socket=socket)
    except SystemFailure:        # tmux is missing: the pane is named, never found
        found = None
    if found is None:            # not (yet) there: named on its socket, so never another's
        return {"tmux": target, "tmux_target": target, "tmux_socket": socket}
    pane, path = found
    fields = {"tmux": pane.id, "tmux_target": target, "tmux_socket": os.path.abspath(path),
              "tmux_server": pane.server}
    if agent_from and pane.pid:
        agent = agent_of(agent_from, pane.pid)
        if agent and descends_from(agent[0], pane.pid):
            fields.update(agent_fields(*agent))
    return fields


def agent_fields(pid, start=None):
    """Meta fields naming the agent process: pid, its start in clock ticks
    since boot (*start*, else read now), and that start as a record time read
    from the clocks now. Records are compared with the time kept: converted
    later, a wall clock stepped meanwhile (NTP, a paused VM resumed) would
    move the start past records the process wrote."""
    start = process_start(pid) if start is None else start
    if start is None:
        raise BadInput(f"no process {pid}")
    return {"pid": int(pid), "pid_start": start,
            "pid_started_at": records.timestamp(started_at(start))}


def write_meta(path, meta):
    import json  # the hook's budget (re): only to register
    from crewfile.core.atomic import replace  # crew-status's budget: it writes no meta
    replace(path, json.dumps(meta, indent=1, sort_keys=True) + "\n")


def register(crew, name, kind="crew", exempt=None, tmux=None, cwd=None, session_key=None,
             agent_session_id=None, user=None, pid=None, extra=None, env=None, agent_from=None,
             new_life=False):
    """Create (or re-create, once ended) a session; return it. Refusals:
    docs/commands/session-add.md. *new_life*: the agent's hook, which knows a
    new agent starts in that name (Claude Code's /clear ends and starts a
    session in one live process), so a live agent does not refuse it."""
    from crewfile.core.locks import hold  # crew-status's budget: it never locks
    if kind not in KINDS:
        raise BadInput(f"bad kind '{kind}': one of {', '.join(KINDS)}")
    sess = Session(crew, name)
    crew.ensure_sub(paths.SESSIONS, name)
    meta = {"name": name, "kind": kind, "exempt": bool(exempt or kind == "aside"),
            "created": records.timestamp(),
            "user": user or current_user()}
    if cwd:
        meta["cwd"] = os.path.realpath(cwd)
    if tmux:
        meta.update(pane_fields(tmux, env, agent_from))
    if pid:
        meta.update(agent_fields(pid))
    for key, value in (("session_key", session_key), ("agent_session_id", agent_session_id)):
        if value:
            meta[key] = value
    meta.update(extra or {})
    with hold(sess.lock_path):
        if sess.exists() and not sess.ended():
            raise Refused(f"session '{name}' is already registered and not ended")
        live = None if new_life or not sess.exists() else _live_agent(sess)
        if live:
            raise Refused(f"session '{name}' is already registered, and its `ended` record is not"
                          f" believed: {live}")
        write_meta(sess.meta_path, meta)
        text = f"kind={kind}" + (" exempt" if meta["exempt"] else "")
        sess.append_held("registered", text)
    return sess


def record_agent(crew, name, pid):
    """Record the agent process of session NAME, which has none (session-add
    NAME --pid PID): a second agent is a new registration, once ended."""
    from crewfile.core.locks import hold  # crew-status's budget: it never locks
    sess = Session(crew, name)
    fields = agent_fields(pid)
    with hold(sess.lock_path):
        meta = dict(sess.reread().meta)
        if sess.ended():
            raise Refused(f"session '{name}' has ended: register it again")
        if meta.get("pid"):
            raise Refused(f"session '{name}' already has its agent recorded (pid {meta['pid']})")
        write_meta(sess.meta_path, dict(meta, **fields))
    return sess


def _live_agent(sess):
    """Where the session's recorded agent is found live ('its agent process
    PID is live'), or None: its end is then believed (verdict.liveness)."""
    from crewfile.session.verdict import LIVE, liveness  # the hook's budget (tmux)
    try:
        found = liveness(Session(sess.crew, sess.name).meta)
    except CrewfileError:              # a damaged meta holds no agent to be found live
        return None
    return f"its agent process {found.agent.pid} is live" if found.live == LIVE else None


def register_again(sess, tmux=None, env=None, agent_from=None):
    """A new life for an ended session whose agent starts again in its name:
    registered again with its metadata but not the old process (nor the old
    pane, given *tmux*). A parallel re-registration that came first is fine."""
    old = dict(sess.meta)
    drop = ("name", "kind", "exempt", "created", "user", "pid", "pid_start", "pid_started_at")
    if tmux:                     # a new pane is not the old one
        drop += ("tmux", "tmux_target", "tmux_socket", "tmux_server")
    keep = {k: v for k, v in old.items() if k not in drop}
    try:
        return register(sess.crew, sess.name, kind=old.get("kind", "crew"),
                        exempt=old.get("exempt"), user=old.get("user"), tmux=tmux, extra=keep,
                        env=env, agent_from=agent_from, new_life=True)
    except Refused:
        return Session(sess.crew, sess.name)


def archive(crew, name, force=False, look=None):
    """session-rm (docs/commands/session-rm.md); returns the archive path.
    Decided and moved under the session lock, so a writer already waiting
    for it appends to the archived log, never to a new session's."""
    from crewfile.core.locks import hold  # crew-status's budget: it never locks
    sess = Session(crew, name)
    if not os.path.lexists(sess.dir):
        raise NotFound(f"no session '{name}'")
    paths.check_dirs(sess.dir, inclusive=True)
    with hold(sess.lock_path):
        if not force:
            st = state(sess, look)
            if not st["ended"] and st["live"] != "no":
                why = "live" if st["live"] == "yes" else "perhaps live (its liveness is unknown)"
                raise Refused(f"session '{name}' is {why} and not ended; end it first, "
                              "or use --force")
        parent = crew.ensure_sub(paths.ARCHIVE, paths.SESSIONS, name)
        dest = os.path.join(parent, records.timestamp())
        while os.path.lexists(dest):            # two removals within a millisecond
            dest += "+"
        try:
            os.rename(sess.dir, dest)
        except OSError as e:
            raise SystemFailure(f"cannot move {sess.dir} to {dest}: {e.strerror}") from None
        from crewfile.core.atomic import fsync_dir  # crew-status's budget
        fsync_dir(parent)
        fsync_dir(crew.sub(paths.SESSIONS))
    return dest


def names(crew):
    """Registered session names, sorted (directories without meta are
    skipped; an entry that cannot be told apart is kept: see is_registered)."""
    try:
        entries = paths.list_dir(crew.sub(paths.SESSIONS))
    except FileNotFoundError:
        return []
    return sorted(name for name in entries if is_registered(crew, name))


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


def find(crew, agent_session_id=None, session_key=None):
    """The session whose metadata carries either id, or None."""
    for name in names(crew):
        try:
            meta = Session(crew, name).meta
        except (NotFound, BadFile, SystemFailure):
            continue
        if ((agent_session_id and meta.get("agent_session_id") == agent_session_id)
                or (session_key and meta.get("session_key") == session_key)):
            return Session(crew, name)
    return None


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
