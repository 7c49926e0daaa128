"""Claude Code's own schedules as crewfile reads them, only to hold its own
voice (a refusal), never to type: the durable cron jobs of the project's
`.claude/scheduled_tasks.json` and a `/goal` armed in the agent's transcript.
The rule (own loop) is protocol.md's "Derived state".

The file, as CronCreate keeps a `durable: true` job (observed with 2.1.332):

    {"tasks": [{"id": "d6598c2c", "cron": "9 4 * * *", "prompt": "...",
                "createdAt": 1796185041935, "recurring": true,
                "maxAgeMs": 2592000000, "createdBySessionId": "...", ...}]}

A file not of this shape is not believed at all (no job, nothing held; the
problem handed back to be said once). A job older than its maxAgeMs is not
counted (the CLI expires a recurring one then: 7 days in 2.1.197, 30 in
2.1.332), so none holds for ever. A goal shows as transcript attachments
`{"type": "goal_status", "met": ...}`, one at each Stop's evaluation: so
when a nudge would be typed (the session idle) the newest is at the end.
"""
import os
import time
from collections import namedtuple

from crewfile.core.errors import CrewfileError
from crewfile.core.jsonio import loads
from crewfile.core.logfile import objects_backwards
from crewfile.core.paths import read_text

FILE = os.path.join(".claude", "scheduled_tasks.json")
MAX_BYTES = 1 << 20                  # a bigger file is damaged, not read on
MAX_AGE_MS = 30 * 86400 * 1000       # a job without maxAgeMs: 2.1.332's expiry
GOAL_SCAN_BYTES = 1 << 20            # how far back a transcript is read for its goal
GOAL_MARK = b'"goal_status"'


# One of the CLI's own jobs: cron is its five fields.
Job = namedtuple("Job", "id cron prompt recurring")


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
    if not all(map(_is_task, tasks)):
        return [], f"{path}: a task that is not {{id, cron, prompt, createdAt}}"
    return [Job(t["id"], t["cron"], t["prompt"], t.get("recurring", False)) for t in tasks
            if t["createdAt"] + t.get("maxAgeMs", MAX_AGE_MS) > now_ms], None


def _is_task(t):
    return (isinstance(t, dict) and all(isinstance(t.get(k), str) for k in ("id", "cron", "prompt"))
            and _number(t.get("createdAt")) and _number(t.get("maxAgeMs", MAX_AGE_MS))
            and isinstance(t.get("recurring", False), bool))


def _number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x == x


def armed_goal(transcript, limit=GOAL_SCAN_BYTES):
    """The condition of the goal armed in the transcript *transcript* (its
    newest goal_status attachment has met false), or None: none armed, none
    within *limit* bytes of its end, or no transcript to read."""
    if not transcript:
        return None
    try:
        for entry in objects_backwards(transcript, limit, (GOAL_MARK,)):
            status = entry.get("attachment")
            if not isinstance(status, dict) or status.get("type") != "goal_status":
                continue
            if status.get("met") is not False:
                return None
            condition = status.get("condition")
            return condition if isinstance(condition, str) and condition else "?"
    except (CrewfileError, OSError):
        return None
    return None
