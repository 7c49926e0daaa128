"""The crew directory's layout, defined once.

    $CREWFILE_DIR/                  0700, created on first use
      sessions/NAME/meta            session metadata (JSON, atomic replace)
      sessions/NAME/status          status log (append-only records)
      sessions/NAME/status.1..N     rotated status logs, newest first
      sessions/NAME/lock            flock guard for every write in sessions/NAME
      sessions/NAME/inbox           pending notices for the session (records)
      sessions/NAME/inbox.read      notices already drained (records)
      sessions/NAME/deliver.lock    flock held while text is typed into NAME's pane
      sessions/NAME/rewake.lock     flock held by the waiter of NAME's keystroke-free wake
      sessions/NAME/announced       ids of NAME's wake notices already announced (atomic)
      sessions/NAME/scrollback.TS   a retired crew session's window scrollback (crew-retire)
      sessions/NAME/transcript.TS   a copy of its agent's own transcript, beside it
      sessions/NAME/acts            evidence of the captain's acts (record line, tab, evidence)
      reports/{tmp,new,cur}/        aside reports, maildir style:
      reports/new/ASIDE,UNIQUE      a delivered report, not yet reconciled
      reports/cur/ASIDE,UNIQUE      a reconciled report, and beside it
      reports/cur/ASIDE,UNIQUE.scrollback   the aside window's whole scrollback
      reports/cur/ASIDE,UNIQUE.transcript   a copy of the aside agent's own transcript
      nudges/ID                     nudge schedules (JSON, atomic replace)
      locks/nudges                  flock guarding every write under nudges/
      locks/nudge-tick              flock held by the one running nudge-tick
      jobs/HANDLE/                  a background job (job-exec), one directory each:
      jobs/HANDLE/spec              what to run, label, owning session (JSON, atomic)
      jobs/HANDLE/pids              watcher and command pids, pgid, start (JSON, atomic)
      jobs/HANDLE/output            the command's stdout+stderr, bounded, oldest dropped
      jobs/HANDLE/result            exit code or signal, start/end (JSON, atomic)
      jobs/HANDLE/heard             who heard the outcome: wait or notice (JSON, atomic)
      jobs/HANDLE/notice            what the announcement did, posted or not (JSON, atomic)
      jobs/HANDLE/lock              flock: the one wait-or-announce decision
      jobs/HANDLE/waiters           shared flock held by each job-wait while it waits
      jobs/HANDLE/alive             flock the watcher holds for its whole life
      jobs/HANDLE/running           flock the watcher holds until `result` is written
      locks/                        crew-wide locks (nudge-tick, ...)
      tokens.cache                  crew-status's token count per transcript (JSON, atomic)

Nothing outside this module spells these names.
"""
import os
import stat

from crewfile.core.errors import BadFile, Refused, SystemFailure
from crewfile.core.names import check_name

SESSIONS, REPORTS, NUDGES, JOBS, LOCKS = "sessions", "reports", "nudges", "jobs", "locks"
ARCHIVE = "archive"               # archive/sessions/NAME/TS: what session-rm removed
META, STATUS, LOCK, INBOX, INBOX_READ = "meta", "status", "lock", "inbox", "inbox.read"
REPORT_TMP, REPORT_NEW, REPORT_CUR = "tmp", "new", "cur"     # under REPORTS
SCROLLBACK_SUFFIX = ".scrollback"
SCROLLBACK = "scrollback"         # sessions/NAME/scrollback.TS, TS a record timestamp
TRANSCRIPT_SUFFIX = ".transcript"
TRANSCRIPT = "transcript"         # sessions/NAME/transcript.TS, the TS of its scrollback
DELIVER_LOCK = "deliver.lock"
REWAKE_LOCK, ANNOUNCED = "rewake.lock", "announced"
ACTS = "acts"
TOKENS_CACHE = "tokens.cache"
NUDGES_LOCK, NUDGE_TICK_LOCK = "nudges", "nudge-tick"     # files under locks/
JOB_SPEC, JOB_PIDS, JOB_OUTPUT, JOB_RESULT = "spec", "pids", "output", "result"
JOB_HEARD, JOB_NOTICE, JOB_LOCK, JOB_WAITERS, JOB_ALIVE, JOB_RUNNING = (
    "heard", "notice", "lock", "waiters", "alive", "running")


def default_dir(env=None):
    env = os.environ if env is None else env
    if env.get("CREWFILE_DIR"):
        return env["CREWFILE_DIR"]
    state = env.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(state, "crewfile")


def ensure_dir(path):
    """Create *path* 0700 if missing; refuse a symlink, a non-directory or
    another user's directory there."""
    check_dirs(path)
    if make_dir(path):
        return path
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        what = "a symlink is not followed" if stat.S_ISLNK(st.st_mode) else "not a directory"
        raise SystemFailure(f"{path}: {what}")
    _believe(path, st)
    return path


