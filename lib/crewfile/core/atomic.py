"""The one atomic-replace helper: temporary name, fsync, rename, fsync dir
(protocol.md, "Atomic replace")."""
import os
import stat
from itertools import count

from crewfile.core.errors import SystemFailure
from crewfile.core.jsonio import loads
from crewfile.core.paths import check_dirs, list_dir, read_text

_TMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_serial = count()                  # N of `.NAME.tmp.PID.N`: next() is atomic under the GIL


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


def write_new(path, data):
    """Create *path* (never an existing file or a link), write *data* whole and
    fsync it: the first half of a publication. OSError: nothing left."""
    fd = os.open(path, _TMP_FLAGS, 0o600)
    try:
        write_all(fd, data)
        os.fsync(fd)
    except OSError:
        os.close(fd)
        os.unlink(path)
        raise
    os.close(fd)


class Prepared:
    """A temporary file made (make(), or prepare()) ahead of its data:
    commit() publishes it as *path* (write, fsync, rename, fsync dir),
    discard() removes it. Made early, the file's creation is off the path
    from an event to its record (the job's end to job-wait's answer). Named
    `.NAME.tmp.PID.N`, N counted per process: several threads each hold one
    of the same file."""

    def __init__(self, path, mode=0o600):
        check_dirs(path)
        self.path = path
        directory, base = os.path.split(path)
        self.directory = directory or "."
        self.tmp = os.path.join(directory, f".{base}.tmp.{os.getpid()}.{next(_serial)}")
        self.mode, self.fd = mode, None

    def make(self):
        """Create the temporary: named before, so that discard() finds it
        however far this got (a ^C between the open and its answer)."""
        try:
            try:
                self.fd = os.open(self.tmp, _TMP_FLAGS, self.mode)
            except FileExistsError:     # a crashed process with our pid: ours to clear
                os.unlink(self.tmp)
                self.fd = os.open(self.tmp, _TMP_FLAGS, self.mode)
        except OSError as e:
            self.tmp = None
            raise SystemFailure(f"cannot write {self.path}: {e.strerror}") from None
        return self

    def commit(self, data, sync=True):
        """Make *path* contain *data* (bytes or str), once; sync: see replace()."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        try:
            check_dirs(self.path)       # (a level may have changed since the temporary was made)
            write_all(self.fd, data)
            if sync:
                os.fsync(self.fd)
            os.close(self.fd)
            self.fd = None
            os.rename(self.tmp, self.path)
            self.tmp = None
            if sync:
                fsync_dir(self.directory)
        except OSError as e:
            self.discard()
            raise SystemFailure(f"cannot write {self.path}: {e.strerror}") from None
        except BaseException:
            self.discard()
            raise

    def discard(self):
        """Remove the temporary file, unless committed; never fails."""
        if self.fd is not None:
            fd, self.fd = self.fd, None
            os.close(fd)
        if self.tmp is not None:
            tmp, self.tmp = self.tmp, None
            try:
                os.unlink(tmp)
            except OSError:
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.discard()


def prepare(path, mode=0o600):
    """The first half of replace(), done ahead: a Prepared for *path*, made."""
    return Prepared(path, mode).make()


def clear_temporaries(directory, of=None):
    """Remove every temporary (`.NAME.tmp.*`; of: of NAME alone) in *directory*:
    the leftovers of writers killed before their rename. Only for a caller
    who knows, by a lock, that no writer of them is at work there."""
    try:
        names = list_dir(directory)
    except (FileNotFoundError, SystemFailure):
        return
    for name in names:
        if (name.startswith(f".{of}.tmp.") if of else
                name.startswith(".") and ".tmp." in name):
            try:
                os.unlink(os.path.join(directory, name))
            except OSError:
                pass


def replace(path, data, mode=0o600, sync=True):
    """Atomically make *path* contain *data* (bytes or str). sync=False skips the
    fsyncs (a power loss may bring back the old or an empty file): only where
    the writer calls sync() later or the loss breaks no promise; say which."""
    prepare(path, mode).commit(data, sync)


def read_json(path):
    """The JSON document in *path*, or None if absent; ValueError if not JSON."""
    text = read_text(path)
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
