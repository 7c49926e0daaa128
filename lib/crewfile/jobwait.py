"""Waiting for a job, and the one decision: reported by a wait, or announced.

See jobs.py for the job directory. The choice is made under ONE lock, the
job's `lock` (the watcher's half is jobwatch.settle()). A waiter registers
by holding a shared flock on `waiters` (taken under `lock`), so a waiter
killed by SIGKILL is deregistered by the kernel. The watcher, under `lock`, writes `result`, then tries an exclusive
non-blocking flock on `waiters`: busy means someone waits. It then does not
announce, but blocks until every waiter has let go and decides again: if by
then nobody wrote `heard` (the waiter was killed after the result landed),
it announces. Lock order is always `lock` -> `waiters` (non-blocking), or
`waiters` alone; never the other way while blocking, so nothing deadlocks.
"""
import os
import time

from .atomic import Pending, replace
from .errors import JOB_ERROR as ERROR_EXIT, JOB_HEARD as HEARD_EXIT, JOB_TIMEOUT as TIMEOUT_EXIT
from .errors import NotFound, SystemFailure
from .jobs import POST_WAIT, Job, dump_json, duration_text, ended_text, heard_record
from .locks import acquire


def _hear(job, res, pending=None):
    """Under `lock`: this wait reports the outcome, unless it was heard already.

    Announced but still pending in the inbox (the model has not been handed
    it): the notice is withdrawn and this wait reports the outcome as its
    own. Handed over (drained) already: the model has it, and the wait says
    so without repeating it (state 'heard').

    `heard` by=wait is written without fsync: its reader that matters, the
    watcher deciding whether to announce, is alive and reads the page cache;
    a power loss kills that watcher too, so nothing can announce the outcome
    again, and the worst a lost `heard` does is list the (durable) outcome
    as unheard. The outcome itself was durable before we could read it.
    """
    heard = job.heard()
    taken = None
    if heard is not None:
        if heard.get("by") == "notice" and _withdraw(job, heard.get("id")):
            taken = heard["id"]
        elif heard.get("by") == "notice":
            return Outcome(job, "heard", res, False, heard)
        else:
            return Outcome(job, "done", res, False, heard)
    heard = heard_record("wait", job.spec(), res, pid=os.getpid())
    if taken:
        heard["withdrawn"] = taken
    if pending is not None:
        pending.commit(dump_json(heard), sync=False)
    else:
        replace(job.heard_path, dump_json(heard), sync=False)
    return Outcome(job, "done", res, True, heard)


def _withdraw(job, nid):
    """Withdraw the job's pending notice *nid*: True if it had not reached the model."""
    from . import inbox
    from .errors import CrewfileError
    try:
        session = job.spec().get("session")
        return bool(session and isinstance(nid, str)
                    and inbox.withdraw(job.crew, session, nid, timeout=POST_WAIT))
    except CrewfileError:
        return False        # session gone, or its lock stuck: the notice stays, and will be read


class Outcome:
    """What a wait found: state 'done', 'timeout', 'lost', or 'heard' (the
    notice has reached the model: the outcome is not repeated)."""

    def __init__(self, job, state, result=None, heard_here=False, heard=None, waited=0.0):
        self.job, self.state, self.result = job, state, result
        self.heard_here, self.heard, self.waited = heard_here, heard, waited

    @property
    def code(self):
        if self.state == "timeout":
            return TIMEOUT_EXIT
        if self.state == "lost":
            return ERROR_EXIT
        if self.state == "heard":
            return HEARD_EXIT
        return self.result.get("code", ERROR_EXIT)

    def line(self):
        """The result line job-wait prints first."""
        h = self.job.handle
        if self.state == "timeout":
            return f"{h} running: timed out after waiting {duration_text(self.waited)}"
        if self.state == "lost":
            alive = self.job.group_alive()
            where = {True: "still running", False: "gone", None: "unknown"}[alive]
            pg = (self.job.pids() or {}).get("pgid")
            return (f"{h} lost: fate unknown (watcher lost); process group "
                    f"{pg if pg else '-'} {where}")
        if self.state == "heard":
            return f"{h} heard already by notice {self.heard.get('id')}: not repeated"
        by = self.heard.get("by", "?") if self.heard else "?"
        heard = "heard by this wait" if self.heard_here else f"heard already by {by}"
        return f"{h} {ended_text(self.result)}; {heard}"


