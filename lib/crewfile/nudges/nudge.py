"""Scheduled nudges: a message typed into an idle session when nobody else will.

The tick: the schedules are schedules.py's, their clocks clocks.py's, what
a session is now verdict.py's, the keys delivery.py's, the --watch loop
nudgewatch.py's. A schedule is a file nudges/ID, one per (user, session).
nudge-tick (from cron, or --watch) takes
locks/nudge-tick with one try (busy: exit at once, do nothing) and, for each
armed schedule that is due, asks three questions; only one answer is
permission:

  1. not live at all (no matching session, no pane registered, or the
     verdict NOT_LIVE: the agent gone, its server gone or restarted, the
     pane gone, the session ended): refuse AND disarm: typing there could
     only start something, and a schedule is attached to a conversation,
     not a place.
  2. live but busy (the agent stopped or not in front, liveness unknown,
     its lock stuck past LOCK_WAIT, generating, state
     unknown, a permission dialog up, the captain's keys in the window
     lately, a draft on the prompt line, no prompt on the screen): refuse,
     keep; reconsidered at the very next tick.
     Its own loop armed (verdict.own_loop: Claude Code's own cron jobs,
     session-only or durable, or its /goal): refuse, keep, with that reason; seed 003:
     never two speakers. The hold lifts when they are gone. A
     scheduled_tasks.json that is not believed holds nothing, and is said
     once, as a `problem` record naming the schedule.
  3. another live session (or one whose liveness is unknown) works in the
     same tree (realpath; the git top level where there is one; one inside
     the other counts), or either tree is unknown: refuse, keep.

Then the attempt is counted and stored (before any key is typed, so a crash
mid-delivery cannot repeat it) and delivery.deliver types the message.
`every` is a floor: the next attempt is due `every` seconds after this one,
delivered or not. At `max` attempts the schedule disarms itself.

Time: see clocks.py. A negative elapsed time (the wall clock set back
across a reboot) rebases the schedule to now, so it waits one `every` at
most.

No lock wait of a tick lasts more than LOCK_WAIT: a session whose lock is
stuck is refused (`lock-stuck`, naming the holder) and the others go on;
the record of that refusal is appended without the lock (Session.append_lines).

Outcomes are appended to the target's status log as records: `nudge`
(delivered), `nudge-unconfirmed` (Enter pressed and the prompt line
cleared, but the agent's prompt hook recorded no turn: counted, never typed
again; a `turn-started` after it in the same log says it was taken late),
`nudge-failed`, `nudge-refused`, `nudge-disarmed`. A refusal
with the same code as the schedule's previous outcome is not appended again
(a turn of two hours would otherwise write 120 identical lines, and in
--watch mode our own record would wake us to write another).
"""
import os

from crewfile.core import paths, records
from crewfile.core.clocks import clock_now
from crewfile.core.errors import BadInput, CrewfileError, NotFound, SystemFailure
from crewfile.core.locks import acquire
from crewfile.nudges.schedules import target_ids, update_stored, due, load_all, matches, rebased
from crewfile.session.verdict import Answer
from crewfile.session.verdict import NOT_LIVE
from crewfile.session.verdict import overlap
from crewfile.session import delivery
from crewfile.session.verdict import LIVE
from crewfile.session.verdict import Look
from crewfile.session.sessions import Session
from crewfile.core.locks import holder
from crewfile.core.text import escape
from crewfile.session.sessions import names
from crewfile.session import verdict
from crewfile.session.verdict import tree_of

DELIVERED, FAILED, REFUSED, DISARMED = "delivered", "failed", "refused", "disarmed"
UNCONFIRMED = "unconfirmed"
KIND = {DELIVERED: "nudge", UNCONFIRMED: "nudge-unconfirmed", FAILED: "nudge-failed",
        REFUSED: "nudge-refused", DISARMED: "nudge-disarmed"}
LOCK_WAIT = 1.0            # the longest a tick waits for any lock (a stuck one is skipped)
# Answer codes of the tick's own (delivery's and the verdict's are theirs)
OTHER_SESSION, AMBIGUOUS, JUST_NUDGED, MAX = "other-session", "ambiguous", "just-nudged", "max"
DAMAGED, LOCK_STUCK, UNTIL = "damaged", "lock-stuck", "until"


# -- the world a tick looks at ---------------------------------------------------

