"""The one writer of an append-only file of records (protocol.md's "Appends"
and "Rotation"): whole lines under the file's lock, a dead writer's fragment
cut, rotation by renaming; and the one unlocked write of a writer that gave
up waiting. Readers use logfile.py."""
import os

from crewfile.core import paths
from crewfile.core.atomic import write_all
from crewfile.core.errors import SystemFailure
from crewfile.core.locks import acquire
from crewfile.core.logfile import lines_end, rotated

_APPEND_FLAGS = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC


def _rotate(path, keep):
    for i in range(keep - 1, -1, -1):
        try:
            os.rename(rotated(path, i), rotated(path, i + 1))
        except FileNotFoundError:
            pass


def _data(lines):
    return lines if isinstance(lines, bytes) else "".join(lines).encode("utf-8")


def append(path, lock_path, lines, rotate=None):
    """Append *lines* (records, each ending in a newline) under the lock;
    rotate: (max_bytes, keep), or None."""
    with acquire(lock_path):
        append_locked(path, lines, rotate)


def append_locked(path, lines, rotate=None, sync=False):
    """append() for a caller that already holds the file's lock. sync: fsync
    before returning (a journal a restart believes)."""
    data = _data(lines)
    if not data:
        return
    try:
        if rotate is not None:
            try:
                size = os.lstat(path).st_size
            except FileNotFoundError:
                size = 0
            if size and size + len(data) > rotate[0]:
                _rotate(path, rotate[1])
        fd = paths.open_file(path, _APPEND_FLAGS)
    except OSError as e:
        raise SystemFailure(f"{path}: {e.strerror}") from None
    try:
        size = os.fstat(fd).st_size
        before = lines_end(fd, size)
        if before != size:          # a dead writer's unfinished last line: cut (we hold the lock)
            os.ftruncate(fd, before)
        try:
            write_all(fd, data)
        except OSError as e:
            try:
                os.ftruncate(fd, before)    # never leave half a record behind
            except OSError:
                pass
            raise SystemFailure(f"cannot append to {path}: {e.strerror}") from None
        if sync:
            try:
                os.fsync(fd)
            except OSError as e:
                raise SystemFailure(f"cannot sync {path}: {e.strerror}") from None
    finally:
        os.close(fd)


def append_unlocked(path, lines):
    """The one write of a writer that gave up waiting for the lock (protocol.md,
    "Bounded waits"). Returns whether *path* still names the file written to
    (asked while it is open, so its inode number cannot be reused meanwhile)."""
    data = _data(lines)
    try:
        fd = paths.open_file(path, _APPEND_FLAGS)
    except OSError as e:
        raise SystemFailure(f"{path}: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if st.st_size and os.pread(fd, 1, st.st_size - 1) != b"\n":
            data = b"\n" + data
        write_all(fd, data)      # a part written stays a fragment: the next holder cuts it
        try:
            now = os.lstat(path)
        except FileNotFoundError:
            return False
        return (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino)
    except OSError as e:
        raise SystemFailure(f"cannot append to {path}: {e.strerror}") from None
    finally:
        os.close(fd)
