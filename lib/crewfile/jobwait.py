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

A waiter may hand itself to the watcher (HandOver: job-wait does): it
sends, under `lock`, where its answer goes (its stdout and stderr and a
pipe for its exit code) through the job's `socket`, and the watcher, which
is awake at the job's end anyway, answers it (Request) as this module
would: no second process is woken between the job's end and the answer.
"""
import os
import time

from .atomic import Pending, replace, sync, write_all
from .errors import JOB_ERROR as ERROR_EXIT, JOB_HEARD as HEARD_EXIT, JOB_TIMEOUT as TIMEOUT_EXIT
from .errors import NotFound, SystemFailure
from .jobs import POST_WAIT, Job, dump_json, duration_text, ended_text, heard_record
from .locks import LockFile, acquire


def _hear(job, res, pending=None, waiter=None, again=False):
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
    waiter, again: see wait().
    """
    waiter = waiter or os.getpid()
    if not job.watcher_alive():
        # The watcher is gone: it may have been killed between renaming
        # `result` into place and its flushes returning (atomic.Pending,
        # reserve). Made durable here, then, before anyone hears it.
        sync(job.result_path)
    heard = job.heard()
    taken = None
    if heard is not None:
        if heard.get("by") == "notice" and _withdraw(job, heard.get("id")):
            taken = heard["id"]
        elif heard.get("by") == "notice":
            return Outcome(job, "heard", res, False, heard)
        else:
            return Outcome(job, "done", res, again and heard.get("pid") == waiter, heard)
    heard = heard_record("wait", job.spec(), res, pid=waiter)
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


def wait(crew, handle, timeout=None, exiting=False, hand_over=None, waiter=None, again=False):
    """Wait for the job's outcome; return an Outcome.

    The waiter counts itself in (shared flock on `waiters`, taken under
    `lock`) and out; an outcome that lands while it waits is its to report.
    It waits by asking for a shared flock on `running`, which the watcher holds
    until the outcome is durable (or it dies): the kernel wakes the waiter
    the moment it lets go. No inotify, no polling, no pidfd: nothing that can
    run out, and one wake-up between the outcome and the answer.
    exiting: the caller exits once it has the answer (job-wait), which counts
    it out. hand_over(job): when a first look found no outcome, a HandOver
    made ready outside `lock` (off the path from the job's end to the
    answer), then sent under it if a second look finds none either: the
    watcher counts it and answers it; its then() does not return. If it
    cannot be sent, this counts itself in and waits. waiter: the pid
    `heard` names (default: this process's). again: this is a job-wait its
    shell ran again, the watcher it handed itself to having given no code:
    a `heard` naming its pid was written for it (the watcher heard the
    outcome for it, then died): heard by this wait.
    """
    job = Job(crew, handle).check()
    job.spec()              # read now, off the path from the job's end to our answer
    t0 = time.monotonic()
    deadline = None if timeout is None else t0 + timeout
    registration = pending = lock_file = ready = None
    try:
        while True:
            with acquire(job.lock_path):
                res = job.result()
                if res is not None:
                    return _hear(job, res, waiter=waiter, again=again)
                sent = ready is not None and ready.send(t0, deadline)
                if hand_over is None or ready is not None:
                    if not sent:
                        registration = acquire(job.waiters_path, shared=True)
                    break
            ready = hand_over(job)
        if sent:
            ready.then(ready.code)
        try:
            pending = Pending(job.heard_path)   # made now: off the path from the job's end to our answer
        except SystemFailure:
            pass                    # _hear tries again, and fails loudly
        lock_file = LockFile(job.lock_path)     # opened now, for the same reason
        return _wait_registered(job, registration, deadline, t0, pending, waiter, again, lock_file)
    finally:
        for made in (lock_file, ready):
            if made is not None:
                made.close()
        if pending is not None:
            pending.discard()       # not used (or used: then nothing to do)
        # A waiter that exits with the answer (job-wait) counts itself out by
        # exiting: letting go here would wake the watcher (and its exit) to
        # compete for the CPU with our printing the answer. `heard` is
        # written, or we failed: either way the watcher decides right.
        if registration is not None and not exiting:
            registration.release()


POLL = 1.0      # seconds between looks when `running` cannot tell (see below)


