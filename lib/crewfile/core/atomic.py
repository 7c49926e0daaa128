"""The one atomic-replace helper: temporary name, fsync, rename, fsync dir
(protocol.md, "Atomic replace")."""
import os
import stat

from crewfile.core.errors import SystemFailure
from crewfile.core.jsonio import loads
from crewfile.core.paths import check_dirs, read_text

_TMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def _fsync(path, flags):
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path):
    _fsync(path, os.O_DIRECTORY)


def sync(path):
    """Make a file published with replace(sync=False) durable, then its directory."""
    try:
        _fsync(path, os.O_NOFOLLOW)
        fsync_dir(os.path.dirname(path) or ".")
    except OSError as e:
        raise SystemFailure(f"cannot sync {path}: {e.strerror}") from None


def write_all(fd, data):
    """os.write until all of *data* is written (a short write is not an error)."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def write_new(path, data, mode=0o600, sync=True):
    """Create *path* (never an existing file or a link), write *data* whole and
    fsync it (if *sync*): the first half of a publication. OSError: nothing left."""
    fd = os.open(path, _TMP_FLAGS, mode)
    try:
        write_all(fd, data)
        if sync:
            os.fsync(fd)
    except OSError:
        os.close(fd)
        os.unlink(path)
        raise
    os.close(fd)


def replace(path, data, mode=0o600, sync=True):
    """Atomically make *path* contain *data* (bytes or str). sync=False skips the
    fsyncs (a power loss may bring back the old or an empty file): only where
    the writer calls sync() later or the loss breaks no promise; say which."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    check_dirs(path)
    directory, base = os.path.split(path)
    tmp = os.path.join(directory, f".{base}.tmp.{os.getpid()}")
    try:
        try:
            write_new(tmp, data, mode, sync)
        except FileExistsError:      # a crashed earlier run of this pid: ours to clear
            os.unlink(tmp)
            write_new(tmp, data, mode, sync)
        os.rename(tmp, path)
        if sync:
            fsync_dir(directory or ".")
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise SystemFailure(f"cannot write {path}: {e.strerror}") from None


def read_json(path, at=None, limit=None):
    """The JSON document in *path*, or None if absent; ValueError if not JSON."""
    text = read_text(path, at, limit)
    return None if text is None else loads(text)


def write_named(path, data, mode=0o644):
    """Write *data* to a path the user named, as the shell's `>` would (run as
    root, a rename onto /dev/null once replaced the device with a regular file)."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise SystemFailure(f"cannot write {path}: {e.strerror}") from None
    if st is None or stat.S_ISREG(st.st_mode):
        # The link's target, not the link; a dangling one: the name it points at.
        replace(os.path.realpath(path), data, mode=mode)
        return
    try:
        # By the name given: /dev/stdout's link through /proc names no file.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, mode)
        try:
            write_all(fd, data)
        finally:
            os.close(fd)
    except OSError as e:
        raise SystemFailure(f"cannot write {path}: {e.strerror}") from None
