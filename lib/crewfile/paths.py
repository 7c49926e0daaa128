"""The crew directory's layout, defined once.

    $CREWFILE_DIR/                  0700, created on first use
      sessions/NAME/meta            session metadata (JSON, atomic replace)
      sessions/NAME/status          status log (append-only records)
      sessions/NAME/status.1..N     rotated status logs, newest first
      sessions/NAME/lock            flock guard for every write in sessions/NAME
      sessions/NAME/inbox           pending notices for the session (records)
      sessions/NAME/inbox.read      notices already drained (records)
      sessions/NAME/deliver.lock    flock held while text is typed into NAME's pane
      sessions/NAME/scrollback.TS   a retired crew session's window scrollback (crew-retire)
      sessions/NAME/spool/          writes kept aside while NAME's lock was stuck
      sessions/NAME/acts            evidence of the captain's acts (record line, tab, evidence)
      reports/{tmp,new,cur}/        aside reports, maildir style:
      reports/new/ASIDE,UNIQUE      a delivered report, not yet reconciled
      reports/cur/ASIDE,UNIQUE      a reconciled report, and beside it
      reports/cur/ASIDE,UNIQUE.scrollback   the aside window's whole scrollback
      nudges/ID                     nudge schedules (JSON, atomic replace)
      locks/nudges                  flock guarding every write under nudges/
      locks/nudge-tick              flock held by the one running nudge-tick
      jobs/HANDLE/                  a background job (job-exec), one directory each:
      jobs/HANDLE/spec              what to run, label, owning session (JSON, atomic)
      jobs/HANDLE/pids              watcher and command pids, pgid, start (JSON, atomic)
      jobs/HANDLE/output            the command's stdout+stderr, bounded, oldest dropped
      jobs/HANDLE/result            exit code or signal, start/end (JSON, atomic)
      jobs/HANDLE/heard             who heard the outcome: wait or notice (JSON, atomic)
      jobs/HANDLE/notice            what the announcement did, posted or not (JSON, atomic)
      jobs/HANDLE/lock              flock: the one wait-or-announce decision
      jobs/HANDLE/waiters           shared flock held by each job-wait while it waits
      jobs/HANDLE/alive             flock the watcher holds for its whole life
      locks/                        crew-wide locks (nudge-tick, ...)

Nothing outside this module spells these names.
"""
import os
import stat

from .errors import SystemFailure
from .names import check_name

SESSIONS, REPORTS, NUDGES, JOBS, LOCKS = "sessions", "reports", "nudges", "jobs", "locks"
META, STATUS, LOCK, INBOX, INBOX_READ = "meta", "status", "lock", "inbox", "inbox.read"
REPORT_TMP, REPORT_NEW, REPORT_CUR = "tmp", "new", "cur"     # under REPORTS
SCROLLBACK_SUFFIX = ".scrollback"
SCROLLBACK = "scrollback"         # sessions/NAME/scrollback.TS, TS a record timestamp
DELIVER_LOCK = "deliver.lock"
SPOOL = "spool"
ACTS = "acts"
NUDGES_LOCK, NUDGE_TICK_LOCK = "nudges", "nudge-tick"     # files under locks/
JOB_SPEC, JOB_PIDS, JOB_OUTPUT, JOB_RESULT = "spec", "pids", "output", "result"
JOB_HEARD, JOB_NOTICE, JOB_LOCK, JOB_WAITERS, JOB_ALIVE = (
    "heard", "notice", "lock", "waiters", "alive")


def default_dir(env=None):
    env = os.environ if env is None else env
    if env.get("CREWFILE_DIR"):
        return env["CREWFILE_DIR"]
    state = env.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(state, "crewfile")


def ensure_dir(path):
    """Create *path* 0700 if missing; refuse a symlink or a non-directory there."""
    try:
        os.mkdir(path, 0o700)
        return path
    except FileExistsError:
        pass
    except OSError as e:
        raise SystemFailure(f"cannot create {path}: {e.strerror}") from None
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise SystemFailure(f"{path} is not a directory (a symlink is not followed)")
    return path


class Crew:
    """Paths of one crew directory."""

    def __init__(self, root=None):
        self.root = os.path.abspath(root or default_dir())

    def ensure(self):
        """Create the crew directory (0700) and its parents on first use."""
        if not os.path.isdir(self.root):
            parent = os.path.dirname(self.root)
            try:
                os.makedirs(parent, 0o700, exist_ok=True)
            except OSError as e:
                raise SystemFailure(f"cannot create {parent}: {e.strerror}") from None
            ensure_dir(self.root)
        return self

    def sub(self, *parts):
        return os.path.join(self.root, *parts)

    def session_dir(self, name):
        return os.path.join(self.root, SESSIONS, check_name(name, "session name"))

    def job_dir(self, handle):
        return os.path.join(self.root, JOBS, check_name(handle, "job handle"))

    def session_file(self, name, what):
        return os.path.join(self.session_dir(name), what)

    def ensure_sub(self, *parts):
        """Create crew-relative directories one level at a time, never via a link."""
        self.ensure()
        path = self.root
        for part in parts:
            path = ensure_dir(os.path.join(path, part))
        return path
