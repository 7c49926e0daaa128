"""Sessions written: registration, the status log's one writer and the
metadata's, under the session lock (the directory sessions/NAME:
docs/files/session-dir.md). Reading them is reader.py's."""
import os
import pwd

from crewfile.core import logfile, logwrite, paths, records
from crewfile.core.atomic import fsync_dir, replace
from crewfile.core.errors import BadFile, BadInput, CrewfileError, NotFound, Refused, SystemFailure
from crewfile.core.liveness import agent_of, descends_from, process_start, started_at
from crewfile.core.locks import LockBusy, hold, note_without
from crewfile.session.reader import SessionReader, names, readable, state

KINDS = ("crew", "aside", "primary")


class Session(SessionReader):
    """One registered session: what a reader sees, and the one writer of its
    status log and metadata, under its lock."""

    def append(self, kind, text="", now=None):
        """Append one status record (the single writer of status logs)."""
        self.append_lines([records.new_line(kind, text, now)])

    def append_lines(self, lines):
        """Append under the session lock; False when the bound on lock waits ran
        out (appended without it, said by locks.note_without)."""
        paths.check_dirs(self.dir, inclusive=True)      # not a planted link
        self.meta        # registered, and its meta usable: the same rule as every reader
        try:
            held = hold(self.lock_path)
        except LockBusy as e:
            logwrite.append_unlocked(self.status_path, lines)
            note_without(e, f"appended to {self.status_path} without it, not rotated")
            return False
        with held:
            logwrite.append_locked(self.status_path, lines, rotate=logfile.rotate_limits())
        return True

    def append_held(self, kind, text=""):
        """append() for a caller that already holds the session lock; returns the line."""
        line = records.new_line(kind, text)
        logwrite.append_locked(self.status_path, [line], rotate=logfile.rotate_limits())
        return line

    def update_meta(self, **fields):
        """Merge *fields* into the metadata under the session lock; return it.
        Lock still held past the bound: nothing written (a replace without the
        lock could undo the holder's change), said by locks.note_without."""
        fields = {k: v for k, v in fields.items() if v is not None}
        try:
            held = hold(self.lock_path)
        except LockBusy as e:
            note_without(e, f"{self.meta_path} not updated ({', '.join(sorted(fields))})")
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


def current_user():
    """$USER, else the password database's name for our uid (cron and `env -i`
    leave $USER unset), else the uid as a number: who a registration or a
    schedule records."""
    if os.environ.get("USER"):
        return os.environ["USER"]
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return str(os.getuid())


def write_meta(path, meta):
    import json  # the hook's budget (re): only to register
    replace(path, json.dumps(meta, indent=1, sort_keys=True) + "\n")


def register(crew, name, kind="crew", exempt=None, tmux=None, cwd=None, session_key=None,
             agent_session_id=None, user=None, pid=None, extra=None, env=None, agent_from=None,
             new_life=False):
    """Create (or re-create, once ended) a session; return it. Refusals:
    docs/commands/session-add.md. *new_life*: the agent's hook, which knows a
    new agent starts in that name (Claude Code's /clear ends and starts a
    session in one live process), so a live agent does not refuse it."""
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
        _refuse_taken_pane(crew, name, meta)
        write_meta(sess.meta_path, meta)
        text = f"kind={kind}" + (" exempt" if meta["exempt"] else "")
        sess.append_held("registered", text)
    return sess


def record_agent(crew, name, pid):
    """Record the agent process of session NAME, which has none (session-add
    NAME --pid PID): a second agent is a new registration, once ended."""
    sess = Session(crew, name)
    fields = agent_fields(pid)
    with hold(sess.lock_path):
        meta = dict(sess.reread().meta)
        if sess.ended():
            raise Refused(f"session '{name}' has ended: register it again")
        if meta.get("pid"):
            raise Refused(f"session '{name}' already has its agent recorded (pid {meta['pid']})")
        _refuse_taken_pane(crew, name, dict(meta, **fields))
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


def _refuse_taken_pane(crew, name, meta):
    """Refused when *meta* names an agent in a pane that another session, not
    ended, has its live agent in: each name's deliveries hold only its own
    deliver.lock, so two names for one agent would be two voices in it."""
    if not meta.get("pid") or not meta.get("tmux_server"):
        return              # no agent recorded: nothing is typed into it
    other = _pane_taken(crew, name, meta)
    if other:
        raise Refused(f"pane {meta['tmux']} is session '{other}''s, whose agent is live there:"
                      f" one pane is one session (two names would be two voices in it)")


def _pane_taken(crew, name, meta):
    """The other session, not ended, whose live agent is in *meta*'s pane (the
    same pane of the same server), or None."""
    for sess, theirs in readable(crew, exclude=name):
        if all(theirs.get(k) == meta[k] for k in ("tmux", "tmux_server", "tmux_socket")):
            try:
                if not sess.ended() and _live_agent(sess):
                    return sess.name
            except CrewfileError:
                continue            # its own problem, said by whatever reads it
    return None


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
        fsync_dir(parent)
        fsync_dir(crew.sub(paths.SESSIONS))
    return dest


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


