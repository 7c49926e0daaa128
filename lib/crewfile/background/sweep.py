"""Removing jobs: one nothing was started from, and those past their
retention (docs/commands/job-sweep.md). Apart from jobs.py so that job-wait,
whose exit ends a job's wait, never loads shutil (bz2, lzma, zlib and re,
four more libraries its exit would unmap)."""
import os
import shutil
import time

from crewfile.background import jobs
from crewfile.core import paths, records
from crewfile.core.errors import CrewfileError, NotFound
from crewfile.core.locks import acquire

HEARD_RETENTION = 600             # job-sweep's default --older-than: 10 minutes
UNHEARD_RETENTION = 7 * 86400     # an outcome nobody heard is kept 7 days
ORPHAN_AGE = 600                  # a jobs/HANDLE without `spec` this old is abandoned


def discard(job):
    """Remove a job directory nothing was started from."""
    try:
        trash = _bury(job)
    except OSError:
        return
    shutil.rmtree(trash, ignore_errors=True)


def _bury(job):
    """Rename the job's directory out of sight, gone at once (deleted at
    leisure, or by the next sweep); its new path."""
    trash = os.path.join(os.path.dirname(job.dir), f".swept-{job.handle}-{os.getpid()}")
    os.rename(job.dir, trash)
    return trash


def sweep(crew, older_than=HEARD_RETENTION, unheard_older_than=UNHEARD_RETENTION, now=None,
          bad=None):
    """Remove the jobs past their retention (docs/commands/job-sweep.md);
    return their handles."""
    now = time.time() if now is None else now
    removed = []
    for handle in jobs.handles(crew):
        job = jobs.Job(crew, handle)
        try:
            with acquire(job.lock_path):
                if not os.path.lexists(job.spec_path):      # job-exec killed early
                    if (now - os.lstat(job.dir).st_mtime >= ORPHAN_AGE
                            and not job.watcher_alive()):
                        _bury(job)
                    continue
                res, heard = job.result(), job.heard()
                if heard is not None:
                    since, keep = heard.get("at"), older_than
                elif res is not None:
                    since, keep = res.get("ended"), unheard_older_than
                elif job.fate() == "lost":
                    since, keep = job.spec().get("created"), unheard_older_than
                else:
                    continue
                if since and now - records.parse_timestamp(since) >= keep:
                    _bury(job)
                    removed.append(handle)
        except (FileNotFoundError, NotFound):
            continue                 # swept by someone else meanwhile
        except CrewfileError as e:   # damaged or unsafe: kept, named in *bad*
            if os.path.isdir(job.dir):
                if bad is None:
                    raise
                bad.append(e)
    root = crew.sub(paths.JOBS)
    try:
        for entry in os.listdir(root):     # buried above, or by a sweep that crashed
            if entry.startswith(".swept-"):
                shutil.rmtree(os.path.join(root, entry), ignore_errors=True)
    except FileNotFoundError:
        pass
    return removed