def _wait_registered(job, registration, deadline, t0, pending, waiter, again, lock_file):
    nap = None
    while True:
        left = None if deadline is None else deadline - time.monotonic()
        if nap is not None:         # polling (see below)
            time.sleep(nap if left is None else max(0.0, min(nap, left)))
            let_go = True
        elif left is None or left > 0:
            let_go = _let_go(job.running_path, left)
        else:
            let_go = False
        if not os.path.isdir(job.dir):
            raise NotFound(f"job {job.handle!r} was removed while waiting")
        with lock_file.take():
            res = job.result()
            if res is not None:
                return _hear(job, res, pending, waiter, again)
            if let_go:
                # `running` is let go after `result` is written, or by the
                # kernel when the watcher dies: no result, so it died...
                if not job.watcher_alive():
                    return Outcome(job, "lost", waited=time.monotonic() - t0)
                # ...unless the watcher lives on (failing to write it, or
                # a job started before `running` was): look every POLL s.
                nap = POLL
            if deadline is not None and time.monotonic() >= deadline:
                # Count out under the lock: from here on the watcher announces.
                registration.release()
                return Outcome(job, "timeout", waited=time.monotonic() - t0)


def _let_go(path, timeout):
    """Block until nobody holds *path* exclusively (True), or *timeout*
    seconds pass (False; None: no limit). Once the watcher has let go of
    `running` it never takes it again, so a shared lock we are granted means
    it is gone for good; ours is let go at once."""
    if timeout is None:
        acquire(path, shared=True).release()
        return True
    # flock(2) has no timeout: a thread blocks in it (the GIL is free
    # meanwhile) and we wait for the thread at most *timeout*. If we give up
    # first, the thread lets go the moment it is granted the lock.
    import _thread
    done = _thread.allocate_lock()
    done.acquire()
    failed = []

    def block():
        try:
            acquire(path, shared=True).release()
        except BaseException as e:      # (a link, a FIFO: said by our caller, as without a timeout)
            failed.append(e)
        finally:
            done.release()
    _thread.start_new_thread(block, ())
    if not done.acquire(timeout=min(timeout, _thread.TIMEOUT_MAX)):
        return False
    if failed:
        raise failed[0]
    return True


def answer(outcome, tail=10, all_kept=False):
    """What job-wait prints of *outcome*, as bytes: the result line, then
    (ended or lost) the output's last *tail* lines, or all of it kept."""
    line = (outcome.line() + "\n").encode()
    if outcome.state != "done" and outcome.state != "lost":
        return line
    if not all_kept:
        return line + outcome.job.output(tail)
    data = outcome.job.output()
    if data and not data.endswith(b"\n"):
        data += b"\n"
    return line + data


# -- a wait handed to the watcher ---------------------------------------------------
#
# One datagram to the job's `socket`: the words below, and three descriptors
# (SCM_RIGHTS): where the answer goes, where a failure is said, and the
# write end of a pipe whose reader exits with the code written into it.
# The sender's pid (SCM_CREDENTIALS) is the waiter `heard` names.

REQUEST = b"job-wait 1"         # the request's first words: its format and version
_MAX_REQUEST = 128              # bytes: a longer datagram is no request
_MAX_TAIL = 1000000
_FDS = 3


class HandOver:
    """A wait's request to the job's watcher (job-wait's), made ready
    outside `lock`: the imports, the pipe and the socket (~1.5 ms, off the
    path from the job's end to the answer); sent under `lock`, so the
    watcher, which takes `lock` to write the outcome, has it in its queue
    by then. then(code): what the waiter does once it is sent, with
    *code*, the read end of the pipe its code will come through (job-wait
    becomes a shell that exits with it)."""

    def __init__(self, job, tail, all_kept, then):
        import _socket
        import stat
        import struct
        from .jobs import socket_address
        self.then, self.code, self.w, self.sock, self.at = then, None, None, None, None
        self.words = b"%s %d %d" % (REQUEST, tail, all_kept)
        try:
            if not stat.S_ISSOCK(os.lstat(job.socket_path).st_mode):
                return              # damaged (a file, a link): not ours to follow
            self.address, self.at = socket_address(job.socket_path)
            self.code, self.w = os.pipe()
            self.rights = [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, struct.pack("3i", 1, 2, self.w))]
            self.sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_DGRAM | _socket.SOCK_CLOEXEC)
        except (OSError, SystemFailure):
            self.close()            # no socket (a job made before it, a watcher gone): wait here

    def send(self, t0, deadline):
        """Under `lock`: True if the watcher has the request (and counts it)."""
        if self.sock is None:
            return False
        import _socket
        words = b"%s %.6f %s\n" % (self.words, t0, b"-" if deadline is None else b"%.6f" % deadline)
        try:
            self.sock.sendmsg([words], self.rights, _socket.MSG_DONTWAIT, self.address)
        except OSError:
            return False            # refused (its watcher gone), its queue full, our stdout closed...
        os.close(self.w)            # the watcher's copy is the one that counts
        self.w = None
        return True

    def close(self):
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        for name in ("code", "w", "at"):
            fd = getattr(self, name)
            if fd is not None:
                setattr(self, name, None)
                os.close(fd)


