"""Nudge schedules: the files nudges/ID, one per (user, session): docs/files/nudges.md.

A tick's change applies only if the schedule is still the one it read (its
`rev`), so a schedule removed or replaced meanwhile wins.
"""
import json
import os

from crewfile.core import paths, records
from crewfile.core.atomic import replace
from crewfile.core.clocks import clock_now, elapsed
from crewfile.core.durations import MAX_SECONDS
from crewfile.core.errors import BadFile, BadInput, CrewfileError, NotFound, Refused
from crewfile.core.locks import acquire
from crewfile.core.names import check_name
from crewfile.core.shapes import load
from crewfile.session import delivery, sessions

DEFAULT_MAX = 100


def _lock(crew):
    return acquire(os.path.join(crew.ensure_sub(paths.LOCKS), paths.NUDGES_LOCK))


def _path(crew, sid):
    return os.path.join(crew.sub(paths.NUDGES), check_name(sid, "schedule id"))


def _read(path, at=None):
    """The schedule in *path* (at: a descriptor on nudges/), None if absent."""
    obj = load(path, "schedule", at)
    if obj is not None and obj["id"] != os.path.basename(path):
        raise BadFile(path, f"id '{obj['id']}' is not the file's name")
    return obj


def store(crew, sched):
    replace(_path(crew, sched["id"]), json.dumps(sched, sort_keys=True) + "\n")


def load_all(crew, bad=None):
    """Every schedule, sorted by id; one that is not (damaged, a link) is
    skipped, and (its name, the error) appended to *bad*."""
    base = crew.sub(paths.NUDGES)
    try:
        at = paths.open_dir(base)        # nudges/ checked once, each file opened in it
    except FileNotFoundError:
        return []
    out = []
    try:
        for name in os.listdir(at):
            if name.startswith("."):
                continue
            try:
                obj = _read(base + "/" + name, at)
            except CrewfileError as e:
                if bad is not None:
                    bad.append((name, e))
                continue
            if obj:
                out.append(obj)
    finally:
        os.close(at)
    out.sort(key=lambda s: s["id"])
    return out


def get(crew, sid):
    obj = _read(_path(crew, sid))
    if not obj:
        raise NotFound(f"no schedule '{sid}'")
    return obj


def target_ids(meta):
    return {"session": meta.get("name"), "session_key": meta.get("session_key"),
            "agent_session_id": meta.get("agent_session_id")}


def matches(sched, meta):
    """Does *sched* belong to the session whose metadata is *meta*? By its
    ids when it has any (one both carry differing: another conversation),
    by name only when it has none."""
    both = [key for key in ("session_key", "agent_session_id") if sched.get(key) and meta.get(key)]
    if sched.get("session_key") or sched.get("agent_session_id"):
        return bool(both) and all(sched[key] == meta[key] for key in both)
    return bool(sched.get("session")) and sched.get("session") == meta.get("name")


def due_in(sched, now):
    """Seconds until *sched* is next due at *now* (clock_now()): 0 or less,
    due. The one answer, for the tick and every view."""
    return sched["every"] - max(elapsed(sched["base"], now), 0)


def add(crew, every, message, session=None, session_key=None, agent_session_id=None,
        max_attempts=None, user=None, replace_existing=False, now=None, until=None):
    """Create (or with replace_existing, re-create) the schedule for (user,
    session): docs/commands/nudge-add.md. until: seconds since the epoch."""
    if sum(bool(x) for x in (session, session_key, agent_session_id)) != 1:
        raise BadInput("name the session with exactly one of --session, --session-key,"
                       " --agent-session-id")
    every = _positive(every, "--every")
    if max_attempts is not None:
        max_attempts = _positive(max_attempts, "--max")
    delivery.check_text(message)
    user = user or sessions.current_user()
    if session:
        sess = sessions.Session(crew, session)
    else:
        sess = sessions.find(crew, agent_session_id=agent_session_id, session_key=session_key)
        if sess is None:
            raise NotFound(f"no session with {'agent session id' if agent_session_id else 'session key'}"
                           f" '{agent_session_id or session_key}'")
    meta = sess.meta
    if meta.get("kind") == "aside":
        raise Refused(f"{meta.get('name')} is an aside: only the captain speaks into it")
    now = now or clock_now()
    if until is not None and until <= now["wall"]:
        raise BadInput(f"bad --until {records.timestamp(until)}: already past")
    crew.ensure_sub(paths.NUDGES)
    with _lock(crew):
        existing = [s for s in load_all(crew) if s.get("user") == user and matches(s, meta)]
        if existing and not replace_existing:
            raise Refused(f"{user} already has schedule {existing[0]['id']} for session"
                          f" {meta.get('name')} (nudge-add --replace replaces it)")
        kept = existing[0] if existing else {"id": "n" + os.urandom(5).hex(), "max": DEFAULT_MAX}
        for extra in existing[1:]:
            os.unlink(_path(crew, extra["id"]))
        sched = {"id": kept["id"], "user": user, **target_ids(meta), "every": every,
                 "message": message, "max": kept["max"] if max_attempts is None else max_attempts,
                 "attempts": 0, "armed": True,
                 "created": records.timestamp(now["wall"]), "rev": os.urandom(6).hex(),
                 "base": now, "until": kept.get("until") if until is None else until,
                 "last_attempt": None, "last_outcome": None, "last_code": None,
                 "last_reason": None, "last_change": None}
        store(crew, sched)
    return sched


def _positive(value, what):
    """A library caller's int (the command line parses through durations)."""
    if type(value) is not int or not 1 <= value <= MAX_SECONDS:
        raise BadInput(f"bad {what} '{value}': a whole number from 1 to {MAX_SECONDS}")
    return value


def remove(crew, sid):
    with _lock(crew):
        path = _path(crew, sid)
        if not os.path.lexists(path):
            raise NotFound(f"no schedule '{sid}'")
        os.unlink(path)


def update_stored(crew, sched, changes):
    """Apply *changes* to the stored schedule if it is still the one we read."""
    with _lock(crew):
        try:
            cur = _read(_path(crew, sched["id"]))
        except CrewfileError:
            return None          # damaged meanwhile: the next tick names it
        if not cur or cur.get("rev") != sched.get("rev"):
            return None          # removed or replaced meanwhile: theirs wins
        cur.update(changes)
        store(crew, cur)
        sched.clear()
        sched.update(cur)
        return cur


def rearm(crew, meta):
    """Arm again the schedules of *meta*'s session that a tick disarmed as
    not live (delivery.NOT_LIVE), once crew-respawn has brought that same
    conversation back; return their ids. Spent or otherwise disarmed stay so."""
    return _update_matching(crew, meta, lambda s: (
        not s.get("armed") and s["attempts"] < s["max"] and s.get("last_outcome") == "disarmed"
        and s.get("last_code") == "not-live"), {
        "armed": True, "last_outcome": "rearmed", "last_code": "respawned",
        "last_reason": "armed again: crew-respawn resumed its conversation"})


def disarm_ended(crew, meta, code, reason):
    """Disarm the armed schedules of *meta*'s session, just ended on purpose
    (crew-retire), now rather than at their next due tick; return their ids."""
    return _update_matching(crew, meta, lambda s: s.get("armed"), {
        "armed": False, "last_outcome": "disarmed", "last_code": code, "last_reason": reason})


def _update_matching(crew, meta, wanted, changes):
    done = []
    for sched in load_all(crew):
        if (wanted(sched) and matches(sched, meta) and update_stored(
                crew, sched, dict(changes, last_change=records.timestamp())) is not None):
            done.append(sched["id"])
    return done
