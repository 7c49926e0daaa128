"""The one lock helper: flock(2) on a lock file that is never unlinked (protocol.md,
"Locks"). Not filelock: 56 ms to import, and it polls."""
import fcntl
import os
import time

from crewfile.core.errors import Refused, SystemFailure
from crewfile.core.liveness import started_at, stat
from crewfile.core.paths import open_file
from crewfile.core.records import timestamp


class Lock:
    """A held lock; release() or use as a context manager."""
    __slots__ = ("fd", "path")

    def __init__(self, fd, path):
        self.fd, self.path = fd, path

    def release(self):
        if self.fd is not None:
            os.close(self.fd)     # closing the last descriptor releases the flock
            self.fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()


WAIT = None              # the longest a lock wait lasts (protocol.md, "Bounded waits")
_DEADLINE = None         # monotonic time after which waits are one try (a total bound)
_WITHOUT = []            # what writers did without a lock past the bound, not yet said


class LockBusy(Refused):
    """A lock still held by another process when this process's bound ran out."""

    def __init__(self, path):
        super().__init__(f"{path} is held by {holder(path)}")
        self.path = path


def bound_waits(seconds, total=False):
    """From now on no lock wait lasts more than *seconds* (total: all together);
    None lifts it. Returns the bound it replaces, for restore_waits."""
    global WAIT, _DEADLINE
    old = (WAIT, _DEADLINE)
    WAIT = seconds
    _DEADLINE = time.monotonic() + seconds if total and seconds is not None else None
    return old


def restore_waits(old):
    global WAIT, _DEADLINE
    WAIT, _DEADLINE = old


def note_without(busy, done):
    """A writer past the bound did *done* without the lock LockBusy *busy*
    names: kept here, whichever object wrote, for the bounded command to
    say (take_notes), so no such write goes unsaid."""
    _WITHOUT.append(f"{busy}; {done}")


def take_notes():
    """The writes made without a lock since the last call, each once: one
    stderr line each (protocol.md, "Bounded waits")."""
    notes = list(dict.fromkeys(_WITHOUT))
    _WITHOUT.clear()
    return notes


def acquire(path, timeout=None, shared=False):
    """Lock *path*: a Lock, or None when busy (timeout=0: one try; a positive
    one retries with back-off); None blocks in the kernel, or under a bound
    (bound_waits) raises LockBusy: a caller of a blocking wait never gets None."""
    if timeout is None and WAIT is not None:
        left = WAIT if _DEADLINE is None else max(0.0, _DEADLINE - time.monotonic())
        return hold(path, left, shared)
    try:
        fd = open_file(path, os.O_RDWR | os.O_CREAT)
    except FileNotFoundError as e:       # its directory is gone
        raise SystemFailure(f"{path}: {e.strerror}") from None
    op = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
    try:
        if timeout is None:
            fcntl.flock(fd, op)         # retried on EINTR by Python itself (PEP 475)
            return Lock(fd, path)
        deadline = time.monotonic() + timeout
        pause = 0.001
        while True:
            try:
                fcntl.flock(fd, op | fcntl.LOCK_NB)
                return Lock(fd, path)
            except BlockingIOError:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    os.close(fd)
                    return None
                time.sleep(min(pause, remaining))
                pause = min(pause * 2, 0.05)
    except OSError as e:            # (busy is BlockingIOError, answered above)
        os.close(fd)
        raise SystemFailure(f"cannot lock {path}: {e.strerror}") from None


def hold(path, timeout=None, shared=False):
    """acquire(), but LockBusy (naming the holder) instead of None."""
    held = acquire(path, timeout, shared)
    if held is None:
        raise LockBusy(path)
    return held


def is_held(path):
    """True if someone holds *path* (try the lock, let go at once)."""
    if not os.path.exists(path):
        return False
    lock = acquire(path, timeout=0)
    if lock is None:
        return True
    lock.release()
    return False


def holders(path):
    """The pids /proc/locks names as holding a flock on *path* (the process
    that took it, though its children may share it); None if unreadable."""
    try:
        st = os.stat(path)
        with open("/proc/locks", "rb") as f:
            table = f.read().decode("ascii", "replace")
    except OSError:
        return None
    want = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    return [int(parts[4]) for parts in (line.split() for line in table.splitlines())
            if len(parts) >= 6 and parts[1] == "FLOCK" and parts[5] == want   # (not a "->" waiter)
            and parts[4].isdigit()]


def holder(path):
    """Who holds the flock on *path*, in words (`pid 4242 (flock), started
    2026-11-30T19:40:02Z`), from /proc/locks."""
    pids = holders(path)
    if pids is None:
        return "another process (/proc/locks cannot be read)"
    return _describe(pids[0]) if pids else "another process (not found in /proc/locks)"


def _describe(pid):
    st = stat(pid)
    if st is None:
        return f"pid {pid}"
    stopped = ", stopped" if st.stopped else ""
    return f"pid {pid} ({st.comm}{stopped}), started {timestamp(started_at(st.start))}"
