"""Scheduled nudges: a message typed into an idle session when nobody else will.

A tick asks each due schedule three questions (not live: disarm; busy: keep;
another session in its tree: keep), counts the attempt, then types through
delivery.py: docs/commands/nudge-tick.md.
"""
import os

from crewfile.core import paths, records
from crewfile.core.clocks import clock_now, elapsed
from crewfile.core.errors import BadInput, CrewfileError, NotFound, SystemFailure
from crewfile.core.locks import acquire, holder
from crewfile.core.text import escape
from crewfile.nudges.schedules import due_in, load_all, matches, target_ids, update_stored
from crewfile.session import delivery, ownloop, verdict
from crewfile.session.reader import names
from crewfile.session.sessions import Session
from crewfile.session.verdict import LIVE, NOT_LIVE, Answer, Look, overlap, tree_of

DELIVERED, FAILED, REFUSED, DISARMED = "delivered", "failed", "refused", "disarmed"
UNCONFIRMED = "unconfirmed"
KIND = {DELIVERED: "nudge", UNCONFIRMED: "nudge-unconfirmed", FAILED: "nudge-failed",
        REFUSED: "nudge-refused", DISARMED: "nudge-disarmed"}
# A schedule spent on a failed last attempt leaves its target untended: its
# disarming is recorded as this kind, which wakes the primary (wake-filter.md).
SPENT_KIND = "nudge-spent"
LOCK_WAIT = 1.0            # the longest a tick waits for any lock (a stuck one is skipped)
# Answer codes of the tick's own (delivery's and the verdict's are theirs)
OTHER_SESSION, AMBIGUOUS, JUST_NUDGED, MAX = "other-session", "ambiguous", "just-nudged", "max"
DAMAGED, LOCK_STUCK, UNTIL = "damaged", "lock-stuck", "until"


# -- the world a tick looks at ---------------------------------------------------

class World:
    """What a tick needs to know and do, from the real machine: every fact
    about a session from verdict.py, one Look per tick (the model-based test
    replaces live/busy/deliver/now; the files stay real)."""

    def __init__(self, crew):
        self.crew = crew
        self.look = Look()
        self._metas = None
        self.damaged = {}        # session name -> why its meta cannot be used
        self._verdicts = {}

    def now(self):
        return clock_now()

    def metas(self):
        if self._metas is None:
            self._metas = {}
            for name in names(self.crew):
                try:
                    self._metas[name] = Session(self.crew, name).meta
                except NotFound:
                    continue
                except CrewfileError as e:
                    self.damaged[name] = str(e)
        return self._metas

    def session(self, name):
        """The Session, its metadata the one this tick read (delivery reads it afresh)."""
        return Session(self.crew, name, meta=(self._metas or {}).get(name))

    def verdict(self, name):
        if name not in self._verdicts:
            self._verdicts[name] = verdict.of(self.session(name), self.look)
        return self._verdicts[name]

    def live(self, name):
        return self.verdict(name).live

    def live_why(self, name):
        why = self.verdict(name).why
        return str(why) if why else "the session is not live"

    def stuck(self, name):
        """None, or an Answer saying the session's lock is held past LOCK_WAIT
        (its writers' records held up, its log cannot say it is idle)."""
        lock_path = self.session(name).lock_path
        held = acquire(lock_path, timeout=LOCK_WAIT)
        if held is None:
            return Answer(LOCK_STUCK, f"{lock_path} is held by {holder(lock_path)}")
        held.release()
        return None

    def busy(self, name, screen):
        return delivery.check(self.session(name), self.look, screen=screen,
                              known=self.verdict(name))[0]

    def tree(self, name):
        return tree_of(self.metas()[name].get("cwd"))       # a few lstat calls: not kept

    def deliver(self, name, text):
        return delivery.deliver(self.session(name), text)