class World:
    """What a tick needs to know and do, from the real machine.

    Every fact about a session comes from verdict.py (one Look per tick).
    The model-based test replaces live/busy/deliver/now with a model; the
    schedule files, session metadata and status logs stay real.
    """

    def __init__(self, crew):
        self.crew = crew
        self.look = Look()
        self._metas = None
        self.damaged = {}        # session name -> why its meta cannot be used
        self._verdicts = {}
        self._trees = {}

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

    def index(self):
        """{(key, value): [session names]} for name, session_key, agent_session_id."""
        if getattr(self, "_index", None) is None:
            self._index = {}
            for name, meta in self.metas().items():
                for key, field in (("session", "name"), ("session_key", "session_key"),
                                   ("agent_session_id", "agent_session_id")):
                    if meta.get(field):
                        self._index.setdefault((key, meta[field]), []).append(name)
        return self._index

    def session(self, name):
        """The Session, its metadata the one this tick read (delivery reads it afresh)."""
        sess = Session(self.crew, name)
        if self._metas is not None and name in self._metas:
            sess._meta = self._metas[name]
        return sess

    def verdict(self, name):
        if name not in self._verdicts:
            self._verdicts[name] = verdict.of(self.session(name), self.look)
        return self._verdicts[name]

    def live(self, name):
        """verdict.LIVE, NOT_LIVE or UNKNOWN."""
        return self.verdict(name).live

    def live_why(self, name):
        """Why the session is not LIVE, for people."""
        why = self.verdict(name).why
        return str(why) if why else "the session is not live"

    def stuck(self, name):
        """None, or an Answer saying the session's lock is stuck: held past
        LOCK_WAIT, its writers' records are held up, so its log cannot say it is idle."""
        lock_path = self.session(name).lock_path
        held = acquire(lock_path, timeout=LOCK_WAIT)
        if held is None:
            return Answer(LOCK_STUCK, f"{lock_path} is held by {holder(lock_path)}")
        held.release()
        return None

    def busy(self, name, screen):
        """None when safe to type now, else delivery's Answer."""
        return delivery.check(self.session(name), self.look, screen=screen,
                              known=self.verdict(name))[0]

    def own_loop(self, name):
        """(None or an Answer saying the session's own loop is armed, problem or None)."""
        return verdict.own_loop(self.session(name))

    def tree(self, name):
        if name not in self._trees:
            self._trees[name] = tree_of(self.metas()[name].get("cwd"))
        return self._trees[name]

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


def tick_lock(crew):
    """The tick lock, or None when another tick holds it (one try)."""
    return acquire(os.path.join(crew.ensure_sub(paths.LOCKS), paths.NUDGE_TICK_LOCK), timeout=0)


def tick(crew, world=None, bad=None):
    """One pass over the schedules (caller holds the tick lock); returns [Outcome].

    A damaged schedule file is skipped ((name, error) appended to *bad*); the
    others are acted on all the same."""
    world = world or World(crew)
    now = world.now()
    out = []
    nudged = set()
    for sched in load_all(crew, bad):
        if not sched.get("armed"):
            continue
        if sched.get("until") is not None and now["wall"] >= sched["until"]:
            out.append(_disarm(crew, world, sched, None, Answer(
                UNTIL, f"its --until moment {records.timestamp(sched['until'])} has passed")))
            continue
        if rebased(sched, now):
            # The wall clock went back across a reboot: restart the floor from now.
            update_stored(crew, sched, {"base": now})
            continue
        if not due(sched, now):
            continue
        result = _decide(crew, world, sched, now, nudged)
        if result:
            out.append(result)
    return out


def _find(world, sched):
    """(session name, None) or (None, Answer)."""
    index = world.index()
    names = set()
    for key in ("session_key", "agent_session_id", "session"):
        if sched.get(key):
            names.update(index.get((key, sched[key]), ()))
    metas = world.metas()
    found = sorted(name for name in names if matches(sched, metas[name]))
    if not found and world.damaged:
        # A damaged meta may be the one it targets: never disarm on a damaged file.
        return None, Answer(DAMAGED, "session metadata unreadable: "
                                     + "; ".join(world.damaged[n] for n in sorted(world.damaged)))
    if not found:
        return None, Answer(NOT_LIVE, "no registered session matches")
    if len(found) > 1:
        live = [n for n in found if world.live(n) != NOT_LIVE]
        if len(live) > 1:
            return None, Answer(AMBIGUOUS, f"sessions {', '.join(live)} all match")
        found = live or found[:1]
    return found[0], None


def own_loops(crew, scheds, world=None):
    """{schedule id: how many of its target's own cron jobs are armed
    (verdict.own_jobs), or None where no one session is its target}: what
    nudge-ls shows beside each schedule."""
    world = world or World(crew)
    out = {}
    for sched in scheds:
        out[sched["id"]] = None
        try:
            name, _ = _find(world, sched)
            if name is not None:
                out[sched["id"]] = verdict.own_count(*verdict.own_jobs(world.session(name))[:3])
        except (CrewfileError, OSError):
            pass        # the session's own problem: its column says `-`, the others are shown
    return out


