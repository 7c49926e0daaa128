"""Scheduled nudges: a message typed into an idle session when nobody else will.

A schedule is a file nudges/ID (JSON, atomic replace under locks/nudges),
one per (user, session). nudge-tick (from cron, or --watch) takes
locks/nudge-tick with one try (busy: exit at once, do nothing) and, for each
armed schedule that is due, asks the three questions stated once, in
protocol.md's "nudge-tick" section (not live: refuse and disarm; busy:
refuse, keep; another session in the same tree: refuse, keep): _decide
below is that list, in that order.

Then the attempt is counted and stored (before any key is typed, so a crash
mid-delivery cannot repeat it) and delivery.deliver types the message.
`every` is a floor: the next attempt is due `every` seconds after this one,
delivered or not. At `max` attempts the schedule disarms itself.

Time: each schedule keeps the wall time, CLOCK_BOOTTIME and boot id of its
last attempt (or creation). Within one boot, elapsed time is measured on
CLOCK_BOOTTIME, which no clock setting moves: a wall clock set forwards does
not make anything due early, one set backwards does not stall anything.
Across a reboot only the wall clock is comparable: a forward jump makes a
schedule due once (one attempt moves the base to now); a negative elapsed
time (clock set back) rebases the schedule to now, so it waits one `every`
at most.

No lock wait of a tick lasts more than LOCK_WAIT: a session whose lock is
stuck is refused (`lock-stuck`, naming the holder) and the others go on; a
record for it is kept in its spool (spool.py).

Outcomes are appended to the target's status log as records: `nudge`
(delivered), `nudge-failed`, `nudge-refused`, `nudge-disarmed`. A refusal
with the same code as the schedule's previous outcome is not appended again
(a turn of two hours would otherwise write 120 identical lines, and in
--watch mode our own record would wake us to write another).
"""
import json
import os
import time

from . import paths, records
from .atomic import replace
from .errors import BadFile, BadInput, CrewfileError, NotFound, Refused, SystemFailure
from .locks import acquire

DEFAULT_MAX = 100
DELIVERED, FAILED, REFUSED, DISARMED = "delivered", "failed", "refused", "disarmed"
KIND = {DELIVERED: "nudge", FAILED: "nudge-failed", REFUSED: "nudge-refused",
        DISARMED: "nudge-disarmed"}
WATCH_POLL = 60.0          # --watch also ticks this often, as cron would
WATCH_RETRY = 0.25         # ... and this soon after an event if a refusal may be transient
WATCH_RETRIES = 8
WATCH_PROBE = 5.0          # how often --watch checks its directories are still the ones it watches
_TRANSIENT = ("draft", "no-prompt", "delivery-busy")
LOCK_WAIT = 1.0            # the longest a tick waits for any lock (a stuck one is skipped)

_boot_id = None


def boot_id():
    global _boot_id
    if _boot_id is None:
        try:
            with open("/proc/sys/kernel/random/boot_id") as f:
                _boot_id = f.read().strip()
        except OSError:
            _boot_id = "unknown"
    return _boot_id


def clock_now():
    """This moment on the three clocks a schedule keeps."""
    return {"wall": time.time(), "mono": time.clock_gettime(time.CLOCK_BOOTTIME),
            "boot": boot_id()}


def elapsed(base, now):
    """Seconds from *base* to *now*: CLOCK_BOOTTIME within a boot, else wall (may be < 0)."""
    if base.get("boot") == now["boot"] and base.get("mono") is not None:
        return now["mono"] - base["mono"]
    return now["wall"] - base.get("wall", now["wall"])


# -- schedule files ----------------------------------------------------------

def _dir(crew):
    return crew.ensure_sub(paths.NUDGES)


def _lock(crew):
    return acquire(os.path.join(crew.ensure_sub(paths.LOCKS), paths.NUDGES_LOCK))


def _path(crew, sid):
    from .names import check_name
    return os.path.join(crew.sub(paths.NUDGES), check_name(sid, "schedule id"))


def _read(path):
    """The schedule in *path*, None if absent; BadFile if it is not a schedule."""
    from .shapes import load
    obj = load(path, "schedule")
    if obj is not None and obj["id"] != os.path.basename(path):
        raise BadFile(path, f"id {obj['id']!r} is not the file's name")
    return obj


