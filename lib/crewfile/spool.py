"""Writes kept aside while a session's lock is stuck: the spool.

A process somebody waits on (a hook: its agent; wake-send: the pipe) sets a
bound on its lock waits (locks.bound_waits). When sessions/NAME/lock is
still held at the bound (a shell writer that hangs, a stopped process), what
it had to write is not dropped and not waited for: it becomes one entry in
sessions/NAME/spool/ (written under a dot-name, fsynced, renamed into
place) and the writer goes on. Whoever next holds the lock through lock()
(every crewfile writer of the session does) first appends the spool, in
name order, then does its own write. A flusher started by the spooling
writer waits for the lock in the background, so the records of a session
that has gone quiet are not held back either.

Order: entry names begin with the time in nanoseconds, so entries are
appended in the order they were kept, and before any write whose writer
started after they were kept (every locked writer flushes first). Two
writers that ran at the same time have no order to keep.

Exactly once: before appending an entry to a log, the flusher writes
spool/.journal (the entry, the log's inode and the offset the write starts
at); after, it removes the entry, then the journal. A flusher killed in
between is finished by the next holder: if the log holds the entry's bytes
at that offset the entry is only removed; if it holds a prefix of them and
nothing after (a write cut short), the prefix is cut and the entry appended
again. A meta entry (fields to merge) needs no journal: merging it twice
gives the same metadata.
"""
import os
import time

from . import paths
from .locks import LockBusy, acquire

JOURNAL, FLUSHER, BAD = ".journal", ".flusher", ".bad."
MAX_ENTRY = 1 << 20
kept = []          # one line per write this process kept aside (the caller says it)
_count = 0


def spool_dir(sdir):
    return os.path.join(sdir, paths.SPOOL)


def lock(sdir, timeout=None):
    """Hold sessions/NAME/lock with the spool appended: how a writer takes it.

    LockBusy when this process's bound (or *timeout*, seconds) runs out first."""
    path = os.path.join(sdir, paths.LOCK)
    held = acquire(path, timeout)
    if held is None:
        raise LockBusy(path)
    try:
        flush(sdir)
    except Exception as e:          # a spool we cannot append must not stop this writer
        kept.append(f"spool of {sdir} not appended: {e}")
    return held


def append(sdir, target, lines):
    """Append *lines* to sessions/NAME/TARGET (status or inbox) under the
    session lock; keep them in the spool if the lock is stuck."""
    from . import logfile
    try:
        held = lock(sdir)
    except LockBusy as e:
        put(sdir, target, "".join(lines).encode("utf-8"), e)
        return False
    with held:
        logfile.append_locked(os.path.join(sdir, target), lines, rotate=_rotate(target))
    return True


def put(sdir, target, data, why):
    """Publish one entry (the bytes of one write to TARGET) and make sure a
    flusher will append it."""
    global _count
    from .atomic import fsync_dir, write_new
    from .errors import SystemFailure
    d = paths.ensure_dir(spool_dir(sdir))
    _count += 1
    name = f"{time.time_ns():020d}.{os.getpid()}.{_count}.{target}"
    tmp = os.path.join(d, "." + name)
    try:
        write_new(tmp, data)
        os.rename(tmp, os.path.join(d, name))
        fsync_dir(d)
    except OSError as e:
        raise SystemFailure(f"cannot keep a {target} write in {d}: {e.strerror}") from None
    kept.append(f"{why}; the {target} write is kept in {d} and appended when the lock frees")
    _start_flusher(sdir)


def _rotate(target):
    from . import logfile
    return logfile.rotate_limits() if target == paths.STATUS else None


def _entries(d):
    try:
        return sorted(n for n in os.listdir(d) if not n.startswith("."))
    except OSError:          # no spool (the usual case), or not a directory
        return []


def flush(sdir):
    """Append every entry of the spool (the caller holds the session lock)."""
    d = spool_dir(sdir)
    try:
        if not os.path.lexists(os.path.join(d, JOURNAL)):
            names = _entries(d)
            if not names:
                return
        else:
            _recover(sdir, d)
            names = _entries(d)
    except NotADirectoryError:
        return
    for name in names:
        _apply(sdir, d, name)


def _read(path):
    """An entry's bytes; None if it is not a regular file of a sane size."""
    import stat
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_ENTRY:
            return None
        return os.pread(fd, st.st_size, 0)
    finally:
        os.close(fd)


