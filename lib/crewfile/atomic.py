"""The one atomic-replace helper: temporary name, fsync, rename, fsync dir.

A reader opening the file at any moment sees either the whole old content or
the whole new content, never a partial or empty file; a crash at any point
leaves at worst a stray temporary file (dot-named, cleaned by its writer's
next run or ignored by readers).
"""
import os

from .errors import BadFile, SystemFailure
from .paths import check_dirs, open_file, read_text  # noqa: F401 (read_text lived here)

_TMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def fsync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync(path):
    """Make a file published with replace(sync=False) durable: fsync it, then
    its directory."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        fsync_dir(os.path.dirname(path) or ".")
    except OSError as e:
        raise SystemFailure(f"cannot sync {path}: {e.strerror}") from None


def write_all(fd, data):
    """os.write until all of *data* is written (a short write is not an error).
    A descriptor somebody else opened non-blocking (job-wait's stdout, which
    the job watcher writes to) is waited on until it takes more."""
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except BlockingIOError:
            import select
            poller = select.poll()
            poller.register(fd, select.POLLOUT)
            poller.poll()
            continue
        view = view[n:]


def write_new(path, data, mode=0o600, sync=True):
    """Create *path* (never an existing file, never through a link), write
    *data* whole and fsync it (unless not *sync*). The first half of every
    atomic publication: the caller renames the file into place. OSError on
    failure, nothing left."""
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
    """Atomically make *path* contain *data* (bytes or str).

    sync=False skips both fsyncs: every reader still sees the old or the new
    content whole, but a power loss may bring back the old one (or an empty
    file). Only for a file whose writer makes it durable later (sync()) or
    whose loss in a crash breaks no promise; say which at the call."""
    Pending(path, mode, f"{os.getpid()}").commit(data, sync)


_pending_count = iter(range(1 << 62))


class Pending:
    """A replace() begun ahead of time: the temporary file is created now,
    commit() writes it and renames it into place (the same steps as
    replace(); replace() is one of these).

    Creating a file is the dear part of a publication (~0.4 ms of CPU on an
    ext4 here, against ~30 us to write and rename one made ahead): a writer
    on a latency path (the job watcher's `result`, job-wait's `heard`) makes
    it before its wait. Its name has the pid and a counter (threads of one
    process may each hold one); discard() removes it, and one left by a
    killed process is dot-named, ignored by readers.

    reserve=N: the file is also filled now with N blanks (spaces, a newline
    last) and fsynced, so its blocks exist on disk before its content is
    known. commit() then overwrites them in place (padded with blanks to the
    same size: no block allocated, no size changed), renames, and waits for
    the two flushes at once, the data's (fdatasync) and the directory's,
    instead of one after the other: half the latency of a durable write
    (two disk round trips made one). A crash before both return leaves the
    name absent, or present with the blanks, or present whole; never part
    of the content: a reader must take a file of blanks only as absent
    (protocol.md, "Atomic replace"). Only for a file written once (a new
    name: over an old file, a crash could leave blanks where its content
    was). Content longer than N is written the ordinary way. The thread
    that waits for the data's flush is started now too (_Flusher): starting
    one costs ~50 us, which a commit on a latency path should not pay."""

    __slots__ = ("path", "tmp", "fd", "reserved", "dir_fd", "flusher")

    def __init__(self, path, mode=0o600, tag=None, reserve=0):
        check_dirs(path)
        directory, base = os.path.split(path)
        tag = tag or f"{os.getpid()}.{next(_pending_count)}"
        self.path, self.tmp, self.fd = path, os.path.join(directory, f".{base}.tmp.{tag}"), None
        self.reserved, self.dir_fd, self.flusher = 0, None, None
        try:
            try:
                self.fd = os.open(self.tmp, _TMP_FLAGS, mode)
            except FileExistsError:      # a crashed earlier run of this pid: ours to clear
                os.unlink(self.tmp)
                self.fd = os.open(self.tmp, _TMP_FLAGS, mode)
            if reserve:
                write_all(self.fd, blanks(reserve))
                os.fsync(self.fd)        # its blocks and size, durable (its name need not be)
                self.dir_fd = os.open(directory or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                self.reserved = reserve
                self.flusher = _Flusher(self.fd)
        except OSError as e:
            self.discard()
            raise SystemFailure(f"cannot write {path}: {e.strerror}") from None

    def commit(self, data, sync=True):
        """Write *data* (bytes or str) whole, fsync it (if *sync*), rename it
        over the path, fsync the directory (if *sync*)."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        if self.reserved and sync and len(data.rstrip(b"\n")) < self.reserved:
            return self._commit_reserved(data)
        fd, self.fd = self.fd, None
        if self.flusher is not None:
            self.flusher.cancel()       # not needed: the ordinary way flushes here
            self.flusher = None
        try:
            try:
                if self.reserved:       # too long for it: the ordinary way
                    os.ftruncate(fd, 0)
                    os.lseek(fd, 0, os.SEEK_SET)
                write_all(fd, data)
                if sync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            os.rename(self.tmp, self.path)
            self.tmp = None
            if sync:
                fsync_dir(os.path.dirname(self.path) or ".")
        except OSError as e:
            self.discard()
            raise SystemFailure(f"cannot write {self.path}: {e.strerror}") from None
        finally:
            self._close_dir()

    def _commit_reserved(self, data):
        size = self.reserved
        body = data.rstrip(b"\n")
        padded = body + blanks(size - len(body))       # the same size: nothing allocated
        fd, self.fd = self.fd, None
        flusher, self.flusher = self.flusher, None
        try:
            view = memoryview(padded)
            offset = 0
            while offset < size:
                offset += os.pwrite(fd, view[offset:], offset)
            os.rename(self.tmp, self.path)
            renamed, self.tmp = self.path, None
            # The data's flush in the flusher's thread (the GIL is let go in
            # the call), the directory's here: both in flight at once.
            flusher.start()
            try:
                os.fsync(self.dir_fd)
            finally:
                flusher.wait()
        except OSError as e:
            flusher.cancel()
            if self.tmp is None:
                # Renamed, but not durable: no reader may take it as written.
                try:
                    os.unlink(renamed)
                except OSError:
                    pass
            self.discard()
            raise SystemFailure(f"cannot write {self.path}: {e.strerror}") from None
        finally:
            os.close(fd)
            self._close_dir()

    def _close_dir(self):
        if self.dir_fd is not None:
            os.close(self.dir_fd)
            self.dir_fd = None

    def discard(self):
        """Give up: the temporary file goes (nothing was published)."""
        if self.flusher is not None:
            self.flusher.cancel()
            self.flusher = None
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        self._close_dir()
        if self.tmp is not None:
            try:
                os.unlink(self.tmp)
            except OSError:
                pass
            self.tmp = None