def make_dir(path):
    """Create the directory *path* 0700 whatever the umask (True), or False
    if something is there already. The mode is set again after mkdir(2):
    the umask can take bits from the mode mkdir is given."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        return False
    except OSError as e:
        raise SystemFailure(f"cannot create {path}: {e.strerror}") from None
    try:
        os.chmod(path, 0o700)
    except OSError as e:
        raise SystemFailure(f"cannot set the mode of {path}: {e.strerror}") from None
    return True


# -- whose crew it is -----------------------------------------------------------
# Only the crew's owner steers the crew, as OpenSSH's StrictModes trusts
# ~/.ssh: what crewfile reads there decides what is typed into panes and
# what runs, so a directory another user can write, or a file another user
# wrote, must never be believed. Root owns the system and is trusted by
# every user; when root runs a command, only root is.

_me = os.geteuid()


def _trusted(uid):
    return uid == _me or uid == 0


def check_owner(root):
    """Refuse the crew directory *root* (Refused, naming the path and the
    fix) unless it and every directory above it up to /, as named and as
    resolved through links, is owned by this user or root and not writable
    by group or others; a sticky directory (/tmp) may be above it, never be
    it. A link on the way counts by its owner (its mode means nothing). A
    level not there yet passes: it is created 0700 (Crew.ensure), and a
    level above it that others cannot write is what keeps them from
    creating it first; in a sticky one, Crew.ensure checks again once it
    has created the crew directory."""
    seen = set()
    if _judge_levels(root, seen):       # a link on the way: where it leads is judged too
        _judge_levels(os.path.realpath(root), seen)


def _judge_levels(named, seen):
    """Judge *named* and each directory above it not in *seen*, from / down
    (so the first level at fault is the one named); True if one is a link."""
    levels = [named]
    while levels[-1] != "/":
        levels.append(os.path.dirname(levels[-1]))
    linked = False
    for here in reversed(levels):
        if here in seen:
            continue
        seen.add(here)
        try:
            st = os.lstat(here)
        except (FileNotFoundError, NotADirectoryError):
            break
        except OSError as e:
            raise SystemFailure(f"cannot use {here}: {e.strerror}") from None
        _judge_level(here, st, crew_dir=here == named)
        linked = linked or stat.S_ISLNK(st.st_mode)
    return linked


def _judge_level(path, st, crew_dir):
    if not _trusted(st.st_uid):
        raise Refused(f"crew directory not trusted: {path} is owned by uid {st.st_uid},"
                      f" not by you or root (fix: chown {_me} {path}, or use another --dir)")
    if (stat.S_ISDIR(st.st_mode) and st.st_mode & 0o022
            and (crew_dir or not st.st_mode & stat.S_ISVTX)):
        raise Refused(f"crew directory not trusted: {path} is writable by group or others"
                      f" (fix: chmod go-w {path})")


def _believe(path, st):
    """Refuse what another user owns under a trusted crew directory (one of
    the path opener's refusals: that file or directory alone is not used)."""
    if not _trusted(st.st_uid):
        raise SystemFailure(f"{path}: owned by uid {st.st_uid}, not by you or root:"
                            " not believed")


# -- the one path opener ------------------------------------------------------
# Every file and directory under a crew directory is opened through these, so
# one rule holds everywhere: nothing under the crew root is followed through
# a symbolic link (the root itself is the user's choice and may be one),
# only a regular file is read or appended to (a FIFO would block a reader for
# ever, a directory cannot be read), and nothing another user owns is used
# (whose crew it is). A refusal is SystemFailure (exit 111), one line naming
# the path.

_roots = set()       # crew roots this process works in (each Crew adds its own)
_OPEN_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def check_dirs(path, inclusive=False):
    """Refuse *path* if a directory between its crew root and it (and, if
    *inclusive*, *path* itself) is a symbolic link or not a directory.
    A missing one is not refused: the caller's own call then fails as usual."""
    for root in _roots:
        if path.startswith(root + "/"):
            break
    else:
        return
    parts = path[len(root) + 1:].split("/")
    if not inclusive:
        parts.pop()
    here = root
    for part in parts:
        here += "/" + part
        try:
            st = os.lstat(here)
        except FileNotFoundError:
            return
        except OSError as e:
            raise SystemFailure(f"cannot use {here}: {e.strerror}") from None
        if not stat.S_ISDIR(st.st_mode):
            what = "a symlink is not followed" if stat.S_ISLNK(st.st_mode) else "not a directory"
            raise SystemFailure(f"{here}: {what}")
        _believe(here, st)


def open_file(path, flags=os.O_RDONLY, mode=0o600, at=None, outside=False):
    """A descriptor on the regular file *path* under the crew directory.

    FileNotFoundError passes through (absence is an answer); a link, a FIFO,
    a directory or any other failure is SystemFailure naming the path.
    at: a descriptor from open_dir() on *path*'s directory; the file is
    opened in it by its base name (the directories above were checked once,
    when it was opened: a listing of thousands pays for that once).
    outside: a file outside any crew directory (an agent CLI's transcript),
    read only: a link is followed (the user's layout, not the crew's); a
    FIFO or directory is still refused."""
    if outside:
        if flags & os.O_ACCMODE != os.O_RDONLY:
            raise ValueError("a file outside the crew directory is only read")
    elif at is None:
        check_dirs(path)
    try:
        if outside:
            fd = os.open(path, flags | os.O_NONBLOCK | os.O_CLOEXEC)
        elif at is None:
            fd = os.open(path, flags | _OPEN_FLAGS, mode)
        else:
            fd = os.open(path.rpartition("/")[2], flags | _OPEN_FLAGS, mode, dir_fd=at)
    except FileNotFoundError:
        raise
    except OSError as e:
        import errno                    # here: only a failure needs it (every command opens files)
        if e.errno == errno.ELOOP:
            raise SystemFailure(f"{path}: a symlink is not followed") from None
        raise SystemFailure(f"{path}: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SystemFailure(f"{path}: not a regular file")
        if not outside:
            _believe(path, st)
        if flags & os.O_ACCMODE == os.O_RDONLY:
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_dir(path, at=None):
    """A descriptor on the directory *path* for open_file(at=): the same rule
    as list_dir (FileNotFoundError if absent; SystemFailure if it, or a
    directory above it, is a link or not a directory). Close it after use.
    at: a descriptor from open_dir() on *path*'s parent; *path* is opened in
    it by its base name, so one openat(2) checks it (a listing of thousands
    of job directories checks each once, not once per file in it)."""
    if at is None:
        check_dirs(path, inclusive=True)
    try:
        if at is None:
            return os.open(path, _DIR_FLAGS)
        fd = os.open(path.rpartition("/")[2], _DIR_FLAGS, dir_fd=at)
    except FileNotFoundError:
        raise
    except OSError as e:
        import errno
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            # O_DIRECTORY says ENOTDIR for a link too: which one, said as check_dirs does
            try:
                link = stat.S_ISLNK(os.lstat(path if at is None else os.path.basename(path),
                                             dir_fd=at).st_mode)
            except OSError:
                link = e.errno == errno.ELOOP
            raise SystemFailure(f"{path}: a symlink is not followed" if link
                                else f"{path}: not a directory") from None
        raise SystemFailure(f"{path}: {e.strerror}") from None
    try:
        _believe(path, os.fstat(fd))     # (check_dirs saw it when opened by its path)
    except BaseException:
        os.close(fd)
        raise
    return fd


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def read_text(path, at=None, limit=None):
    """The whole file as text, or None if it does not exist (through the one
    path opener: no link followed, only a regular file; *at* as for it). The
    reader of the files atomic.replace() writes; here, not there, so that a
    reader (crew-status) does not load the writer's module.
    limit: BadFile, once more than *limit* bytes were read (memory bounded)."""
    try:
        fd = open_file(path, at=at)
    except FileNotFoundError:
        return None
    chunks = []
    size = 0
    try:
        while True:             # os.read, not a file object: listings read thousands of these
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if limit is not None and size > limit:
                raise BadFile(path, f"longer than {limit} bytes")
    except OSError as e:
        raise SystemFailure(f"cannot read {path}: {e.strerror}") from None
    finally:
        os.close(fd)
    return (chunks[0] if len(chunks) == 1 else b"".join(chunks)).decode("utf-8", "replace")


def list_dir(path):
    """The entries of the directory *path* (FileNotFoundError if absent;
    SystemFailure if it, or a directory above it, is a link)."""
    check_dirs(path, inclusive=True)
    try:
        return os.listdir(path)
    except FileNotFoundError:
        raise
    except OSError as e:
        raise SystemFailure(f"cannot list {path}: {e.strerror}") from None


class Crew:
    """Paths of one crew directory."""

    def __init__(self, root=None):
        self.root = os.path.abspath(root or default_dir())
        check_owner(self.root)       # every command comes through here, the hook too
        _roots.add(self.root)

    def ensure(self):
        """Create the crew directory and each missing level above it, every
        one 0700 whatever the umask; levels already there are left alone."""
        if not os.path.isdir(self.root):
            missing = []
            here = os.path.dirname(self.root)
            while not os.path.lexists(here):
                missing.append(here)
                here = os.path.dirname(here)
            for level in reversed(missing):
                make_dir(level)     # lost a race to ourselves: the next level fails if not a dir
            ensure_dir(self.root)
            check_owner(self.root)  # a level another user made meanwhile (in /tmp) is refused
        return self

    def sub(self, *parts):
        return os.path.join(self.root, *parts)

    def session_dir(self, name):
        return os.path.join(self.root, SESSIONS, check_name(name, "session name"))

    def job_dir(self, handle):
        return f"{self.root}/{JOBS}/{check_name(handle, 'job handle')}"   # (join: 3x the cost)

    def session_file(self, name, what):
        return os.path.join(self.session_dir(name), what)

    def ensure_sub(self, *parts):
        """Create crew-relative directories one level at a time, never via a link."""
        self.ensure()
        path = self.root
        for part in parts:
            path = ensure_dir(os.path.join(path, part))
        return path