def tree_conflict(world, name):
    """None, or an Answer saying which other live session works in *name*'s tree."""
    mine = world.tree(name)
    for other in sorted(world.metas()):
        if other == name or world.live(other) == NOT_LIVE:
            continue
        theirs = world.tree(other)
        if mine is None:
            return Answer(OTHER_SESSION, f"{other} is live and {name}'s tree is unknown")
        if theirs is None:
            return Answer(OTHER_SESSION, f"{other} is live and its tree is unknown")
        if overlap(mine, theirs):
            return Answer(OTHER_SESSION, f"{other} is live in {theirs}")
    return None


# -- the tick --------------------------------------------------------------------

class Outcome:
    """One schedule's outcome in a tick: why is an Answer; reason the text people read."""
    __slots__ = ("sched", "session", "outcome", "why", "reason")

    def __init__(self, sched, session, outcome, why, refused=False, text=None):
        self.sched, self.session, self.outcome, self.why = sched, session, outcome, why
        self.reason = ("refused and disarmed: " if refused else "") + (text or str(why))

    def line(self, ts):
        return f"{ts} {self.sched} {self.session or '-'} {self.outcome}: {escape(self.reason)}\n"


def tick_lock(crew, timeout=0):
    """The tick lock, or None when another tick holds it (by default, one try)."""
    return acquire(os.path.join(crew.ensure_sub(paths.LOCKS), paths.NUDGE_TICK_LOCK), timeout=timeout)


def tick(crew, world=None, bad=None):
    """One pass over the schedules (caller holds the tick lock); returns
    [Outcome]. A damaged schedule is skipped, (name, error) appended to *bad*."""
    world = world or World(crew)
    now = world.now()
    out = []
    nudged = set()
    for sched in load_all(crew, bad):
        if not sched.get("armed"):
            continue
        if sched.get("until") is not None and now["wall"] >= sched["until"]:
            out.append(_disarm(world, sched, None, Answer(
                UNTIL, f"its --until moment {records.timestamp(sched['until'])} has passed")))
            continue
        if elapsed(sched["base"], now) < 0:
            # The wall clock went back across a reboot: restart the floor from now.
            update_stored(crew, sched, {"base": now})
            continue
        if due_in(sched, now) > 0:
            continue
        if sched["attempts"] >= sched["max"]:
            # Spent yet armed: a tick stopped between counting its last attempt
            # and disarming. Never an attempt past max.
            out.append(_disarm_spent(world, sched, _find(world, sched)[0]))
            continue
        result = _decide(world, sched, now, nudged)
        if result:
            out.append(result)
    return out


def _find(world, sched):
    """(session name, None) or (None, Answer)."""
    found = sorted(name for name, meta in world.metas().items() if matches(sched, meta))
    if not found:
        if world.damaged:       # it may target a damaged meta: never disarm on a damaged file
            return None, Answer(DAMAGED, "session metadata unreadable: "
                                + "; ".join(world.damaged[n] for n in sorted(world.damaged)))
        return None, Answer(NOT_LIVE, "no registered session matches")
    if len(found) > 1:
        live = [n for n in found if world.live(n) != NOT_LIVE]
        if len(live) > 1:
            return None, Answer(AMBIGUOUS, f"sessions {', '.join(live)} all match")
        found = live or found[:1]
    return found[0], None


def own_loops(crew, scheds, world=None):
    """{schedule id: how many of its target's own cron jobs are armed, or
    None where no one session is its target}: nudge-ls's column."""
    world = world or World(crew)
    out = {}
    for sched in scheds:
        out[sched["id"]] = None
        try:
            name, _ = _find(world, sched)
            if name is not None:
                out[sched["id"]] = ownloop.own_count(*ownloop.own_jobs(world.session(name))[:3])
        except (CrewfileError, OSError):
            pass        # the session's own problem: its column says `-`, the others are shown
    return out


