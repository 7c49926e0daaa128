"""The crew directory's layout, defined once, and its rules of trust (protocol.md,
"The crew directory"), kept by check_owner() and the one path opener.
"""
import errno
import os
import stat

from crewfile.core.errors import BadFile, Refused, SystemFailure
from crewfile.core.names import check_name

SESSIONS, REPORTS, NUDGES, JOBS, LOCKS = "sessions", "reports", "nudges", "jobs", "locks"
ARCHIVE = "archive"               # archive/sessions/NAME/TS: what session-rm removed
META, STATUS, LOCK, INBOX, INBOX_READ = "meta", "status", "lock", "inbox", "inbox.read"
OFFERED = "offered"                # sessions/NAME/offered: notices handed to an agent, unconfirmed
REPORT_TMP, REPORT_NEW, REPORT_CUR = "tmp", "new", "cur"     # under REPORTS
SCROLLBACK_SUFFIX = ".scrollback"
SCROLLBACK = "scrollback"         # sessions/NAME/scrollback.TS, TS a record timestamp
TRANSCRIPT_SUFFIX = ".transcript"
TRANSCRIPT = "transcript"         # sessions/NAME/transcript.TS, the TS of its scrollback
DELIVER_LOCK = "deliver.lock"
REWAKE_LOCK, ANNOUNCED = "rewake.lock", "announced"
ANNOUNCE_LOCK = "announce.lock"     # held from deciding an announcement to recording it
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
    """Create *path* 0700 if missing; refuse a link, a file or another's directory."""
    check_dirs(path)
    if not make_dir(path):
        _believe_dir(path, os.lstat(path))
    return path


def make_dir(path):
    """Create the directory *path* 0700 (True), or False if something is there.
    chmod after mkdir(2): the umask can take bits from the mode mkdir is given."""
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


# -- whose crew it is: what crewfile reads decides what is typed and run ------

_me = os.geteuid()
_private_groups = {}     # gid -> _yours_alone(gid), this process's answers


def _trusted(uid):
    return uid == _me or uid == 0 or _root_unnamed(uid)


def _root_unnamed(uid):
    """True if *uid* is the kernel's overflow uid in a user namespace that maps
    no one to it: an agent's sandbox (Codex's on Linux) that cannot name root
    shows root's directories so. Another user's show so too, but every command
    outside the sandbox refuses those (protocol.md, "The crew directory")."""
    try:
        with open("/proc/sys/kernel/overflowuid", "rb") as f:
            if uid != int(f.read()):
                return False
        with open("/proc/self/uid_map", "rb") as f:
            spans = [[int(n) for n in line.split()] for line in f]
    except (OSError, ValueError):
        return False
    return not any(inside <= uid < inside + count for inside, _, count in spans)


def check_owner(root):
    """Refused unless every level from / down to *root*, as named and as resolved,
    is trusted. A level not there yet passes: the one above keeps others from
    creating it first (in a sticky one, Crew.ensure checks again)."""
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
        if not _trusted(st.st_uid):
            raise Refused(f"crew directory not trusted: {here} is owned by uid {st.st_uid},"
                          f" not by you or root (fix: chown {_me} {here}, or use another --dir)")
        if (stat.S_ISDIR(st.st_mode) and st.st_mode & 0o022
                and (here == named or not st.st_mode & stat.S_ISVTX)):
            raise Refused(f"crew directory not trusted: {here} is writable by group or others"
                          f" (fix: chmod go-w {here})")
        linked = linked or stat.S_ISLNK(st.st_mode)
    return linked


def _believe_dir(path, st):
    """_believe() for a directory, refusing anything else there, and one that
    others may write: in it they could rename or remove the owner's files."""
    if not stat.S_ISDIR(st.st_mode):
        what = "a symlink is not followed" if stat.S_ISLNK(st.st_mode) else "not a directory"
        raise SystemFailure(f"{path}: {what}")
    _believe(path, st)
    if st.st_mode & 0o022:
        raise SystemFailure(f"{path}: writable by group or others: not believed"
                            f" (fix: chmod go-w {path})")


def _believe(path, st):
    """Refuse what another user owns under a trusted crew directory (that
    file alone): one not the user's or root's."""
    if not _trusted(st.st_uid):
        raise SystemFailure(f"{path}: owned by uid {st.st_uid}, not by you or root:"
                            " not believed")