def _write(crew, sched):
    replace(_path(crew, sched["id"]), json.dumps(sched, sort_keys=True) + "\n")


def load_all(crew, bad=None):
    """Every schedule, sorted by id. A file that is not a schedule (damaged,
    unreadable, a link) is skipped, and (its name, the error) appended to *bad*."""
    try:
        names = paths.list_dir(crew.sub(paths.NUDGES))
    except FileNotFoundError:
        return []
    out = []
    base = crew.sub(paths.NUDGES)
    for name in names:
        if name.startswith("."):
            continue
        try:
            obj = _read(os.path.join(base, name))
        except CrewfileError as e:
            if bad is not None:
                bad.append((name, e))
            continue
        if obj:
            out.append(obj)
    out.sort(key=lambda s: s["id"])
    return out


def get(crew, sid):
    obj = _read(_path(crew, sid))
    if not obj:
        raise NotFound(f"no schedule {sid!r}")
    return obj


def _new_id():
    return "n" + os.urandom(5).hex()


def _target_ids(meta):
    return {"session": meta.get("name"), "session_key": meta.get("session_key"),
            "agent_session_id": meta.get("agent_session_id")}


def matches(sched, meta):
    """Does *sched* belong to the session whose metadata is *meta*?

    On either id (session key, agent session id) when the schedule has one,
    never when an id both carry differs (another conversation under a reused
    name or key); by name only when the schedule carries no id.
    """
    shared = False
    for key in ("session_key", "agent_session_id"):
        want, have = sched.get(key), meta.get(key)
        if want and have:
            if want != have:
                return False
            shared = True
    if sched.get("session_key") or sched.get("agent_session_id"):
        return shared
    return bool(sched.get("session")) and sched.get("session") == meta.get("name")


def add(crew, every, message, session=None, session_key=None, agent_session_id=None,
        max_attempts=None, user=None, replace_existing=False, now=None, until=None):
    """Create (or with replace_existing, re-create) the schedule for (user, session).

    until: a wall-clock moment (seconds since the epoch) after which the
    schedule disarms itself instead of nudging (the captain is back)."""
    from . import delivery, sessions
    if sum(bool(x) for x in (session, session_key, agent_session_id)) != 1:
        raise BadInput("name the session with exactly one of --session, --session-key,"
                       " --agent-session-id")
    every = _positive(every, "--every")
    max_attempts = DEFAULT_MAX if max_attempts is None else _positive(max_attempts, "--max")
    delivery.check_text(message)
    from .names import current_user
    user = user or current_user()
    if session:
        sess = sessions.Session(crew, session)
        meta = sess.meta
    else:
        sess = sessions.find(crew, agent_session_id=agent_session_id, session_key=session_key)
        if sess is None:
            raise NotFound(f"no session with {'agent session id' if agent_session_id else 'session key'}"
                           f" {agent_session_id or session_key!r}")
        meta = sess.meta
    if meta.get("kind") == "aside":
        raise Refused(f"{meta.get('name')} is an aside: only the captain speaks into it")
    ids = _target_ids(meta)
    now = now or clock_now()
    if until is not None and until <= now["wall"]:
        raise BadInput(f"bad --until {records.timestamp(until)}: already past")
    _dir(crew)
    with _lock(crew):
        existing = [s for s in load_all(crew) if s.get("user") == user and matches(s, meta)]
        if existing and not replace_existing:
            raise Refused(f"{user} already has schedule {existing[0]['id']} for session"
                          f" {meta.get('name')} (nudge-add --replace replaces it)")
        sid = existing[0]["id"] if existing else _new_id()
        for old in existing[1:]:
            os.unlink(_path(crew, old["id"]))
        sched = {"id": sid, "user": user, **ids, "every": every, "message": message,
                 "max": max_attempts, "attempts": 0, "armed": True,
                 "created": records.timestamp(now["wall"]), "rev": os.urandom(6).hex(),
                 "base": now, "until": until, "last_attempt": None, "last_outcome": None, "last_code": None,
                 "last_reason": None, "last_change": None}
        _write(crew, sched)
    return sched


def _positive(value, what):
    """A library caller's int (the command line parses through durations)."""
    from .durations import MAX_SECONDS
    if type(value) is not int or not 1 <= value <= MAX_SECONDS:
        raise BadInput(f"bad {what} {value!r}: a whole number from 1 to {MAX_SECONDS}")
    return value