def wait(crew, handle, timeout=None, exiting=False):
    """Wait for the job's outcome (inotify; polling when it cannot be had,
    see notify.py); return an Outcome.

    The waiter counts itself in (shared flock on `waiters`, taken under
    `lock`) and out; an outcome that lands while it waits is its to report.
    exiting: the caller exits once it has the answer (job-wait): see
    _share_with_helper().
    """
    job = Job(crew, handle).check()
    job.spec()              # read now, off the path from the job's end to our answer
    t0 = time.monotonic()
    res = job.result()
    ino = pending = None
    waiting = res is None
    if waiting:
        try:
            pending = Pending(job.heard_path)   # made now: off the path from the job's end to our answer
        except SystemFailure:
            pass                    # _hear tries again, and fails loudly
        from . import notify        # only a real wait pays for inotify
        ino = notify.open_inotify()
        if ino is not None:
            from inotify_simple import flags
            # Subscribe before looking: an outcome landing from now on wakes us.
            # Every file we publish is renamed into place (MOVED_TO); CLOSE_WRITE
            # is left out: opening a lock file to probe it would wake us.
            if notify.add_watch(ino, job.dir, flags.MOVED_TO | flags.DELETE_SELF
                                | flags.MOVE_SELF) is None:
                ino.close()
                ino = None
            elif exiting:
                _share_with_helper(ino)
    registration = None
    try:
        with acquire(job.lock_path):
            res = job.result()
            if res is not None:
                return _hear(job, res)
            if not waiting:
                raise NotFound(f"no job {handle!r}")
            registration = acquire(job.waiters_path, shared=True)
        return _wait_registered(job, ino, registration, timeout, t0, pending)
    finally:
        if pending is not None:
            pending.discard()       # not used (or used: then nothing to do)
        # A waiter that exits with the answer (job-wait) counts itself out by
        # exiting: letting go here would wake the watcher (and its exit) to
        # compete for the CPU with our printing the answer. `heard` is
        # written, or we failed: either way the watcher decides right.
        if registration is not None and not exiting:
            registration.release()
        if ino is not None:
            if exiting:
                ino.close()             # cheap: the helper holds a reference
            else:
                import threading
                threading.Thread(target=ino.close, daemon=True).start()


# Closing the last descriptor of an inotify instance waits for the kernel's
# fsnotify reaper (an SRCU grace period: ~16 ms measured here), and so does
# exiting with it open. A waiter has its answer by then: let someone else pay.
# In a process that goes on, a thread closes it; in one that exits (job-wait),
# a helper shares it.

def _share_with_helper(ino):
    """Give a helper a reference to the inotify instance, taken before the
    wait (off the answer's path): `cat`, spawned with vfork, reading a pipe
    whose only writer is this process. When this process exits, cat sees
    EOF and exits, and pays for the teardown; nobody waits for it."""
    fd = ino.fileno()
    r, w = os.pipe()                    # w stays open (not inherited) until we exit
    try:
        os.set_inheritable(fd, True)
        os.posix_spawnp("cat", ["cat"], {"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                        file_actions=[(os.POSIX_SPAWN_DUP2, r, 0),
                                      (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                                      (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0)])
    except OSError:
        os.close(w)                     # no helper: we pay for the close ourselves
    finally:
        os.set_inheritable(fd, False)
        os.close(r)


def _wait_registered(job, ino, registration, timeout, t0, pending):
    import select
    from .notify import POLL
    poller = select.poll()
    if ino is not None:
        poller.register(ino.fileno(), select.POLLIN)
    pidfd = None
    deadline = None if timeout is None else t0 + timeout
    try:
        while True:
            if os.path.lexists(job.result_path):
                with acquire(job.lock_path):
                    res = job.result()
                    if res is not None:
                        return _hear(job, res, pending)
            if not os.path.isdir(job.dir):
                raise NotFound(f"job {job.handle!r} was removed while waiting")
            if pidfd is None:
                pidfd = _watch_watcher(job, poller)
            if job.fate() == "lost":
                with acquire(job.lock_path):
                    res = job.result()
                    if res is not None:
                        return _hear(job, res, pending)
                    return Outcome(job, "lost", waited=time.monotonic() - t0)
            if deadline is None:
                ms = None
            else:
                # At most a day per poll(2): its timeout is a C int of ms.
                ms = min(int((deadline - time.monotonic()) * 1000) + 1, 86400000)
                if ms <= 0:
                    with acquire(job.lock_path):
                        res = job.result()
                        if res is not None:
                            return _hear(job, res, pending)
                        # Count out under the lock: from here on the watcher announces.
                        registration.release()
                        return Outcome(job, "timeout", waited=time.monotonic() - t0)
            if ino is None:         # polling: look again every POLL seconds
                ms = int(POLL * 1000) if ms is None else min(ms, int(POLL * 1000))
            events = poller.poll(ms)
            if ino is not None and any(fd == ino.fileno() for fd, _ in events):
                ino.read(timeout=0)
    finally:
        if pidfd is not None:
            os.close(pidfd)


def _watch_watcher(job, poller):
    """A pidfd that becomes readable when the watcher exits (None if not known yet)."""
    import select
    pids = job.pids()
    if not pids or not pids.get("watcher"):
        return None
    try:
        fd = os.pidfd_open(pids["watcher"])
    except (ProcessLookupError, OSError, AttributeError):
        return None
    from .liveness import process_start
    if process_start(pids["watcher"]) != pids.get("watcher_start"):
        os.close(fd)                 # a recycled pid: the watcher is gone (fate() says so)
        return None
    poller.register(fd, select.POLLIN)
    return fd
