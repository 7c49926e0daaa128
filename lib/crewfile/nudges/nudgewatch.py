"""nudge-tick --watch: when it ticks is its page's (docs/commands/nudge-tick.md).
In a session directory only its status log and meta are news: its lock files
are opened by readers (counted as a change, each tick, whose reads open
sessions/NAME/lock, would wake the next, forty a second), and the wake
paths' files (announce.lock, rewake.lock, announced) say nothing a tick reads."""
import os
import time

from crewfile.core import notify, paths
from crewfile.core.clocks import clock_now
from crewfile.core.errors import CrewfileError
from crewfile.nudges.nudge import REFUSED, World, tick, tick_lock
from crewfile.nudges.schedules import due_in, load_all
from crewfile.session.delivery import ACCOUNT_BLOCKED, TRANSIENT
from crewfile.session.reader import names

WATCH_POLL = 60.0          # --watch also ticks this often, as cron would
WATCH_RETRY = 0.25         # ... and this soon after an event if a refusal may be transient,
WATCH_RETRY_MAX = 4.0      # doubling up to this: an agent slow to redraw its prompt on a
WATCH_RETRIES = 8          # loaded machine is still reached within ~20 s, not at the next poll
WATCH_PROBE = 5.0          # how often --watch checks its directories are still the ones it watches


def watch(crew, emit, world_factory=World, stop=lambda: False, warn=None):
    """nudge-tick --watch (docs/commands/nudge-tick.md): *emit* gets each
    tick's outcomes, until *stop*() is true. All a tick knows is read afresh,
    so a crew directory replaced under it is simply followed."""
    warn = warn or notify.warn_stderr
    changes = notify.DirWatch(warn)
    roots = (crew.root, crew.sub(paths.SESSIONS), crew.sub(paths.NUDGES))
    seen = None
    said = {}
    retries = 0
    try:
        while not stop():
            crew.ensure_sub(paths.NUDGES)
            crew.ensure_sub(paths.SESSIONS)
            now = [notify.identity(d) for d in roots]
            if now != seen:
                if seen is not None:
                    warn(f"the crew directory {crew.root} was replaced; following the new one")
                    changes.reset()
                seen = now
            # Watch before looking: a change made while the tick reads, or
            # right after it (a turn ending as its refusal is said), wakes
            # the wait below instead of waiting for the next poll.
            changes.add(roots[2])
            changes.add(roots[1])
            for name in names(crew):
                changes.add(os.path.join(roots[1], name))
            outcomes = world = None
            lock = tick_lock(crew, timeout=10)
            if lock is not None:
                world, bad = world_factory(crew), []
                with lock:
                    try:
                        outcomes = tick(crew, world, bad=bad)
                    except CrewfileError as e:
                        # locks/nudges stuck past the bound, a disk that fails us: a
                        # watcher says so once and ticks again, it does not end.
                        bad.append(("tick", e))
                emit(outcomes or [])
                said = _say_damaged(warn, said, bad, world)
            timeout = min(_next_due(crew), _block_lifts(world, outcomes))
            transient = outcomes is None or any(
                o.outcome == REFUSED and o.why.code in TRANSIENT for o in outcomes)
            if transient and retries < WATCH_RETRIES:
                timeout = min(timeout, WATCH_RETRY * 2 ** retries, WATCH_RETRY_MAX)
                retries += 1
            deadline = time.monotonic() + timeout
            while not stop():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                found = changes.changes(min(left, WATCH_PROBE))
                if _is_news(found, roots[1]):
                    retries = 0
                    break
                if [notify.identity(d) for d in roots] != seen:
                    break
    finally:
        changes.close()


def _is_news(found, sessions):
    """Does *found* (DirWatch.changes()) touch what a tick reads: an entry of
    sessions/ or nudges/, a session's status log or meta? None (the kernel
    lost events) may be any."""
    return found is None or any(os.path.dirname(d) != sessions or name.startswith(paths.STATUS)
                                or name == paths.META for d, name in found)


def _say_damaged(warn, said, bad, world):
    """Name each damaged schedule or meta once while it stays the same (not
    once per tick); return what is said now."""
    now = {name: str(e) for name, e in bad}
    now.update({f"meta of {name}": why for name, why in world.damaged.items()})
    for key, why in now.items():
        if said.get(key) != why:
            warn(why if key == "tick" else f"skipped {why}")
    return now


def _block_lifts(world, outcomes):
    """Seconds until the first account block that held a nudge this tick lifts
    by itself (WATCH_POLL if none): the held nudge goes out then, not at the
    next poll. No status record marks the moment, so no change wakes us."""
    wait = WATCH_POLL
    for o in outcomes or ():
        if o.outcome == REFUSED and o.why.code == ACCOUNT_BLOCKED and o.session:
            until = world.verdict(o.session).account_until
            if until is not None:
                wait = min(wait, max(0.0, until - time.time()) + 0.01)
    return wait


def _next_due(crew):
    """Seconds until the next armed schedule falls due (WATCH_POLL at most)."""
    now = clock_now()
    lefts = [due_in(sched, now) for sched in load_all(crew) if sched.get("armed")]
    return min([WATCH_POLL] + [left + 0.01 for left in lefts if left > 0])