def _decide(crew, world, sched, now, nudged):
    name, why = _find(world, sched)
    if name is None:
        if why.code in (AMBIGUOUS, DAMAGED):
            return _refuse(crew, world, sched, None, why)
        return _disarm(crew, world, sched, None, why, refused=True)
    if not world.metas()[name].get("tmux"):
        return _disarm(crew, world, sched, name, Answer(
            NOT_LIVE, "no tmux pane is registered (the only channel)"), refused=True)
    live = world.live(name)
    if live == NOT_LIVE:                                        # question 1
        return _disarm(crew, world, sched, name, Answer(NOT_LIVE, world.live_why(name)),
                       refused=True)
    why = world.stuck(name)                                     # question 2: records held up
    if not why:
        why = world.busy(name, screen=False)                    # question 2, cheap part
    if not why and live != LIVE:
        why = Answer(delivery.LIVE_UNKNOWN, "liveness cannot be established")
    if not why:
        why, problem = world.own_loop(name)                     # question 2: one voice
        _say_once(crew, world, sched, name, problem)
    if not why:
        why = tree_conflict(world, name)                        # question 3
    if not why and name in nudged:
        why = Answer(JUST_NUDGED, "another schedule delivered to it this tick")
    if not why:
        why = world.busy(name, screen=True)                     # question 2: keys, screen
    if why:
        if why.code in (delivery.NOT_LIVE, delivery.ASIDE):
            return _disarm(crew, world, sched, name, why, refused=True)
        return _refuse(crew, world, sched, name, why)
    # Permission. Count and store the attempt before typing a key.
    attempts = sched["attempts"] + 1
    learned = {k: v for k, v in target_ids(world.metas()[name]).items()
               if v and not sched.get(k)}
    if update_stored(crew, sched, {"attempts": attempts, "base": now, **learned,
                             "last_attempt": records.timestamp(now["wall"])}) is None:
        return None
    nudged.add(name)
    ok, answer = world.deliver(name, sched["message"])
    tally = f"attempt {attempts}/{sched['max']}"
    text = f"{tally}: {answer}"
    if ok:
        result = _record(crew, world, sched, name, DELIVERED, answer, text=text)
    elif answer.code == delivery.UNCONFIRMED:
        result = _record(crew, world, sched, name, UNCONFIRMED, answer, text=text)
    elif answer.code == delivery.NOT_LIVE:
        return _disarm(crew, world, sched, name, answer, text=text)
    else:
        result = _record(crew, world, sched, name, FAILED, answer, text=text)
    if attempts >= sched["max"]:
        _disarm(crew, world, sched, name, Answer(MAX, f"{attempts} of {sched['max']} attempts made"))
    return result


def _say_once(crew, world, sched, name, problem):
    """A `problem` record when *problem* (a scheduled_tasks.json not believed)
    is new for this schedule; the schedule keeps it (own_problem) so a file
    that stays damaged is said once, not at every tick."""
    if (problem or None) == (sched.get("own_problem") or None):
        return
    if update_stored(crew, sched, {"own_problem": problem or ""}) is None or not problem:
        return
    try:
        world.session(name).append("problem", f"{sched['id']} {problem}: not believed,"
                                              " it holds no nudge")
    except (NotFound, SystemFailure, BadInput):
        pass


def _refuse(crew, world, sched, name, why):
    if sched.get("last_outcome") == REFUSED and sched.get("last_code") == why.code:
        return Outcome(sched["id"], name, REFUSED, why)     # said already: keep quiet
    return _record(crew, world, sched, name, REFUSED, why)


def _disarm(crew, world, sched, name, why, refused=False, text=None):
    """Disarm with *why*; refused=True says no attempt was made (the target is gone)."""
    _record(crew, world, sched, name, DISARMED, why, refused, text, armed=False)
    return Outcome(sched["id"], name, DISARMED, why, refused, text)


def _record(crew, world, sched, name, outcome, why, refused=False, text=None, **extra):
    out = Outcome(sched["id"], name, outcome, why, refused, text)
    changes = {"last_outcome": outcome, "last_code": why.code, "last_reason": out.reason,
               "last_change": records.timestamp(), **extra}
    if update_stored(crew, sched, changes) is None:
        return None
    if name is not None:
        try:
            world.session(name).append(KIND[outcome], f"{sched['id']} {out.reason}")
        except (NotFound, SystemFailure, BadInput):
            pass          # the schedule file has it; a log we cannot write must not stop the tick
    return out
