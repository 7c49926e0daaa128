"""Starting a job and its watcher: a process that outlives its caller.

The watcher is forked, not exec'd (docs/decisions.md). It runs the command,
keeps its output, writes `result` and settles who hears it (settle(): its
half of the one decision, docs/files/jobs.md; jobwait.py has the waiter's).
"""
import os
import select
import signal
import time

from crewfile.background import jobs
from crewfile.background.jobs import POST_WAIT, dump_json, ended_text, marker, row_fields
from crewfile.background.sweep import discard
from crewfile.core import locks, records
from crewfile.core.atomic import clear_temporaries, fsync_dir, prepare, replace, sync, write_all
from crewfile.core.errors import NO_COMMAND, NOT_RUNNABLE, CrewfileError, SystemFailure, reason
from crewfile.core.liveness import process_start
from crewfile.core.locks import acquire
from crewfile.session import verdict
from crewfile.session.sessions import Session
from crewfile.wake import inbox


def start(crew, argv, session=None, label=None, handle=None, exiting=False):
    """Start *argv* detached under a watcher; return its handle at once. Call
    it from a single-threaded process (the watcher is forked). exiting: the
    caller exits at once (job-exec), leaving the middle process to init."""
    jobs.check_request(crew, argv, session, label)
    job = jobs.new_job(crew, handle)
    try:
        # `alive` before `spec`: no gap in which `alive` is free. Ours are let
        # go on the way out: the watcher's descriptors keep the flocks.
        with acquire(job.alive_path) as alive, acquire(job.running_path) as running:
            spawn(job, jobs.write_spec(job, argv, session, label), alive, running, exiting)
    except BaseException:
        # Nothing was started (a full disk, `ulimit -f 0`, no fork): leave no
        # empty jobs/HANDLE behind, and the handle free for another try.
        discard(job)
        raise
    return job.handle


def spawn(job, spec, alive, running, exiting):
    """Fork the watcher of *job* (twice: setsid() between, so it is nobody's
    child and no terminal's), handing it the held `alive` and `running`. Until
    setsid() a closing terminal or a ^C reaches it: those signals are ignored."""
    saved = [(sig, signal.signal(sig, signal.SIG_IGN))
             for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT)]
    try:
        pid = os.fork()
    except OSError as e:
        pid, error = None, e
    if pid == 0:
        code = 1
        try:
            os.setsid()
            if os.fork() == 0:
                try:
                    _watch(job, spec, alive, running)
                    code = 0
                finally:
                    os._exit(code)
            code = 0
        finally:
            os._exit(code)
    for sig, old in saved:
        signal.signal(sig, signal.SIG_DFL if old is None else old)
    if pid is None:
        raise SystemFailure(f"cannot start the watcher of job {job.handle!r}: {error.strerror}")
    if not exiting:
        os.waitpid(pid, 0)


