"""The session's own voice: Claude Code's own cron jobs and /goal, armed or not.

The one rule (own loop) is protocol.md's "Derived state"; while it holds, a
due nudge is held (nudge-tick), so the session never hears two speakers.
Not in verdict.py: crew-status loads that on tmux's status line and never
asks this, which reads the agent's files (agents.claudecron).
"""
import time

from crewfile.agents.claudecron import armed_goal, durable_jobs
from crewfile.core.kinds import NATIVE_STATE
from crewfile.core.records import parse_timestamp
from crewfile.core.text import ascii_int
from crewfile.session.verdict import Answer

# why crewfile holds its own voice (a nudge) on a live session
OWN_LOOP = "own-loop"                  # the session's own cron jobs or /goal are armed
OWN_LOOP_MAX_AGE = 30 * 86400          # seconds: the CLI expires a recurring job by then


def own_jobs(sess, recs=None, now=None):
    """(crons record text, durable claudecron.Jobs, goal, problem): what of
    the session's own loop is armed at epoch *now*; problem: why its
    scheduled_tasks.json is not believed (then it gives none)."""
    now = time.time() if now is None else now
    recs = recs or sess.scan()
    rec = recs.last_of(NATIVE_STATE)
    crons = None
    if rec is not None and rec.kind == "crons" and parse_timestamp(rec.ts) > now - OWN_LOOP_MAX_AGE:
        crons = rec.text
    durable, problem = durable_jobs(sess.meta.get("cwd"), now)
    return crons, durable, armed_goal(sess.meta.get("transcript_path")), problem


def own_count(crons, durable, goal=None):
    """How many of the session's own jobs (and goal) own_jobs found armed."""
    head = (crons or "").split(" ", 1)[0]
    listed = ascii_int(head)
    if listed is None:
        listed = 1 if crons else 0      # a listing of unknown size counts one
    return listed + len(durable) + bool(goal)


def own_loop(sess, recs=None, now=None):
    """(Answer(OWN_LOOP, ...) or None, problem or None): is the session's own
    loop armed at epoch *now*? problem: why its scheduled_tasks.json is not
    believed (then it holds nothing), for the caller to say once."""
    crons, jobs, goal, problem = own_jobs(sess, recs, now)
    parts = [crons] if crons else []
    if jobs:
        named = "; ".join(f"{j.id[:16]} {j.cron[:40]}: {j.prompt[:60]}" for j in jobs[:3])
        s = "s" if len(jobs) != 1 else ""
        parts.append(f"{len(jobs)} durable cron{s} ({named}{'; ...' if len(jobs) > 3 else ''})")
    if goal:
        parts.append(f"a goal ({goal[:80]})")
    if not parts:
        return None, problem
    return Answer(OWN_LOOP, "the session's own loop is armed: " + "; ".join(parts)), problem
