"""Background jobs: a job's files, and reading them (listing).

A job is the directory jobs/HANDLE/: docs/files/jobs.md.
"""
import os
import signal
import time
from itertools import islice

from crewfile.core import jsonio, paths, records, shapes
from crewfile.core.atomic import replace
from crewfile.core.errors import BadInput, CrewfileError, NotFound, Refused, SystemFailure
from crewfile.core.locks import is_held
from crewfile.core.logfile import TailStats, lines_backwards

OUTPUT_LIMIT = 1 << 20            # bytes of output kept (plus one marker line)
MIN_OUTPUT_LIMIT = 4096
MAX_LABEL = 200
LAST_LINE_CHARS = 200
POST_WAIT = 1.0                   # seconds a job's lock holder waits for a session's lock


def duration_text(seconds):
    """'0.42s', '12.0s', '3m05s', '2h10m', '3d4h'."""
    if seconds < 60:
        return f"{seconds:.2f}s" if seconds < 10 else f"{seconds:.1f}s"
    s = int(seconds)
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600}h"


def output_limit():
    try:
        value = int(os.environ.get("CREWFILE_JOB_OUTPUT_BYTES") or OUTPUT_LIMIT)
    except ValueError:
        value = OUTPUT_LIMIT
    return min(max(value, MIN_OUTPUT_LIMIT), 1 << 40)     # within `spec`'s checked shape


FILE_LIMIT = 1 << 20              # bytes: a longer job file (but `spec`) is damaged, not read


def _json(path, kind, at=None):
    """A job file checked for its shape; `spec`'s argv is bounded by the kernel."""
    return shapes.load(path, kind, at, None if kind == "job-spec" else FILE_LIMIT)


def dump_json(obj):
    """One JSON object, keys sorted, newline-terminated (the job files' format)."""
    return jsonio.dumps(dict(sorted(obj.items()))) + "\n"


class Job:
    """One job directory: its paths and files (read fresh each time, but
    `spec`). at: a descriptor on it (paths.open_dir) its files are read in."""

    def __init__(self, crew, handle, at=None):
        self.crew = crew
        self.handle = handle
        self.at = at
        self._spec = None
        self.dir = d = crew.job_dir(handle)
        self.spec_path = os.path.join(d, paths.JOB_SPEC)
        self.pids_path = os.path.join(d, paths.JOB_PIDS)
        self.output_path = os.path.join(d, paths.JOB_OUTPUT)
        self.result_path = os.path.join(d, paths.JOB_RESULT)
        self.heard_path = os.path.join(d, paths.JOB_HEARD)
        self.notice_path = os.path.join(d, paths.JOB_NOTICE)
        self.lock_path = os.path.join(d, paths.JOB_LOCK)
        self.waiters_path = os.path.join(d, paths.JOB_WAITERS)
        self.alive_path = os.path.join(d, paths.JOB_ALIVE)
        self.running_path = os.path.join(d, paths.JOB_RUNNING)

    def spec(self):
        """`spec`, read once (it never changes once published); NotFound if absent."""
        if self._spec is None:
            self._spec = _json(self.spec_path, "job-spec", self.at)
            if self._spec is None:
                raise NotFound(f"no job {self.handle!r}")
        return self._spec

    def pids(self):
        return _json(self.pids_path, "job-pids", self.at)

    def result(self):
        return _json(self.result_path, "job-result", self.at)

    def heard(self):
        return _json(self.heard_path, "job-heard", self.at)

    def notice(self):
        return _json(self.notice_path, "job-notice", self.at)

    def watcher_alive(self):
        return is_held(self.alive_path)

    def fate(self):
        """'running', 'starting' or 'lost' for a job without a result (a free
        `alive`: the watcher is gone)."""
        if self.watcher_alive():
            return "running" if self.pids() is not None else "starting"
        return "lost" if self.result() is None else "ended"

    def group_alive(self):
        """Is the command's process group still there? None if unknown."""
        pgid = (self.pids() or {}).get("pgid")
        if not pgid:
            return None
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass                 # there, another user's
        return True

    def output(self, lines=None):
        """The output kept, or its last *lines* lines (read from the end)."""
        if lines is not None:
            got = list(islice(lines_backwards(self.output_path, TailStats(), max_line=None,
                                              at=self.at, ended=True), max(lines, 0)))
            return b"".join(line + b"\n" for line in reversed(got))
        try:
            fd = paths.open_file(self.output_path, at=self.at)
        except FileNotFoundError:
            return b""
        with os.fdopen(fd, "rb") as f:
            return f.read()


def last_line(path):
    """The output's last non-empty line (marker excluded), or ''."""
    try:
        fd = paths.open_file(path)
    except FileNotFoundError:
        return ""
    try:
        size = os.fstat(fd).st_size
        data = os.pread(fd, 4096, max(0, size - 4096))
    finally:
        os.close(fd)
    for raw in reversed(data.split(b"\n")):
        line = raw.decode("utf-8", "replace").strip()
        if line and not is_marker(line):
            return line if len(line) <= LAST_LINE_CHARS else line[:LAST_LINE_CHARS - 1] + "…"
    return ""


MARKER_PREFIX = "[crewfile: "
MARKER_SUFFIX = " bytes of older output dropped]"


def marker(dropped):
    return f"{MARKER_PREFIX}{dropped}{MARKER_SUFFIX}\n".encode()


def is_marker(line):
    return line.startswith(MARKER_PREFIX) and line.endswith(MARKER_SUFFIX)