class _Flusher:
    """A thread, started ahead, that fdatasyncs one descriptor when told to
    (start()) and then ends; wait() returns once it has (raising its
    OSError). cancel(): it ends without touching the descriptor. No thread
    to be had: start() flushes in the caller's thread (one flush after the
    other, as slow as the ordinary way, never wrong)."""

    __slots__ = ("fd", "go", "done", "threaded", "told", "cancelled", "error")

    def __init__(self, fd):
        import _thread
        self.fd, self.told, self.cancelled, self.error = fd, False, False, None
        self.go, self.done = _thread.allocate_lock(), _thread.allocate_lock()
        self.go.acquire()
        self.done.acquire()
        try:
            _thread.start_new_thread(self._run, (self.go, self.done))
            self.threaded = True
        except RuntimeError:
            self.threaded = False

    def _flush(self):
        try:
            os.fdatasync(self.fd)
        except OSError as e:
            self.error = e

    def _run(self, go, done):
        go.acquire()
        try:
            if not self.cancelled:
                self._flush()
        finally:
            done.release()

    def start(self):
        self.told = True
        if self.threaded:
            self.go.release()
        else:
            self._flush()

    def wait(self):
        if self.threaded:
            self.done.acquire()
            self.threaded = False       # waited for: once
        if self.error is not None:
            raise self.error

    def cancel(self):
        if not self.told:
            self.told = self.cancelled = True
            if self.threaded:
                self.go.release()       # it ends without a flush
                self.threaded = False


def blanks(n):
    """n bytes a reader takes as no content: spaces, a newline last."""
    return b" " * (n - 1) + b"\n"


def is_blank(text):
    """A file reserved ahead (Pending reserve=N) that a crash left unwritten."""
    return not text.strip()


def read_json(path, at=None, limit=None):
    """The JSON document in *path*, or None if it does not exist.

    ValueError if it is not JSON. Parsed by jsonio (json's C scanner without
    json's import cost: these reads sit on hooks' and pipelines' start-up).
    at, limit: as for read_text.
    """
    from .jsonio import loads
    text = read_text(path, at, limit)
    return None if text is None else loads(text)


def write_named(path, data, mode=0o644):
    """Write *data* (bytes or str) to a path the user named, the way the
    shell's `>` would: a regular file or a new name is replaced atomically
    (replace()), anything else (a device such as /dev/null or /dev/stdout,
    a FIFO, a socket) is opened and written, never renamed over. A
    symbolic link is followed to its target by the same rule: the link
    stays, the target gets the content (renaming over the link would have
    cut it). Issue: run as root, a rename onto /dev/null replaced the
    device node with a regular file."""
    import stat
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
    if isinstance(data, str):
        data = data.encode("utf-8")
    try:
        # By the name given: /dev/stdout's link through /proc names no file.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, mode)
        try:
            write_all(fd, data)
        finally:
            os.close(fd)
    except OSError as e:
        raise SystemFailure(f"cannot write {path}: {e.strerror}") from None