def remove(crew, sid):
    with _lock(crew):
        path = _path(crew, sid)
        if not os.path.lexists(path):
            raise NotFound(f"no schedule {sid!r}")
        os.unlink(path)


def rearm(crew, meta):
    """Arm again the schedules of the session whose metadata is *meta* that a
    tick disarmed because it was not live; return their ids.

    crew-respawn's act, once it has brought back that same conversation
    (matches() holds on its ids): the outage is over, and the schedule
    belongs to the conversation, not to the outage. Schedules spent at their
    maximum, or disarmed for anything else, stay disarmed.
    """
    done = []
    for sched in load_all(crew):
        if (sched.get("armed") or sched["attempts"] >= sched["max"]
                or "not-live" not in (sched.get("last_reason") or "")
                or not matches(sched, meta)):
            continue
        changes = {"armed": True, "last_outcome": "rearmed", "last_code": "respawned",
                   "last_reason": "armed again: crew-respawn resumed its conversation",
                   "last_change": records.timestamp()}
        if _update(crew, sched, changes) is not None:
            done.append(sched["id"])
    return done


def _update(crew, sched, changes):
    """Apply *changes* to the stored schedule if it is still the one we read."""
    with _lock(crew):
        try:
            cur = _read(_path(crew, sched["id"]))
        except CrewfileError:
            return None          # damaged meanwhile: the next tick names it
        if not cur or cur.get("rev") != sched.get("rev"):
            return None          # removed or replaced meanwhile: theirs wins
        cur.update(changes)
        _write(crew, cur)
        sched.clear()
        sched.update(cur)
        return cur


# -- the world a tick looks at ---------------------------------------------------

class World:
    """What a tick needs to know and do, from the real machine.

    The model-based test replaces live/busy/deliver/now with a model; the
    schedule files, session metadata and status logs stay real.
    """

    def __init__(self, crew):
        from .delivery import Look
        self.crew = crew
        self.look = Look()
        self._metas = None
        self.damaged = {}        # session name -> why its meta cannot be used
        self._ended = {}
        self._trees = {}

    def now(self):
        return clock_now()

    def metas(self):
        if self._metas is None:
            from .sessions import Session, names
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
        from .sessions import Session
        return Session(self.crew, name)

    def live(self, name):
        """yes, no or unknown; a session that has ended is not live whatever its pane."""
        from .liveness import YES
        meta = self.metas()[name]
        answer = self.look.probe.live(meta)
        if answer == YES and self.ended(name):
            return "no"
        return answer

    def ended(self, name):
        if name not in self._ended:
            self._ended[name] = self.session(name).ended()
        return self._ended[name]

    def stuck(self, name):
        """None, or why the session's lock is stuck: held past LOCK_WAIT, its
        writers' records are held up, so its log cannot say it is idle."""
        from .locks import acquire, holder
        lock_path = self.session(name).lock_path
        held = acquire(lock_path, timeout=LOCK_WAIT)
        if held is None:
            return f"lock-stuck: {lock_path} is held by {holder(lock_path)}"
        held.release()
        return None

    def busy(self, name, screen):
        """None when idle, else a delivery reason `code: detail`."""
        from . import delivery
        code, detail = delivery.check(self.session(name), self.look, screen=screen)
        return f"{code}: {detail}" if code else None

    def tree(self, name):
        if name not in self._trees:
            self._trees[name] = tree_of(self.metas()[name].get("cwd"))
        return self._trees[name]

    def deliver(self, name, text):
        from . import delivery
        return delivery.deliver(self.session(name), text)


def tree_of(cwd):
    """The working tree of a directory: its git top level, else itself, resolved; None if unknown."""
    if not cwd:
        return None
    path = os.path.realpath(cwd)
    probe = path
    while True:
        if os.path.lexists(os.path.join(probe, ".git")):
            return probe
        parent = os.path.dirname(probe)
        if parent == probe:
            return path
        probe = parent


def overlap(a, b):
    """One tree is the other or inside it."""
    a, b = a.rstrip("/") + "/", b.rstrip("/") + "/"
    return a.startswith(b) or b.startswith(a)