def _believe_outside(path, fd, st):
    """Refuse an agent CLI's file (its transcript, which names no directory
    crewfile checked) that is not the effective user's, root's own included
    (the agent writes as the user), or that another user may write."""
    if st.st_uid != _me:
        raise SystemFailure(f"{path}: owned by uid {st.st_uid}, not by you: not believed")
    _refuse_others_write(path, fd, st)


def _refuse_others_write(path, fd, st):
    """Refuse a file another user may write: what they write there would be
    believed. Group write is the user's own only with a private group and
    no ACL (whose entries the group bits mask)."""
    if st.st_mode & stat.S_IWOTH:
        raise SystemFailure(f"{path}: writable by others: not believed (fix: chmod o-w {path})")
    if st.st_mode & stat.S_IWGRP and not _yours_alone(st.st_gid):
        raise SystemFailure(f"{path}: writable by group {st.st_gid}, which is not yours alone:"
                            f" not believed (fix: chmod g-w {path})")
    if st.st_mode & stat.S_IWGRP and _has_acl(path, fd):
        raise SystemFailure(f"{path}: writable by others through its ACL: not believed"
                            f" (fix: chmod g-w {path})")


def _has_acl(path, fd):
    """Does the file carry an access ACL? Then its group bits are the ACL's
    mask: they may let a named user or group write it."""
    try:
        os.getxattr(fd, "system.posix_acl_access")
    except OSError as e:
        if e.errno in (errno.ENODATA, errno.ENOTSUP):
            return False
        raise SystemFailure(f"{path}: cannot read its ACL: {e.strerror}") from None
    return True


def _yours_alone(gid):
    """Is the group *gid* the user's private group, no other user in it (by
    /etc/group or as a primary group)? Codex and Gemini CLI write their
    files 0664 under umask 002, with the user private groups Debian makes:
    refusing every group-writable file would refuse those. Debian's OpenSSH
    lets ~/.ssh files be group-writable on the same condition. Asked once a
    process for each group: reading every user costs 0.2 ms, and the status
    line reads each session's transcript."""
    if gid not in _private_groups:
        # Here, not at the top: the status line must not load pwd (only a
        # group-writable transcript asks).
        import grp
        import pwd
        try:
            me, group = pwd.getpwuid(_me), grp.getgrgid(gid)
        except KeyError:
            _private_groups[gid] = False
        else:
            _private_groups[gid] = (
                me.pw_gid == gid and all(name == me.pw_name for name in group.gr_mem)
                and all(user.pw_uid == _me for user in pwd.getpwall() if user.pw_gid == gid))
    return _private_groups[gid]


# -- the one path opener: every file and directory under a crew root is opened
# through these, so no link, only a regular file, nothing another user owns
# or (a file in a crew directory) may write.

_roots = set()       # crew roots this process works in (each Crew adds its own)
_OPEN_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
READ_AT_ONCE = 1 << 20      # read_bytes()'s first read at most, however big the file says it is


def check_dirs(path, inclusive=False):
    """Refuse *path* if a level between its crew root and it (*inclusive*: and it)
    is a link or not a directory; a missing one passes (the caller's call fails).
    True when *path* is in a crew directory."""
    root = next((r for r in _roots if path.startswith(r + "/")), None)
    if root is None:
        return False
    parts = path[len(root) + 1:].split("/")
    if not inclusive:
        parts.pop()
    here = root
    for part in parts:
        here += "/" + part
        try:
            st = os.lstat(here)
        except FileNotFoundError:
            return True
        except OSError as e:
            raise SystemFailure(f"cannot use {here}: {e.strerror}") from None
        _believe_dir(here, st)
    return True


def open_file(path, flags=os.O_RDONLY, mode=0o600, at=None, outside=False):
    """A descriptor on the regular file *path* (FileNotFoundError passes: absence
    is an answer). at: open_dir() of its directory, checked once for a listing
    of thousands. outside: an agent CLI's transcript, read only, through links,
    believed only when the effective user owns it and no other user may write it."""
    return open_stat(path, flags, mode, at, outside)[0]


