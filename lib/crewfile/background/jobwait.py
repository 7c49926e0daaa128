"""Waiting for a job, and the waiter's half of the one decision (the
watcher's is jobwatch.settle): docs/files/jobs.md. Lock order is always
`lock` -> `waiters` (non-blocking), or `waiters` alone: nothing deadlocks.
"""
import os
import threading
import time

from crewfile.background.jobs import (
    Job, POST_WAIT, dump_json, duration_text, ended_text, row_fields)
from crewfile.core import records
from crewfile.core.atomic import Prepared, clear_temporaries, prepare, sync
from crewfile.core.errors import (
    CrewfileError, JOB_ERROR as ERROR_EXIT, JOB_HEARD as HEARD_EXIT,
    JOB_TIMEOUT as TIMEOUT_EXIT, NotFound, SystemFailure)
from crewfile.core.locks import acquire
from crewfile.core.paths import JOB_RESULT
from crewfile.core.text import escape
from crewfile.wake import inbox


def _hear(job, res, heard_file=None):
    """Under `lock`: this wait reports the outcome, unless heard already (a
    pending notice is withdrawn and heard here instead). `heard` is not
    fsynced: docs/decisions.md, "Jobs: heard exactly once at the model".
    heard_file: `heard`'s temporary, made while waiting (atomic.prepare)."""
    if not job.watcher_alive():
        sync(job.result_path)
    heard = job.heard()
    if heard is not None:
        if heard.get("by") != "notice":
            return Outcome(job, "done", res, False, heard)
        if not _withdraw(job, heard.get("id")):
            return Outcome(job, "heard", res, False, heard)
    mine = dict(row_fields(job.spec(), res), by="wait", at=records.timestamp(), pid=os.getpid())
    if heard is not None:
        mine["withdrawn"] = heard["id"]
    (heard_file or prepare(job.heard_path)).commit(dump_json(mine), sync=False)
    return Outcome(job, "done", res, True, mine)


def unhear(outcome):
    """Take back this wait's `heard` (its answer could not be read or written:
    the output not believed, the reader gone, ^C), so the outcome is not lost.
    job-wait is still counted in on `waiters` until it exits: the watcher
    then finds no `heard` and announces it (docs/files/jobs.md)."""
    if not outcome.heard_here:
        return
    job = outcome.job
    with acquire(job.lock_path):
        try:
            heard = job.heard()
        except CrewfileError:
            return                  # damaged since: the watcher tells it again (jobwatch.settle)
        if heard is not None and heard.get("by") == "wait" and heard.get("pid") == os.getpid():
            os.unlink(job.heard_path)


def _withdraw(job, nid):
    """Withdraw the job's pending notice *nid*: True if it had not reached the model."""
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
        if self.state == "done":
            return self.result.get("code", ERROR_EXIT)
        return {"timeout": TIMEOUT_EXIT, "lost": ERROR_EXIT, "heard": HEARD_EXIT}[self.state]

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
    """Wait for the job's outcome; return an Outcome. Counted in on `waiters`,
    it blocks on a shared flock of `running`, granted once the outcome is
    durable or the watcher is dead: one wake-up. exiting: as job-wait, which
    exiting counts out."""
    job = Job(crew, handle)
    job.spec()              # NotFound; read now, off the path from the job's end to our answer
    t0 = time.monotonic()
    with acquire(job.lock_path):
        res = job.result()
        if res is not None:
            return _hear(job, res)
        registration = acquire(job.waiters_path, shared=True)
    try:
        return _wait_registered(job, registration, timeout, t0)
    finally:
        # A waiter that exits with the answer (job-wait) counts itself out by
        # exiting: letting go here would wake the watcher (and its exit) to
        # compete for the CPU with our printing the answer. `heard` is
        # written, or we failed: either way the watcher decides right.
        if not exiting:
            registration.release()


POLL = 1.0      # seconds between looks when `running` cannot tell (see below)


def _wait_registered(job, registration, timeout, t0):
    # `heard`'s temporary is made now, while registered: the path from the
    # job's end to our answer creates no file. Gone however we leave: named
    # before it is made, so the finally finds it whenever a ^C comes.
    heard_file = None
    deadline = None if timeout is None else t0 + timeout
    nap = None
    try:
        try:
            heard_file = Prepared(job.heard_path)
            heard_file.make()
        except SystemFailure:
            heard_file = None       # (a full disk): made when heard, failing then if it must
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
            with acquire(job.lock_path):
                res = job.result()
                if res is not None:
                    return _hear(job, res, heard_file)
                if let_go:
                    # `running` is let go after `result` is written, or by the
                    # kernel when the watcher dies: no result, so it died...
                    if not job.watcher_alive():
                        # (its `result`'s temporary, made while the command ran, is ours to clear)
                        clear_temporaries(job.dir, of=JOB_RESULT)
                        return Outcome(job, "lost", waited=time.monotonic() - t0)
                    # ...unless the watcher lives on (failing to write it, or
                    # a job started before `running` was): look every POLL s.
                    nap = POLL
                if deadline is not None and time.monotonic() >= deadline:
                    # Count out under the lock: from here on the watcher announces.
                    registration.release()
                    return Outcome(job, "timeout", waited=time.monotonic() - t0)
    finally:
        if heard_file is not None:
            heard_file.discard()


def _let_go(path, timeout):
    """Block until nobody holds *path* exclusively (True), or *timeout*
    seconds pass (False; None: no limit); ours is let go at once."""
    if timeout is None:
        acquire(path, shared=True).release()
        return True
    # flock(2) has no timeout: a thread blocks in it (the GIL is free
    # meanwhile) and we wait for the thread at most *timeout*. If we give up
    # first, the thread lets go the moment it is granted the lock.
    done = threading.Event()
    failed = []

    def block():
        try:
            acquire(path, shared=True).release()
        except BaseException as e:      # (a link, a FIFO: said by our caller, as without a timeout)
            failed.append(e)
        finally:
            done.set()
    threading.Thread(target=block, daemon=True).start()
    if not done.wait(min(timeout, threading.TIMEOUT_MAX)):
        return False
    if failed:
        raise failed[0]
    return True


def answer(outcome, tail=10, all_kept=False, terminal=False):
    """What job-wait prints of *outcome*, as bytes (docs/commands/job-wait.md)."""
    line = escape(outcome.line()) + "\n"
    if outcome.state != "done" and outcome.state != "lost":
        return line.encode()
    if all_kept:
        data = outcome.job.output()
        if data and not data.endswith(b"\n"):
            data += b"\n"
    else:
        data = outcome.job.output(tail)
    if not terminal:
        return line.encode() + data
    lines = data.decode("utf-8", "replace").split("\n")[:-1]     # (it ends with a newline)
    return (line + "".join(escape(text) + "\n" for text in lines)).encode()