def tree_conflict(world, name):
    """None, or why another live session works in *name*'s tree."""
    mine = world.tree(name)
    for other in sorted(world.metas()):
        if other == name or world.live(other) == "no":
            continue
        theirs = world.tree(other)
        if mine is None:
            return f"other-session: {other} is live and {name}'s tree is unknown"
        if theirs is None:
            return f"other-session: {other} is live and its tree is unknown"
        if overlap(mine, theirs):
            return f"other-session: {other} is live in {theirs}"
    return None


# -- the tick --------------------------------------------------------------------

class Outcome:
    __slots__ = ("sched", "session", "outcome", "reason")

    def __init__(self, sched, session, outcome, reason):
        self.sched, self.session, self.outcome, self.reason = sched, session, outcome, reason

    def line(self, ts):
        from .records import escape      # a reason may quote a screen or a file
        return f"{ts} {self.sched} {self.session or '-'} {self.outcome}: {escape(self.reason)}\n"


def tick_lock(crew):
    """The tick lock, or None when another tick holds it (one try)."""
    return acquire(os.path.join(crew.ensure_sub(paths.LOCKS), paths.NUDGE_TICK_LOCK), timeout=0)


def due(sched, now):
    return sched.get("armed") and elapsed(sched["base"], now) >= sched["every"]


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
            out.append(_disarm(crew, world, sched, None,
                               f"until: its --until moment {records.timestamp(sched['until'])}"
                               " has passed"))
            continue
        if elapsed(sched["base"], now) < 0:
            # The wall clock went back across a reboot: restart the floor from now.
            _update(crew, sched, {"base": now})
            continue
        if not due(sched, now):
            continue
        result = _decide(crew, world, sched, now, nudged)
        if result:
            out.append(result)
    return out


def _find(world, sched):
    """(session name, None) or (None, reason)."""
    index = world.index()
    names = set()
    for key in ("session_key", "agent_session_id", "session"):
        if sched.get(key):
            names.update(index.get((key, sched[key]), ()))
    metas = world.metas()
    found = sorted(name for name in names if matches(sched, metas[name]))
    if not found and world.damaged:
        # A damaged meta may be the one it targets: never disarm on a damaged file.
        return None, f"damaged: {', '.join(sorted(world.damaged))}: session metadata unreadable"
    if not found:
        return None, "not-live: no registered session matches"
    if len(found) > 1:
        live = [n for n in found if world.live(n) != "no"]
        if len(live) > 1:
            return None, f"ambiguous: sessions {', '.join(live)} all match"
        found = live or found[:1]
    return found[0], None


def _decide(crew, world, sched, now, nudged):
    from .delivery import code_of
    name, why = _find(world, sched)
    if name is None:
        if why.startswith(("ambiguous", "damaged")):
            return _refuse(crew, world, sched, None, why)
        return _disarm(crew, world, sched, None, why, refused=True)
    if not world.metas()[name].get("tmux"):
        return _disarm(crew, world, sched, name,
                       "not-live: no tmux pane is registered (the only channel)", refused=True)
    live = world.live(name)
    if live == "no":                                            # question 1
        return _disarm(crew, world, sched, name, "not-live: the session is not live", refused=True)
    if live != "yes":
        return _refuse(crew, world, sched, name, "live-unknown: liveness cannot be probed")
    why = world.stuck(name)                                     # question 2: records held up
    if not why:
        why = world.busy(name, screen=False)                    # question 2, cheap part
    if not why:
        why = tree_conflict(world, name)                        # question 3
    if not why and name in nudged:
        why = "just-nudged: another schedule delivered to it this tick"
    if not why:
        why = world.busy(name, screen=True)                     # question 2: keys, screen
    if why:
        if code_of(why) in ("not-live", "aside"):
            return _disarm(crew, world, sched, name, why, refused=True)
        return _refuse(crew, world, sched, name, why)
    # Permission. Count and store the attempt before typing a key.
    attempts = sched["attempts"] + 1
    learned = {k: v for k, v in _target_ids(world.metas()[name]).items()
               if v and not sched.get(k)}
    if _update(crew, sched, {"attempts": attempts, "base": now, **learned,
                             "last_attempt": records.timestamp(now["wall"])}) is None:
        return None
    nudged.add(name)
    ok, reason = world.deliver(name, sched["message"])
    tally = f"attempt {attempts}/{sched['max']}"
    if ok:
        result = _record(crew, world, sched, name, DELIVERED, f"{tally}: delivered", "delivered")
    elif code_of(reason) == "not-live":
        return _disarm(crew, world, sched, name, f"{tally}: {reason}")
    else:
        result = _record(crew, world, sched, name, FAILED, f"{tally}: {reason}", code_of(reason))
    if attempts >= sched["max"]:
        _disarm(crew, world, sched, name, f"max: {attempts} of {sched['max']} attempts made")
    return result