def _apply(sdir, d, name):
    from . import logfile
    from .atomic import replace
    path = os.path.join(d, name)
    target = name.rsplit(".", 1)[-1]
    data = _read(path)
    if data is None or target not in (paths.STATUS, paths.INBOX, paths.META):
        _set_aside(d, name, "not a spool entry")
        return
    if target == paths.META:
        _merge_meta(sdir, d, name, data)
        os.unlink(path)
        return
    if not data.endswith(b"\n"):
        _set_aside(d, name, "not whole lines")
        return
    journal = os.path.join(d, JOURNAL)

    def note(ino, off):
        from . import jsonio
        replace(journal, jsonio.dumps({"entry": name, "ino": ino, "off": off}) + "\n")
    logfile.append_locked(os.path.join(sdir, target), data, rotate=_rotate(target),
                          before_write=note)
    os.unlink(path)
    os.unlink(journal)


def _merge_meta(sdir, d, name, data):
    from . import jsonio
    from .atomic import read_json, replace
    try:
        fields = jsonio.loads(data.decode("utf-8"))
        meta = read_json(os.path.join(sdir, paths.META))
    except (ValueError, UnicodeDecodeError):
        fields = meta = None
    if not isinstance(fields, dict) or not isinstance(meta, dict):
        _set_aside(d, name, "meta or the entry is not a JSON object")
        return
    meta.update(fields)
    import json
    replace(os.path.join(sdir, paths.META), json.dumps(meta, indent=1, sort_keys=True) + "\n")


def _set_aside(d, name, why):
    """An entry we cannot append is renamed out of the way (said once, never retried)."""
    try:
        os.rename(os.path.join(d, name), os.path.join(d, BAD + name))
    except OSError:
        pass
    kept.append(f"{os.path.join(d, name)}: {why}; set aside as {BAD}{name}")


def _recover(sdir, d):
    """Finish the append a killed flusher was doing (see the module docstring)."""
    from . import jsonio
    journal = os.path.join(d, JOURNAL)
    try:
        with open(journal, "rb") as f:
            j = jsonio.loads(f.read().decode("utf-8"))
        name, ino, off = j["entry"], j["ino"], j["off"]
        entry = os.path.join(d, name)
        data = _read(entry) if isinstance(name, str) and "/" not in name else None
    except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError):
        data = None
    if data is not None and isinstance(ino, int) and isinstance(off, int) and off >= 0:
        target = os.path.join(sdir, name.rsplit(".", 1)[-1])
        try:
            fd = os.open(target, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            fd = None
        if fd is not None:
            try:
                st = os.fstat(fd)
                if st.st_ino == ino:
                    landed = os.pread(fd, len(data), off)
                    if landed == data:
                        os.unlink(entry)                 # it was appended: done
                    elif data.startswith(landed) and st.st_size == off + len(landed):
                        os.ftruncate(fd, off)            # cut short: append it again
            finally:
                os.close(fd)
    os.unlink(journal)


# -- the background flusher ------------------------------------------------------

def _start_flusher(sdir):
    """Make sure a flusher will append what is in the spool.

    A flusher holds spool/.flusher for as long as it waits and appends, and
    looks at the spool again after letting it go. So: if we get .flusher, no
    flusher is running and we start one (it inherits our hold); if we do
    not, the running one has not let go yet and will see our entry.
    """
    d = spool_dir(sdir)
    held = acquire(os.path.join(d, FLUSHER), timeout=0)
    if held is None:
        return
    try:
        pid = os.fork()
    except OSError:
        held.release()
        return
    if pid:
        held.release()           # our copy only: the child's descriptor keeps the flock
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
        return
    try:                        # the child: detach, so nobody waits for it
        os.setsid()
        if os.fork():
            os._exit(0)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.closerange(3, held.fd)
        os.closerange(held.fd + 1, 1 << 16)
        _flusher(sdir, held)
    finally:
        os._exit(0)


def _flusher(sdir, held):
    from . import locks
    locks.bound_waits(None)
    d = spool_dir(sdir)
    before = None
    while held is not None:
        with held:
            with lock(sdir):       # waits as long as the stuck holder holds on
                pass
        names = _entries(d)
        if not names or names == before:
            return               # done, or entries it cannot append (said by lock())
        before = names
        held = acquire(os.path.join(d, FLUSHER), timeout=0)