# -- creating a job's files ---------------------------------------------------------

def check_request(crew, argv, session=None, label=None):
    """Refuse a job-exec request before anything is created (BadInput, NotFound)."""
    if not argv or not argv[0]:
        raise BadInput("empty command")
    if label is not None:
        if len(label) > MAX_LABEL:
            raise BadInput(f"label longer than {MAX_LABEL} characters")
        if any(ord(c) < 32 or ord(c) == 127 for c in label):
            raise BadInput("label contains a control character")
    if session and not os.path.lexists(os.path.join(crew.session_dir(session), paths.META)):
        raise NotFound(f"no session {session!r} (register it with session-add)")


def new_job(crew, handle=None):
    """Make the job's directory (mkdir: a handle is never shared); its Job."""
    crew.ensure_sub(paths.JOBS)
    for _ in range(100 if handle is None else 1):
        name = "j-" + os.urandom(3).hex() if handle is None else handle
        try:
            os.mkdir(crew.job_dir(name), 0o700)
            return Job(crew, name)
        except FileExistsError:
            if handle is not None:
                raise Refused(f"job {handle!r} exists") from None
    raise SystemFailure("cannot find a free job handle")


def write_spec(job, argv, session=None, label=None):
    """Publish `spec` (durable later: the watcher syncs it); return it."""
    spec = {"handle": job.handle, "argv": list(argv), "label": label or "",
            "session": session or None, "cwd": os.path.realpath(os.getcwd()),
            "created": records.timestamp(), "output_limit": output_limit()}
    replace(job.spec_path, dump_json(spec), sync=False)
    return spec


def ended_text(res):
    """'exited 0 after 1.20s' or 'killed by SIGTERM (15) after 3.0s'."""
    took = duration_text(res.get("seconds") or 0.0)
    if not res.get("signal"):
        return f"exited {res.get('exit')} after {took}"
    return f"killed by {signal_name(res['signal'])} ({res['signal']}) after {took}"


def signal_name(n):
    """'SIGTERM', or 'signal 77' for a number no signal is named by."""
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


# -- listing and sweeping -----------------------------------------------------------

def handles(crew):
    try:
        entries = paths.list_dir(crew.sub(paths.JOBS))
    except FileNotFoundError:
        return []
    return sorted(e for e in entries if not e.startswith("."))


def row_fields(spec, result):
    """What job-ls prints of an ended job, copied into `heard` and `notice`
    so that listing it reads one file."""
    return {"label": spec.get("label") or "", "session": spec.get("session"),
            "created": spec.get("created"), "code": result.get("code"),
            "signal": result.get("signal"), "ended": result.get("ended")}


def info(job, now=None, full=True):
    """A job's state as a dict (what job-ls prints). Not *full*: only the
    table's fields, from `heard` (or `notice`) alone when it has them."""
    now = time.time() if now is None else now
    heard = job.heard()
    notice = None
    if not full:
        row = heard if heard is not None else job.notice()
        if row is not None and row.get("created") and row.get("code") is not None:
            if heard is None:
                announced = row.get("posted")
            else:
                announced = True if heard["by"] == "notice" or heard.get("withdrawn") else None
            return {"handle": job.handle, "label": row.get("label") or "",
                    "session": row.get("session"),
                    "state": "killed" if row.get("signal") else "exited", "code": row["code"],
                    "signal": row.get("signal"), "heard": heard["by"] if heard else None,
                    "announced": announced, "created": row["created"], "ended": row.get("ended"),
                    "age": _age(row.get("ended"), now)}
        notice = row if heard is None else None
    spec = job.spec()
    res = job.result()
    notice = notice or job.notice() or {}
    pids = job.pids() or {}
    outcome = res or {}
    state = job.fate() if res is None else "killed" if res.get("signal") else "exited"
    out = {"handle": job.handle, "label": spec.get("label", ""), "session": spec.get("session"),
           "state": state, "code": outcome.get("code"), "signal": outcome.get("signal"),
           "heard": heard.get("by") if heard else None, "announced": notice.get("posted"),
           "announce_reason": notice.get("reason"), "argv": spec.get("argv"),
           "created": spec.get("created"), "started": (res or pids).get("started"),
           "ended": outcome.get("ended"), "seconds": outcome.get("seconds"),
           "age": _age(spec["created"] if res is None else res.get("ended"), now),
           "pid": pids.get("pid"), "pgid": pids.get("pgid")}
    if state == "lost":
        out["group_alive"] = job.group_alive()
    return out


def _age(since, now):
    return now - records.parse_timestamp(since) if since else None


def list_jobs(crew, now=None, full=True):
    """info() of every job, oldest first; each job's directory opened once."""
    root = crew.sub(paths.JOBS)
    try:
        jobs_fd = paths.open_dir(root)
    except FileNotFoundError:
        return []
    now = time.time() if now is None else now
    out = []
    try:
        for handle in sorted(os.listdir(jobs_fd)):
            if handle.startswith("."):
                continue
            try:
                job = Job(crew, handle)
                job.at = paths.open_dir(job.dir, at=jobs_fd)
                try:
                    out.append(info(job, now, full))
                finally:
                    os.close(job.at)
            except (FileNotFoundError, NotFound, BadInput):
                continue             # mid-creation or mid-sweep
            except CrewfileError as e:   # damaged or unsafe: listed, marked
                out.append({"handle": handle, "error": str(e), "created": None})
    finally:
        os.close(jobs_fd)
    out.sort(key=lambda r: (r["created"] or "", r["handle"]))
    return out