def _refuse(crew, world, sched, name, reason):
    from .delivery import code_of
    code = code_of(reason)
    if sched.get("last_outcome") == REFUSED and sched.get("last_code") == code:
        return Outcome(sched["id"], name, REFUSED, reason)     # said already: keep quiet
    return _record(crew, world, sched, name, REFUSED, reason, code)


def _disarm(crew, world, sched, name, reason, refused=False):
    from .delivery import code_of
    if refused:
        reason = f"refused and disarmed: {reason}"
    _record(crew, world, sched, name, DISARMED, reason, code_of(reason), armed=False)
    return Outcome(sched["id"], name, DISARMED, reason)


def _record(crew, world, sched, name, outcome, reason, code, **extra):
    changes = {"last_outcome": outcome, "last_code": code, "last_reason": reason,
               "last_change": records.timestamp(), **extra}
    if _update(crew, sched, changes) is None:
        return None
    if name is not None:
        try:
            world.session(name).append(KIND[outcome], f"{sched['id']} {reason}")
        except (NotFound, SystemFailure, BadInput):
            pass          # the schedule file has it; a log we cannot write must not stop the tick
    return Outcome(sched["id"], name, outcome, reason)


# -- watch ----------------------------------------------------------------------

def watch(crew, emit, world_factory=World, stop=lambda: False, warn=None):
    """Tick whenever a target's status log or a schedule changes, and every WATCH_POLL.

    *emit* gets each tick's outcomes. Runs until *stop*() is true. Changes
    come from inotify, or from polling when it cannot be had (notify.py).
    The crew directory replaced under it (moved away and made again, a
    restore) is noticed within WATCH_PROBE seconds and the new one
    followed: all that a tick knows is read from the directory afresh.
    """
    from . import notify
    warn = warn or notify.warn_stderr
    changes = notify.DirWatch(warn)
    roots = (crew.root, crew.sub(paths.SESSIONS), crew.sub(paths.NUDGES))
    seen = None
    retries = 0
    try:
        while not stop():
            _dir(crew)
            crew.ensure_sub(paths.SESSIONS)
            now = [notify.identity(d) for d in roots]
            if now != seen:
                if seen is not None:
                    warn(f"the crew directory {crew.root} was replaced; following the new one")
                    changes.reset()
                seen = now
            outcomes = None
            lock = acquire(os.path.join(crew.ensure_sub(paths.LOCKS), paths.NUDGE_TICK_LOCK),
                           timeout=10)
            if lock is not None:
                with lock:
                    outcomes = tick(crew, world_factory(crew))
                emit(outcomes)
            changes.add(roots[2])
            changes.add(roots[1])
            _watch_targets(crew, changes)
            timeout = _next_due(crew)
            transient = outcomes is None or any(
                o.outcome == REFUSED and o.reason.split(":", 1)[0] in _TRANSIENT for o in outcomes)
            if transient and retries < WATCH_RETRIES:
                timeout = min(timeout, WATCH_RETRY)
                retries += 1
            deadline = time.monotonic() + timeout
            while not stop():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                if changes.wait(min(left, WATCH_PROBE)):
                    retries = 0
                    break
                if [notify.identity(d) for d in roots] != seen:
                    break
    finally:
        changes.close()


def _watch_targets(crew, changes):
    from .sessions import names
    for name in names(crew):
        changes.add(os.path.join(crew.sub(paths.SESSIONS), name))


def _next_due(crew):
    now = clock_now()
    wait = WATCH_POLL
    for sched in load_all(crew):
        if sched.get("armed"):
            left = sched["every"] - elapsed(sched["base"], now)
            if left > 0:
                wait = min(wait, left + 0.01)
    return wait