def _detach(*keep):
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2 and fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def _watch(job, spec, alive, running):
    _detach(alive.fd, running.fd)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_DFL)
    try:
        sync(job.spec_path)          # job-exec published it without waiting for the disk
        fsync_dir(os.path.dirname(job.dir))
    except (SystemFailure, OSError):
        pass                     # the disk fails us: the outcome, if it can be written, says so
    out = BoundedOutput(job.output_path, spec.get("output_limit") or jobs.OUTPUT_LIMIT)
    pids = {"watcher": os.getpid(), "watcher_start": process_start(os.getpid()),
            "pid": None, "pgid": None}
    argv = spec["argv"]
    rfd, wfd = os.pipe()
    pids["started"], t0 = records.timestamp(), time.monotonic()
    env = dict(os.environ, CREWFILE_JOB=job.handle)
    try:
        os.chdir(spec.get("cwd") or "/")
        # posix_spawn: importing subprocess costs more than the spawn. The
        # signals Python ignores (SIGPIPE, SIGXFSZ) are reset for the command.
        pid = os.posix_spawnp(argv[0], argv, env, setsid=True, setsigmask=(),
                              setsigdef=(signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT,
                                         signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT),
                              file_actions=[(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                                            (os.POSIX_SPAWN_DUP2, wfd, 1),
                                            (os.POSIX_SPAWN_DUP2, wfd, 2)])
        pids["pid"] = pids["pgid"] = pid
    except OSError as e:
        # Like a shell: 127 not found, 126 found but not runnable.
        rc = NO_COMMAND if isinstance(e, FileNotFoundError) else NOT_RUNNABLE
        out.write(f"job-exec: {e.filename or argv[0]}: {e.strerror}\n".encode())
        os.close(rfd)
    os.close(wfd)
    replace(job.pids_path, dump_json(pids))
    try:
        # `result`'s temporary, made while the command runs: the path from
        # its end to a waiter's answer creates no file.
        result_file = prepare(job.result_path)
    except SystemFailure:
        result_file = None      # (a full disk): made at the end, failing then if it must
    try:
        if pids["pid"] is not None:
            rc = _copy(pids["pid"], rfd, out)
        seconds = time.monotonic() - t0
        out.close()
        result = {"exit": rc if rc >= 0 else None, "signal": -rc if rc < 0 else None,
                  "code": rc if rc >= 0 else 128 - rc, "started": pids["started"],
                  "ended": records.timestamp(), "seconds": round(seconds, 3)}
        settle(job, spec, result, running, result_file)
    finally:
        if result_file is not None:
            result_file.discard()
    running.release()           # (failing, our exit lets go of both)
    alive.release()


def _copy(pid, rfd, out):
    """Copy the command's output until it exits; return its exit code (-N:
    signal N). What it wrote before it exited is in the pipe and is kept; a
    grandchild still holding the pipe is not waited for."""
    pidfd = os.pidfd_open(pid)
    os.set_blocking(rfd, False)
    poller = select.poll()
    poller.register(rfd, select.POLLIN)
    poller.register(pidfd, select.POLLIN)
    while True:
        ready = dict(poller.poll())
        if rfd in ready and not _drain(rfd, out):
            poller.unregister(rfd)       # every writer is gone
        if pidfd in ready:
            break
    _, status = os.waitpid(pid, 0)
    _drain(rfd, out)
    os.close(rfd)
    os.close(pidfd)
    return os.waitstatus_to_exitcode(status)


def _drain(rfd, out):
    """Copy what the pipe holds now; False once every writer is gone."""
    while True:
        try:
            data = os.read(rfd, 65536)
        except BlockingIOError:
            return True
        if not data:
            return False
        out.write(data)


def settle(job, spec, result, running, result_file=None):
    """The watcher's half of the decision (docs/files/jobs.md): write *result*
    durably, then wait-or-announce, exactly once.
    spec: the one this watcher ran (one damaged since must not silence the
    outcome). running: held, let go once `result` is written: it wakes every waiter.
    result_file: `result`'s temporary, made while the command ran (atomic.prepare)."""
    text = dump_json(result)
    first = True
    while True:
        with acquire(job.lock_path):
            heard = None
            if first:                   # nobody can have heard it yet
                (result_file or prepare(job.result_path)).commit(text)
                first = False
            else:
                try:
                    heard = job.heard()
                except CrewfileError:
                    heard = None     # damaged: told again rather than never (a repeat has its id)
            nobody = acquire(job.waiters_path, timeout=0)
            if nobody is not None:
                try:
                    # Nobody waits, nobody writes: a temporary left here is
                    # a killed waiter's `heard` (jobwait makes it while waiting).
                    clear_temporaries(job.dir)
                    if heard is None:
                        _announce_once(job, spec, result)
                    return
                finally:
                    nobody.release()
            if heard is not None:
                return
        # Someone waits: wake them, and decide again once every waiter has
        # let go (done, timed out or killed). Woken as a job-wait exits with
        # the answer, we let its caller run first (what we do next nobody waits for).
        running.release()
        acquire(job.waiters_path).release()
        os.sched_yield()


def _announce_once(job, spec, result):
    """Under `lock`, nobody waiting: announce the outcome and record that
    (`notice`, and `heard` by=notice if it was posted). A notice posted past
    the bound without the session's lock is said in `notice` (without_lock):
    the watcher, detached, has no stderr to say it on."""
    try:
        posted, detail = announce(job, spec, result)
    except CrewfileError as e:      # said in `notice`: a watcher dead here told nobody why
        posted, detail = False, f"the notice could not be posted: {reason(e)}"
    row = dict(row_fields(spec, result), at=records.timestamp())
    if posted:
        said = locks.take_notes()
        notice = dict(row, posted=True, id=detail, **({"without_lock": said} if said else {}))
        replace(job.notice_path, dump_json(notice))
        replace(job.heard_path, dump_json(dict(row, by="notice", id=detail)))
    else:
        replace(job.notice_path, dump_json(dict(row, posted=False, reason=detail)))


def notice_text(job, spec, result):
    label = f" ({spec['label']})" if spec.get("label") else ""
    try:
        last = jobs.last_line(job.output_path) or "(no output)"
    except (CrewfileError, OSError) as e:
        last = f"(the output cannot be read: {e})"
    return f"job {job.handle}{label} {ended_text(result)}; last output: {last}"


def announce(job, spec, result):
    """Post the outcome to the owning session's inbox: (True, notice id), or
    (False, why not) when there is nobody to tell."""
    name = spec.get("session")
    if not name:
        return False, "no owning session"
    sess = Session(job.crew, name)
    if not sess.exists():
        return False, f"session {name} is not registered"
    try:
        v = verdict.of(sess)
    except CrewfileError:
        v = None                # its liveness unknown: told (unknown is never silence)
    if v is not None and v.live == verdict.NOT_LIVE:
        return False, f"session {name} is not live: {v.why}"
    # Under the job's lock a job-wait may be waiting for: past POST_WAIT with
    # the session lock still held, the notice is posted without it.
    old = locks.bound_waits(POST_WAIT)
    try:
        return True, inbox.post(job.crew, name, "job", notice_text(job, spec, result))
    finally:
        locks.restore_waits(old)


class BoundedOutput:
    """The `output` file, at most *limit* bytes plus one marker line
    (docs/files/jobs.md). One that cannot be written stops being kept: the
    outcome matters more than the output."""

    def __init__(self, path, limit):
        self.path, self.limit = path, limit
        self.body, self.dropped = 0, 0
        try:
            self.fd = self._open()
        except OSError:             # damaged (a directory, a link)
            self.fd = None

    def _open(self):
        return os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
                       | os.O_CLOEXEC, 0o600)

    def write(self, data):
        if self.fd is None:
            return
        try:
            write_all(self.fd, data)
            self.body += len(data)
            if self.body > self.limit:
                self._compact()
        except (OSError, SystemFailure):
            self.close()

    def _compact(self):
        keep = self.limit // 2
        tail = os.pread(self.fd, keep, os.fstat(self.fd).st_size - keep)
        nl = tail.find(b"\n")
        if 0 <= nl < len(tail) - 1 and nl < keep // 2:
            tail = tail[nl + 1:]
        self.dropped += self.body - len(tail)
        replace(self.path, marker(self.dropped) + tail)
        os.close(self.fd)
        self.fd = self._open()
        self.body = len(tail)

    def close(self):
        if self.fd is not None:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = None