def open_stat(path, flags=os.O_RDONLY, mode=0o600, at=None, outside=False):
    """open_file()'s descriptor and the fstat(2) it was judged by: a reader
    wanting the size asks no second time (the status line reads each log)."""
    if outside:
        at, how = None, flags | os.O_NONBLOCK | os.O_CLOEXEC
    else:
        how = flags | _OPEN_FLAGS
        in_crew = at is not None or check_dirs(path)
    try:
        fd = os.open(path if at is None else path.rpartition("/")[2], how, mode, dir_fd=at)
    except FileNotFoundError:
        raise
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise SystemFailure(f"{path}: a symlink is not followed") from None
        raise SystemFailure(f"{path}: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SystemFailure(f"{path}: not a regular file")
        if outside:
            _believe_outside(path, fd, st)
        else:
            _believe(path, st)
            if in_crew and st.st_mode & 0o022:
                _refuse_others_write(path, fd, st)
        # O_NONBLOCK kept: it means nothing to a regular file (open(2)), it
        # only kept the open from hanging on a FIFO planted in its place.
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def open_dir(path, at=None):
    """A descriptor on the directory *path* for open_file(at=), checked as list_dir
    checks it. at: one on its parent (one openat(2) checks it)."""
    if at is None:
        check_dirs(path, inclusive=True)
    try:
        if at is None:
            return os.open(path, _DIR_FLAGS)
        fd = os.open(path.rpartition("/")[2], _DIR_FLAGS, dir_fd=at)
    except FileNotFoundError:
        raise
    except OSError as e:
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
        _believe_dir(path, os.fstat(fd))     # (check_dirs saw it when opened by its path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_text(path, at=None, limit=None):
    """The whole file as text, or None if absent; BadFile past *limit* bytes.
    Here, not in atomic.py, so a reader does not load the writer."""
    data = read_bytes(path, at, limit)
    return None if data is None else data.decode("utf-8", "replace")


def read_bytes(path, at=None, limit=None, outside=False):
    """read_text() without the decoding; *outside*: as for open_file."""
    try:
        fd, st = open_stat(path, at=at, outside=outside)
    except FileNotFoundError:
        return None
    chunks = []
    size = 0
    # One byte past its size: a regular file reads short only at its end, so
    # a file not grown since fstat is read by one read(2), its end seen in it.
    want = min(st.st_size + 1, READ_AT_ONCE if limit is None else limit + 1)
    try:
        while True:             # os.read, not a file object: listings read thousands of these
            chunk = os.read(fd, want)
            chunks.append(chunk)
            size += len(chunk)
            if limit is not None and size > limit:
                raise BadFile(path, f"longer than {limit} bytes")
            if len(chunk) < want:
                break
            want = 65536
    except OSError as e:
        raise SystemFailure(f"cannot read {path}: {e.strerror}") from None
    finally:
        os.close(fd)
    return b"".join(chunks)


def list_dir(path, kinds=False):
    """The entries of the directory *path* (FileNotFoundError if absent).
    kinds: (name, is_dir) pairs instead, is_dir as the listing's d_type says
    (lstat(2) only where it does not), None if that failed: the caller need
    not lstat each entry to know a directory (the status line's sessions)."""
    check_dirs(path, inclusive=True)
    try:
        if kinds:
            with os.scandir(path) as found:
                return [(e.name, _is_dir(e)) for e in found]
        return os.listdir(path)
    except FileNotFoundError:
        raise
    except OSError as e:
        raise SystemFailure(f"cannot list {path}: {e.strerror}") from None


def _is_dir(entry):
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return None


class Crew:
    """Paths of one crew directory."""

    def __init__(self, root=None):
        self.root = os.path.abspath(root or default_dir())
        check_owner(self.root)       # every command comes through here, the hook too
        _roots.add(self.root)

    def ensure(self):
        """Create the crew directory and each missing level above it, 0700."""
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
        return os.path.join(self.root, JOBS, check_name(handle, "job handle"))

    def session_file(self, name, what):
        return os.path.join(self.session_dir(name), what)

    def ensure_sub(self, *parts):
        """Create crew-relative directories one level at a time, never via a link."""
        self.ensure()
        path = self.root
        for part in parts:
            path = ensure_dir(os.path.join(path, part))
        return path