def _decide(world, sched, now, nudged):
    name, why = _find(world, sched)
    if name is None:
        if why.code in (AMBIGUOUS, DAMAGED):
            return _refuse(world, sched, None, why)
        return _disarm(world, sched, None, why, refused=True)
    if not world.metas()[name].get("tmux"):
        return _disarm(world, sched, name, Answer(
            NOT_LIVE, "no tmux pane is registered (the only channel)"), refused=True)
    live = world.live(name)
    if live == NOT_LIVE:                                        # question 1
        return _disarm(world, sched, name, Answer(NOT_LIVE, world.live_why(name)), refused=True)
    why = world.stuck(name)                                     # question 2: records held up
    if not why:
        why = world.busy(name, screen=False)                    # question 2, cheap part
    if not why and live != LIVE:
        why = Answer(delivery.LIVE_UNKNOWN, "liveness cannot be established")
    if not why:
        why, problem = ownloop.own_loop(world.session(name))    # question 2: one voice
        _say_once(world, sched, name, problem)
    if not why:
        why = tree_conflict(world, name)                        # question 3
    if not why and name in nudged:
        why = Answer(JUST_NUDGED, "another schedule delivered to it this tick")
    if not why:
        why = world.busy(name, screen=True)                     # question 2: keys, screen
    if why:
        if why.code in (delivery.NOT_LIVE, delivery.ASIDE):
            return _disarm(world, sched, name, why, refused=True)
        return _refuse(world, sched, name, why)
    # Permission. Count and store the attempt before typing a key.
    attempts = sched["attempts"] + 1
    learned = {k: v for k, v in target_ids(world.metas()[name]).items()
               if v and not sched.get(k)}
    if update_stored(world.crew, sched, {"attempts": attempts, "base": now, **learned,
                                         "last_attempt": records.timestamp(now["wall"])}) is None:
        return None
    nudged.add(name)
    ok, answer = world.deliver(name, sched["message"])
    text = f"attempt {attempts}/{sched['max']}: {answer}"
    if not ok and answer.code == delivery.NOT_LIVE:
        return _disarm(world, sched, name, answer, text=text)
    outcome = DELIVERED if ok else UNCONFIRMED if answer.code == delivery.UNCONFIRMED else FAILED
    result = _record(world, sched, name, outcome, answer, text=text)
    if attempts >= sched["max"]:
        _disarm_spent(world, sched, name)
    return result


def _disarm_spent(world, sched, name):
    """Disarm a schedule at its ceiling; its last attempt failed (Enter never
    pressed): nobody was nudged, and the record says so to the primary."""
    failed = sched.get("last_outcome") == FAILED
    why = Answer(MAX, f"{sched['attempts']} of {sched['max']} attempts made"
                      + (", the last failed" if failed else ""))
    return _disarm(world, sched, name, why, kind=SPENT_KIND if failed else None)


def _say_once(world, sched, name, problem):
    """A `problem` record when *problem* (a scheduled_tasks.json not believed)
    is new for this schedule (kept as own_problem: said once, not each tick)."""
    if (problem or None) == (sched.get("own_problem") or None):
        return
    if update_stored(world.crew, sched, {"own_problem": problem or ""}) is None or not problem:
        return
    try:
        world.session(name).append("problem", f"{sched['id']} {problem}: not believed,"
                                              " it holds no nudge")
    except (NotFound, SystemFailure, BadInput):
        pass


def _refuse(world, sched, name, why):
    if sched.get("last_outcome") == REFUSED and sched.get("last_code") == why.code:
        return Outcome(sched["id"], name, REFUSED, why)     # said already: keep quiet
    return _record(world, sched, name, REFUSED, why)


def _disarm(world, sched, name, why, refused=False, text=None, kind=None):
    """Disarm with *why*; refused=True says no attempt was made (the target is gone)."""
    return (_record(world, sched, name, DISARMED, why, refused, text, kind, armed=False)
            or Outcome(sched["id"], name, DISARMED, why, refused, text))


def _record(world, sched, name, outcome, why, refused=False, text=None, kind=None, **extra):
    out = Outcome(sched["id"], name, outcome, why, refused, text)
    changes = {"last_outcome": outcome, "last_code": why.code, "last_reason": out.reason,
               "last_change": records.timestamp(), **extra}
    if update_stored(world.crew, sched, changes) is None:
        return None
    if name is not None:
        try:
            world.session(name).append(kind or KIND[outcome], f"{sched['id']} {out.reason}")
        except (NotFound, SystemFailure, BadInput):
            pass          # the schedule file has it; a log we cannot write must not stop the tick
    return out
