"""inotify, or polling every POLL seconds when it cannot be had (said once): the
one way a waiting command subscribes to changes (protocol.md, "inotify or polling").
"""
import errno
import os
import sys
import time

POLL = 1.0
# what ran out -> (the setting that bounds it, a value to raise it to)
_LIMITS = {"instances": ("fs.inotify.max_user_instances", 1024),
           "watches": ("fs.inotify.max_user_watches", 524288)}


def warn_stderr(msg):
    """The default: one line on stderr, prefixed with the command's name."""
    sys.stderr.write(f"{os.path.basename(sys.argv[0] or 'crewfile')}: {msg}\n")
    sys.stderr.flush()


def open_inotify(warn=warn_stderr):
    """An inotify_simple.INotify, or None after saying why we poll instead."""
    try:
        from inotify_simple import INotify
    except ImportError:
        warn(f"inotify is not available (the inotify_simple package is not installed);"
             f" polling every {POLL:g} s instead (install it: pip install inotify-simple)")
        return None
    try:
        return INotify()
    except OSError as e:
        warn(fallback_text(e, "instances"))
        return None


def fallback_text(err, what):
    """One line: what ran out, that we poll, how to raise the limit."""
    if err.errno in (errno.EMFILE, errno.ENOSPC, errno.ENFILE):
        setting, raise_to = _LIMITS[what]
        try:
            with open("/proc/sys/" + setting.replace(".", "/")) as f:
                limit = f.read().strip()
        except OSError:
            limit = "?"
        why = (f"inotify {what} are exhausted ({err.strerror}; {setting} = {limit})"
               if err.errno != errno.ENFILE else f"no file descriptors left ({err.strerror})")
        return (f"{why}; polling every {POLL:g} s instead; raise the limit:"
                f" sysctl {setting}={raise_to}")
    return f"inotify failed ({err.strerror}); polling every {POLL:g} s instead"


def _entries(d):
    """{entry: identity} of directory *d* ({} if it cannot be listed)."""
    try:
        names = os.listdir(d)
    except OSError:
        return {}
    return {name: _ident(os.path.join(d, name)) for name in names}


def _ident(path):
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


class DirWatch:
    """Wake on any change in a set of directories: inotify on each (never on files,
    so a rename-replace cannot kill a watch), else polling snapshots."""

    def __init__(self, warn=warn_stderr):
        self.warn = warn
        self.ino = open_inotify(warn)
        # directory -> its watch descriptor (polling: its snapshot); descriptor -> directory
        self.dirs, self._wd = {}, {}
        if self.ino is not None:
            from inotify_simple import flags
            self.mask = (flags.MODIFY | flags.CLOSE_WRITE | flags.MOVED_TO | flags.MOVED_FROM
                         | flags.CREATE | flags.DELETE | flags.ONLYDIR | flags.DONT_FOLLOW)

    def add(self, d):
        """Watch *d*; False when it cannot be (not kept: a later add() tries again)."""
        if d in self.dirs:
            return True
        if self.ino is not None:
            try:
                wd = self.ino.add_watch(d, self.mask)
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    return False        # gone, not a directory, not readable
                self.warn(fallback_text(e, "watches"))
                self.close()            # no watch left: poll everything from now on
                self.dirs = {known: _entries(known) for known in self.dirs}
            else:
                self.dirs[d], self._wd[wd] = wd, d
                return True
        self.dirs[d] = _entries(d)
        return True

    def forget(self, d):
        """Stop watching *d* (gone, or another has its name: add() that again)."""
        wd = self.dirs.pop(d, None)
        if self.ino is not None and wd is not None:
            self._wd.pop(wd, None)
            try:
                self.ino.rm_watch(wd)
            except OSError:
                pass                    # already gone with its directory

    def changes(self, timeout, settle=0.02):
        """The (directory, entry or '') changed within *timeout* seconds, or None
        when the kernel's queue overflowed. A burst gets *settle* seconds to land."""
        if self.ino is None:
            deadline = time.monotonic() + timeout
            while True:
                found = set()
                for d, last in self.dirs.items():
                    now = _entries(d)
                    found.update((d, n) for n in set(now) | set(last) if now.get(n) != last.get(n))
                    self.dirs[d] = now
                left = deadline - time.monotonic()
                if found or left <= 0:
                    return found
                time.sleep(min(POLL, left))
        from inotify_simple import flags
        events = self.ino.read(timeout=int(timeout * 1000))
        if events and settle:
            events += self.ino.read(timeout=int(settle * 1000))
        found = set()
        for e in events:
            if e.mask & flags.Q_OVERFLOW:
                return None
            d = self._wd.get(e.wd)
            if d is None:
                continue
            if e.mask & flags.IGNORED:              # its directory is gone
                del self._wd[e.wd]
                if self.dirs.get(d) == e.wd:
                    del self.dirs[d]
            found.add((d, e.name))
        return found

    def fileno(self):
        """The descriptor a poll(2) waits on for changes (None when polling)."""
        return None if self.ino is None else self.ino.fileno()

    def reset(self):
        """Forget every directory (they were replaced): add them again."""
        self.dirs, self._wd = {}, {}
        if self.ino is not None:
            self.ino.close()
            self.ino = open_inotify(self.warn)

    def wait(self, timeout):
        """True if something changed (or may have) within *timeout* seconds."""
        found = self.changes(timeout)
        return found is None or bool(found)

    def close(self):
        if self.ino is not None:
            self.ino.close()
            self.ino = None


def identity(path):
    """(st_dev, st_ino) of *path*, or None: a directory replaced, deleted or
    unmounted under a watcher changes it."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)
