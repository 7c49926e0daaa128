"""The one lock helper: flock(2) on a lock file that is never unlinked.

flock(2) locks belong to the open file description, so a shell script running
`flock LOCKFILE -c '...'` on the same path excludes us and we exclude it.
The descriptor is close-on-exec, so a child we start never inherits a lock.
A lock file is never removed: unlinking it would let two holders lock two
different inodes under one name.

filelock is deliberately not used (see README, "Dependencies"): it costs
56 ms to import and polls every 50 ms instead of blocking in the kernel.
"""
import errno
import fcntl
import os
import time

from .errors import SystemFailure

_FLAGS = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW


def _open(path):
    try:
        return os.open(path, _FLAGS, 0o600)
    except OSError as e:
        raise SystemFailure(f"cannot open lock {path}: {e.strerror}") from None


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


def acquire(path, timeout=None, shared=False):
    """Lock *path*. Blocks in the kernel when timeout is None.

    Returns a Lock, or None when the lock is busy (timeout=0 means one try;
    a positive timeout retries with a short back-off). Busy is an ordinary
    answer, not an exception; errors raise SystemFailure.
    """
    fd = _open(path)
    op = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
    try:
        if timeout is None:
            while True:
                try:
                    fcntl.flock(fd, op)
                    return Lock(fd, path)
                except InterruptedError:
                    continue
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
    except OSError as e:
        os.close(fd)
        if e.errno in (errno.EWOULDBLOCK,):
            return None
        raise SystemFailure(f"cannot lock {path}: {e.strerror}") from None


def is_held(path):
    """True if someone holds *path* (probe: try the lock and let go at once)."""
    if not os.path.exists(path):
        return False
    lock = acquire(path, timeout=0)
    if lock is None:
        return True
    lock.release()
    return False
