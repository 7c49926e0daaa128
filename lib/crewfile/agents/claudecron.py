"""Claude Code's own schedules: its durable cron jobs and an armed /goal, as
crewfile reads them.

Claude Code's CronCreate tool keeps a job `durable: true` in the project's
`.claude/scheduled_tasks.json` (observed with 2.1.332):

    {"tasks": [{"id": "d6598c2c", "cron": "9 4 * * *", "prompt": "...",
                "createdAt": 1796185041935, "recurring": true,
                "maxAgeMs": 2592000000, "createdBySessionId": "...", ...}]}

Its session-only jobs are not in the file: the Stop payload's
`session_crons` lists them ({id, schedule, recurring, prompt}), and the
hook records them as `crons` (hooks/hook.py). A job fires only while its
session is idle, and starts a turn of the session's own.

An armed `/goal` (an evaluator at every Stop that keeps the session going
until its condition holds; retried at 1, 5 and 15 minutes) is seen in the
agent's transcript (meta `transcript_path`): Claude Code appends an
attachment `{"type": "goal_status", "met": false, "condition": ...}` when
the goal is set (`"sentinel": true`) and at each evaluation, and one with
`"met": true` when it is met or cleared (`/goal clear`). The newest such
line within the transcript's last GOAL_SCAN_BYTES says: `met` false is
armed. Each Stop's evaluation writes one, so at the moment a nudge would be
typed (the session idle) it is at the transcript's end.

The file is the agent's, in its own tree: crewfile believes it only to hold
its own voice there (a refusal), never to type anything. So a file that is
not of this shape is not believed at all: no job is read from it, nothing
is held by it, and the problem is handed back for the caller to say once.
A job older than its maxAgeMs (the CLI expires a recurring one then: 7
days in 2.1.197, 30 in 2.1.332; a one-shot is given as long) is not
counted, so no job holds for ever.
"""
import os
import time

from crewfile.core.errors import CrewfileError
from crewfile.core.jsonio import loads
from crewfile.core.logfile import TailStats, lines_backwards
from crewfile.core.paths import read_text

FILE = os.path.join(".claude", "scheduled_tasks.json")
MAX_BYTES = 1 << 20                  # a bigger file is damaged, not read on
MAX_AGE_MS = 30 * 86400 * 1000       # a job without maxAgeMs: 2.1.332's expiry
GOAL_SCAN_BYTES = 1 << 20            # how far back a transcript is read for its goal
GOAL_MARK = b'"goal_status"'


class Job:
    """One of the CLI's own jobs: id, cron (its five fields), prompt, recurring."""
    __slots__ = ("id", "cron", "prompt", "recurring")

    def __init__(self, id, cron, prompt, recurring):
        self.id, self.cron, self.prompt, self.recurring = id, cron, prompt, recurring

    def __repr__(self):
        return f"Job({self.id!r}, {self.cron!r}, {self.prompt!r}, {self.recurring!r})"


def durable_jobs(project, now=None):
    """([Job], problem) for the project directory *project*: the jobs of its
    scheduled_tasks.json that are still armed at epoch *now*, and None or
    the one line that says why the file is not believed (then no job)."""
    if not project:
        return [], None
    path = os.path.join(project, FILE)
    try:
        text = read_text(path, limit=MAX_BYTES)
    except (CrewfileError, OSError) as e:
        return [], f"{path}: {e}"
    if text is None:
        return [], None
    try:
        doc = loads(text)
    except ValueError:
        return [], f"{path}: not JSON"
    tasks = doc.get("tasks") if isinstance(doc, dict) else None
    if not isinstance(tasks, list):
        return [], f"{path}: no list of tasks"
    now_ms = (time.time() if now is None else now) * 1000
    jobs = []
    for t in tasks:
        job = _job(t, now_ms)
        if job is False:
            return [], f"{path}: a task that is not {{id, cron, prompt, createdAt}}"
        if job is not None:
            jobs.append(job)
    return jobs, None


def _job(t, now_ms):
    """A Job, None when it has expired, False when *t* is not a task."""
    if not isinstance(t, dict):
        return False
    ident, cron, prompt, created = t.get("id"), t.get("cron"), t.get("prompt"), t.get("createdAt")
    recurring = t.get("recurring", False)
    age = t.get("maxAgeMs", MAX_AGE_MS)
    if not (isinstance(ident, str) and isinstance(cron, str) and isinstance(prompt, str)
            and _number(created) and isinstance(recurring, bool) and _number(age)):
        return False
    if created + age <= now_ms:
        return None
    return Job(ident, cron, prompt, recurring)


def _number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x == x


def armed_goal(transcript, limit=GOAL_SCAN_BYTES):
    """The condition of the goal armed in the transcript *transcript* (its
    newest goal_status attachment has met false), or None: none armed, none
    within *limit* bytes of its end, or no transcript to read."""
    if not transcript:
        return None
    try:
        for line in lines_backwards(transcript, TailStats(), limit, max_line=None, outside=True):
            if GOAL_MARK not in line:
                continue
            try:
                entry = loads(line)
            except ValueError:
                continue
            status = entry.get("attachment") if isinstance(entry, dict) else None
            if not isinstance(status, dict) or status.get("type") != "goal_status":
                continue
            if status.get("met") is not False:
                return None
            condition = status.get("condition")
            return condition if isinstance(condition, str) and condition else "?"
    except (CrewfileError, OSError):
        return None
    return None
