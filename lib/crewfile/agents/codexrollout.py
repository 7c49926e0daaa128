"""A Codex turn's end as its rollout (meta `transcript_path`) tells it: the
only word there is of a turn that ends in an error, for Codex 0.171 fires
no hook then (a 429, exhausted quota: tests/CODEX_FINDINGS.md, "The
account's stop"). crew-watch asks at each probe, for a Codex session whose
newest turn record says a turn runs (docs/decisions.md).

The rollout is written by the agent's own process, so its word is believed
no further than the agent's own records are (core/kinds.py): the record
made from it only holds typing and wakes the primary. It is another
program's file: read from its end, SCAN bytes at most; a line not of the
shapes read is skipped.
"""
import os
from collections import namedtuple

from crewfile.agents import codex, stop_record
from crewfile.core import logfile, records
from crewfile.core.errors import SystemFailure
from crewfile.core.kinds import TURN_STATE
from crewfile.core.locks import LockBusy, hold

AGENT = codex.NAME
SCAN = 1 << 20          # bytes of a rollout read back, at most
MAX_MESSAGE = 500       # characters of the error's message kept in the record
LOCK_WAIT = 1.0         # seconds; still held: the next probe asks again
# The event_msg types that begin or end a turn; only lines naming one are parsed.
BEGINS = ("task_started", "turn_aborted")
ENDS = "task_complete"
_MARKS = tuple(f'"{t}"'.encode() for t in BEGINS + (ENDS,))


# A turn that ended in an error: the rollout's time for it (a record
# timestamp), the error's name (its codex_error_info) and message.
TurnError = namedtuple("TurnError", "ts error message")


def turn_error(path, since):
    """The error that ended the rollout's newest turn, if it ended at or after
    *since* (a record timestamp: the start of the turn crewfile saw), else None.
    SystemFailure if the rollout is missing, not the user's or unreadable
    (the path opener)."""
    for ts, payload in _marks(path):
        if payload["type"] != ENDS or ts < since:
            return None         # the newest turn runs, was cut off, or is an older one
        return _error_of(payload, ts)
    return None


def turn_open(path):
    """Is the rollout's newest turn still open: its newest entry that begins
    or ends a turn a task_started (True), not a task_complete or turn_aborted
    (False)? None if none lies within SCAN bytes of its end. Codex closes a
    turn only after its Stop hooks have run, and a subagent's report that
    comes back meanwhile goes on in the same turn, no prompt hook fired
    (tests/CODEX_FINDINGS.md, "Subagents"). SystemFailure as turn_error."""
    for _, payload in _marks(path):
        return payload["type"] == BEGINS[0]
    return None


def _marks(path):
    """(timestamp, payload) of the rollout's entries that begin or end a
    turn, newest first, within SCAN bytes of its end; SystemFailure if it is
    missing (said here: the tail reader reads a missing file as empty)."""
    try:
        os.stat(path)
    except OSError as e:
        raise SystemFailure(f"{path}: {e.strerror}") from None
    for entry in logfile.objects_backwards(path, SCAN, _MARKS):
        ts, payload = entry.get("timestamp"), entry.get("payload")
        if (entry.get("type") == "event_msg" and isinstance(ts, str)
                and records.is_timestamp(ts) and isinstance(payload, dict)
                and payload.get("type") in BEGINS + (ENDS,)):
            yield ts, payload


def _error_of(task_complete, ts):
    """The TurnError of a task_complete payload, or None for a turn that ended
    well (its Stop hook said so)."""
    error = task_complete.get("error")
    if not isinstance(error, dict):
        return None
    info = error.get("codex_error_info")        # "name", or {"name": {details}}
    if isinstance(info, dict) and len(info) == 1:
        info = next(iter(info))
    message = error.get("message")
    message = " ".join(message.split())[:MAX_MESSAGE] if isinstance(message, str) else ""
    return TurnError(ts, info, message)


def record_turn_error(sess, env):
    """Append the record of a turn only its rollout says ended in an error
    (agents.stop_record: `account-blocked` or `turn-failed`), once: only while
    the session's newest turn record still says that turn runs, checked again
    under the session lock, so neither a second reader nor a restarted one
    writes it twice. Returns the line written, or None. SystemFailure: the
    rollout cannot be read (for the caller to say)."""
    stats = logfile.TailStats()
    turn = sess.last_of(TURN_STATE, stats)
    if turn is None or TURN_STATE[turn.kind] != "yes":
        return None
    path = sess.meta.get("transcript_path")
    if not isinstance(path, str) or not path:
        raise SystemFailure("its rollout is not recorded (meta transcript_path)")
    end = turn_error(path, turn.ts)
    if end is None:
        return None
    kind, text = stop_record(codex, end.error, end.message, env, records.parse_timestamp(end.ts))
    try:
        held = hold(sess.lock_path, LOCK_WAIT)
    except LockBusy:
        return None
    with held:
        if sess.last_of(TURN_STATE, stats) != turn:
            return None         # the turn moved on meanwhile: a hook, or another reader
        return sess.append_held(kind, text)