class Request:
    """A job-wait handed to the watcher: where its answer goes (out, err)
    and the pipe its code goes into (code). pid: the job-wait, as `heard`
    names it. t0, deadline: monotonic (one clock for every process)."""
    __slots__ = ("pid", "tail", "all_kept", "t0", "deadline", "out", "err", "code")

    def wanted(self):
        """False once the job-wait is gone (killed: the pipe has no reader)."""
        import select
        poller = select.poll()
        poller.register(self.code, 0)       # POLLERR: no reader left
        return not poller.poll(0)

    def answer(self, outcome):
        """Print *outcome* as job-wait would, then hand it its code: a
        failure said on its stderr as job-wait says one (errors.failure_line)."""
        from .errors import BROKEN_PIPE, CrewfileError, failure_line
        code = outcome.code
        try:
            data = answer(outcome, self.tail, self.all_kept)
        except (CrewfileError, OSError) as e:
            data, code = failure_line("job-wait", e).encode(), ERROR_EXIT
            self._write_err(data)
            data = b""
        try:
            write_all(self.out, data)
        except BrokenPipeError:
            code = BROKEN_PIPE
        except OSError:
            code = ERROR_EXIT
        self.give(code)

    def _write_err(self, data):
        try:
            write_all(self.err, data)
        except OSError:
            pass

    def give(self, code):
        """Let go of its stdout and stderr, then write *code*: its caller
        sees the output's end no later than the exit."""
        for fd in (self.out, self.err):
            if fd is not None:
                os.close(fd)
        self.out = self.err = None
        try:
            os.write(self.code, b"%d\n" % code)
        except OSError:
            pass                    # gone meanwhile
        self.close()

    def close(self):
        for name in ("out", "err", "code"):
            fd = getattr(self, name)
            if fd is not None:
                setattr(self, name, None)
                os.close(fd)


def receive(sock):
    """The next request in the watcher's socket: a Request, None if the
    queue is empty, or False for a datagram that is no request (its
    descriptors closed: a job-wait that sent it waits on its own). A
    request's third descriptor is a pipe's write end."""
    import _socket
    import fcntl
    import math
    import stat
    from array import array
    try:
        data, ancillary, flags, _ = sock.recvmsg(
            _MAX_REQUEST, _socket.CMSG_SPACE(4 * _FDS) + _socket.CMSG_SPACE(12),
            _socket.MSG_DONTWAIT | _socket.MSG_CMSG_CLOEXEC)
    except BlockingIOError:
        return None
    fds, creds = array("i"), None
    for level, kind, payload in ancillary:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            fds.frombytes(payload[:len(payload) - len(payload) % 4])
        elif level == _socket.SOL_SOCKET and kind == _socket.SCM_CREDENTIALS and len(payload) >= 12:
            creds = array("i", payload[:12])
    req = Request()
    req.out = req.err = req.code = None
    try:
        words = data.split(b" ")
        ok = (not flags & (_socket.MSG_TRUNC | _socket.MSG_CTRUNC) and len(fds) == _FDS
              and creds is not None and creds[0] > 0 and creds[1] == os.getuid()
              and data.endswith(b"\n") and len(words) == 6 and b" ".join(words[:2]) == REQUEST
              and words[2].isdigit() and int(words[2]) <= _MAX_TAIL and words[3] in (b"0", b"1")
              and stat.S_ISFIFO(os.fstat(fds[2]).st_mode)
              and fcntl.fcntl(fds[2], fcntl.F_GETFL) & os.O_ACCMODE == os.O_WRONLY)
        if ok:
            req.pid, req.tail, req.all_kept = creds[0], int(words[2]), words[3] == b"1"
            req.t0 = float(words[4])
            req.deadline = None if words[5] == b"-\n" else float(words[5])
            ok = math.isfinite(req.t0) and (req.deadline is None or math.isfinite(req.deadline))
    except (ValueError, OSError):
        ok = False
    if not ok:
        for fd in fds:
            os.close(fd)
        return False
    req.out, req.err, req.code = fds
    return req
