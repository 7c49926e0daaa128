"""Which of a session's wake notices have been announced, by either path
(wake-send typing, or the waiter of crewfile.wake.rewake), and whether that
waiter is armed: sessions/NAME/announced, rewake.lock and announce.lock
(docs/files/inbox.md, docs/files/locks.md).
"""
import os

from crewfile.core import locks, paths
from crewfile.core.atomic import replace
from crewfile.core.errors import BadFile
from crewfile.wake import inbox

MAX_ANNOUNCED = 1 << 22
LOCK_WAIT = 1.0     # seconds wake-send and the waiter wait for NAME's lock, as the hook's


def armed(sess):
    """True if a waiter holds NAME's channel (a live process holds the lock)."""
    return locks.is_held(os.path.join(sess.dir, paths.REWAKE_LOCK))


def deciding(sess):
    """NAME's announce.lock, one try: a Lock, or None while the other path
    holds it. Each path holds it from its decision to announce to its record
    in `announced`, so each decides on what the other recorded (a typed
    announcement lets go of deliver.lock before it can record)."""
    return locks.acquire(os.path.join(sess.dir, paths.ANNOUNCE_LOCK), timeout=0)


def waiting_wakes(sess):
    """(the wake notices waiting in *sess*'s inbox, the ids announced of them
    by either path): what rewake and wake-send both ask before announcing."""
    return [n for n in inbox.pending(sess.crew, sess.name) if n.kind == "wake"], announced(sess)


def announced(sess):
    """The ids of NAME's wake notices announced so far (by either path)."""
    try:
        text = paths.read_text(os.path.join(sess.dir, paths.ANNOUNCED), limit=MAX_ANNOUNCED)
    except BadFile:
        return set()            # not ours (mark() writes it back in shape): announced again
    return set((text or "").split())


def mark(sess, ids, timeout=LOCK_WAIT):
    """Add *ids* to NAME's announced wakes, keeping only those still pending
    (the file stays as small as the inbox). LockBusy when NAME's lock stays
    held past *timeout* seconds (a stuck lock must not stop the announcer)."""
    with locks.hold(sess.lock_path, timeout):
        pending = {n.id for n in inbox.pending(sess.crew, sess.name) if n.kind == "wake"}
        keep = (announced(sess) | set(ids)) & pending
        replace(os.path.join(sess.dir, paths.ANNOUNCED), "".join(f"{i}\n" for i in sorted(keep)))
