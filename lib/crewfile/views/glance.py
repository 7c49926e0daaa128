"""The crew at a glance: each session's one word of state, for the views
(crew-status, crew-top), from the verdict and the status log.

A view must not decide liveness itself: verdict.py does, and this module
only names what it found. The word is the first that holds of:

  DAMAGED     its files cannot be used (damaged meta, a link): never a traceback
  LOST        the verdict says not live and the session has not ended
  STARTING    its agent process has not said which conversation it is
              (verdict.not_yet_known): its turn records, a dialog's too, are an
              earlier process's; a BLOCKED or PAUSED since is shown instead
  DIALOG      a permission dialog is up (the verdict's dialog)
  BLOCKED     a `blocked`/`problem`/`error` record the session has not moved on
              from (no kinds.MOVES_ON record since: a new turn, the captain's words, ...)
  PAUSED      a `paused` (awaiting captain) record followed only by KEEPS_PAUSE
              kinds (kinds.py): the rule for a human wait
  WORKING     generating
  IDLE        not generating
  UNKNOWN     no turn record to tell
Ended sessions are left out (ENDED, for a view that lists them).
"""
import os

from crewfile.core import paths
from crewfile.core.errors import CrewfileError, reason
from crewfile.core.kinds import BLOCKERS, KEEPS_PAUSE, MOVES_ON
from crewfile.core.names import is_name
from crewfile.session.reader import SessionReader, is_registered, state_of
from crewfile.session.verdict import not_yet_known, of, relive

DAMAGED, LOST, DIALOG, BLOCKED, PAUSED = "damaged", "lost", "dialog", "blocked", "paused"
WORKING, IDLE, UNKNOWN, ENDED, STARTING = "working", "idle", "unknown", "ended", "starting"
ORDER = (WORKING, IDLE, STARTING, DIALOG, BLOCKED, PAUSED, LOST, UNKNOWN, DAMAGED)


class Row:
    """One session as the views show it (state and sess: None when DAMAGED,
    error then says why); facts: what relook() needs to probe it again."""
    __slots__ = ("name", "word", "state", "error", "sess", "also", "facts")

    def __init__(self, name, word, state=None, error=None, sess=None, also=None, facts=None):
        self.name, self.word, self.state, self.error = name, word, state, error
        self.sess, self.also, self.facts = sess, also, facts


def word_of(st, held, starting=False):
    """The word for *st*, with *held* needs_primary()'s answer from its records
    and *starting* not_yet_known()'s."""
    if st["ended"]:
        return ENDED
    if st["live"] == "no":
        return LOST
    if starting:
        return held or STARTING
    if st["waiting"]:
        return DIALOG
    if held:
        return held
    return {"yes": WORKING, "no": IDLE}.get(st["generating"], UNKNOWN)


def needs_primary(recs_backwards):
    """BLOCKED, PAUSED or None, from a session's records, newest first."""
    pause_holds = True
    for rec in recs_backwards:
        if rec.kind == "paused" and pause_holds:
            return PAUSED
        if rec.kind in BLOCKERS:
            return BLOCKED
        if rec.kind in MOVES_ON:
            return None
        if rec.kind not in KEEPS_PAUSE:
            pause_holds = False
    return None


def rows(crew, look):
    """A Row per session (see entries), sorted by name (ended ones included)."""
    return [row(crew, name, look) if why is None else Row(name, DAMAGED, error=why)
            for name, why in entries(crew)]


def entries(crew):
    """[(NAME, why)] sorted by name: why None for each registered session, else
    why an entry named as one cannot be one (unusable): shown, never left out."""
    try:
        found = paths.list_dir(crew.sub(paths.SESSIONS), kinds=True)
    except FileNotFoundError:
        return []
    return [e for e in (entry(crew, name, is_dir) for name, is_dir in sorted(found))
            if e is not None]


def entry(crew, name, is_dir=None):
    """(NAME, why) as entries() lists sessions/NAME, or None when it is no
    session's (a name no session can have, a plain directory without meta);
    why: sessions/NAME cannot be a session (a link, a FIFO, a regular file, a
    directory that cannot be searched); is_dir: as for is_registered."""
    if not is_name(name):
        return None
    if is_registered(crew, name, is_dir):
        return name, None
    sdir = crew.session_dir(name)
    try:
        paths.check_dirs(sdir, inclusive=True)
        os.lstat(os.path.join(sdir, paths.META))
    except FileNotFoundError:
        return None
    except (OSError, CrewfileError) as e:
        return name, reason(e)
    return None


def row(crew, name, look, now=None, also=None):
    """The Row of session NAME (DAMAGED when its files cannot be used).
    also(sess, recs): more to read while its directory is open, from the same
    read of its log (Row.also)."""
    sess = SessionReader(crew, name)
    try:
        with sess.opened():
            recs = sess.scan()
            last = recs.last()
            v = of(sess, look, recs.stats, recs, account=False)     # no view shows the block
            st = state_of(sess, v, last, recs.stats.warning(), now)
            held = needs_primary(recs)
            starting = not_yet_known(sess, recs) is not None
            return Row(name, word_of(st, held, starting), st, sess=sess,
                       also=also and also(sess, recs), facts=(v, last, st["warning"], held, starting))
    except CrewfileError as e:
        return Row(name, DAMAGED, error=str(e))


def relook(row, look, now=None):
    """*row* (from row()) with its session's liveness probed anew, its
    files not read again: the word follows (a lost agent shows as lost)."""
    v, last, warning, held, starting = row.facts
    v = relive(v, row.sess.meta, look)
    st = state_of(row.sess, v, last, warning, now)
    return Row(row.name, word_of(st, held, starting), st, sess=row.sess, also=row.also,
               facts=(v, last, warning, held, starting))


def wakes_pending(crew, rows_):
    """Wake notices waiting in the inboxes of the primary sessions (not ended),
    the names of those whose inbox could not be read, and whether there are
    more than that (an inbox too big to count whole: inbox.count)."""
    total, bad, more = 0, [], False
    for row in rows_:
        if row.state is None or row.state["ended"] or row.state["kind"] != "primary":
            continue
        from crewfile.wake.inbox import count  # the status line's budget: a crew without a primary never loads it
        try:
            n, beyond = count(crew, row.name, "wake")
        except CrewfileError:
            bad.append(row.name)
            continue
        total, more = total + n, more or beyond
    return total, bad, more
