"""The primary's wake that needs no keystroke: a waiter started by the agent
CLI at each turn's end (Claude Code's `asyncRewake` Stop hook, installed as
`crew-hook --rewake`), which exits 2 with the announcement on stderr when
wakes wait, and the CLI starts the model's next turn with it.

The waiter holds sessions/NAME/rewake.lock (flock) for as long as it waits:
a held lock is the channel armed (armed()), evidence nobody has to believe
from a line, and a waiter that dies lets go by dying. While it is armed,
wake-send types nothing: the waiter announces. When it is not (another CLI,
an older one, the waiter timed out or was killed), wake-send types through
the verdict as before.

What it announces is only that wakes wait and from whom (wakesend.message,
the words the typed path uses): the notices stay in the inbox until the
model's own inbox-drain, or its turn's hooks, take them, which is what marks
them read. Which wakes have been announced, by either path, is kept in
sessions/NAME/announced (their ids, one per line, replaced atomically under
the session lock), so nothing is announced twice.

It announces only when all of this holds, re-checked at each change of
NAME's directory (inotify; polling where there is none):
  - a wake notice waits that nobody announced;
  - the turn has ended (the newest turn record says not generating): during
    a turn the hooks hand the wakes over themselves;
  - the account's block (verdict.account_block) does not stand: a turn it
    started would fail as the last one did;
  - no key was pressed in a window looking at the pane in the last
    CAPTAIN_QUIET seconds (the captain typing); a draft left on the prompt
    line does not hold it: the CLI leaves the draft untouched;
  - no typed delivery into the pane is under way (deliver.lock).
Announcing, it writes `turn-started: rewake`: the turn it starts runs from
then on for every reader (wake-send types nothing into it).
It ends, announcing nothing, at its deadline (below the hook's timeout, so
the CLI never has to kill it), when the agent process ends (a pidfd: a
waiter never outlives its session), or on SIGTERM (the CLI's own stop at
/exit or at the timeout).
"""
import os
import select
import signal
import time

from crewfile.core import locks, paths
from crewfile.core.errors import CrewfileError, NotFound
from crewfile.core.kinds import ACCOUNT_STATE, TURN_STATE
from crewfile.core.liveness import alive, descends_from
from crewfile.core.logfile import TailStats
from crewfile.core.notify import DirWatch
from crewfile.session import delivery, verdict
from crewfile.wake import inbox
from crewfile.wake.announce import announced, mark, path_of
from crewfile.wake.wakesend import DEFAULT_SAY, message

MARGIN = 60.0           # seconds a waiter ends before its hook's timeout
MAX_WAIT = 86400.0


class Stopped(Exception):
    """SIGTERM: the CLI stops its hook (at /exit, at the hook's timeout)."""


def _stopped(_sig, _frame):
    raise Stopped


def idle(sess):
    """(True if the agent's turn has ended and the account's block does not
    stand, seconds until the block lifts by itself or None)."""
    recs = sess.scan(TailStats())
    turn = recs.last_of(TURN_STATE)
    if turn is None or TURN_STATE[turn.kind] != verdict.NO:
        return False, None
    block = recs.last_of(ACCOUNT_STATE)
    if verdict.account_block(block) is not None:
        # what it announced would fail as the turn did (delivery holds alike)
        lifts = verdict.block_lifts(block)
        return False, None if lifts is None else max(0.0, lifts - time.time())
    return True, None


def typing(sess, quiet, look=None):
    """Seconds until the captain's last key is CAPTAIN_QUIET old, or 0 (no key lately)."""
    meta = sess.meta
    pane, socket = meta.get("tmux"), meta.get("tmux_socket")
    if not pane or not socket:
        return 0.0
    try:
        key = (look or verdict.Look()).last_key(pane, socket)
    except CrewfileError:
        return 0.0
    return 0.0 if key is None else max(0.0, key + quiet - time.time())


def unannounced(sess):
    """(the wake notices waiting, those of them nobody announced)."""
    waiting = [n for n in inbox.pending(sess.crew, sess.name) if n.kind == "wake"]
    told = announced(sess)
    return waiting, [n for n in waiting if n.id not in told]


def try_announce(sess, say=DEFAULT_SAY, quiet=None):
    """The announcement if it may be made now (and it is recorded as made),
    else (None, seconds to look again without a change, or None)."""
    quiet = delivery.captain_quiet() if quiet is None else quiet
    waiting, fresh = unannounced(sess)
    if not fresh:
        return None, None
    ended, later = idle(sess)
    if not ended:
        return None, later
    later = typing(sess, quiet)
    if later:
        return None, later
    held = locks.acquire(path_of(sess, paths.DELIVER_LOCK), timeout=0)
    if held is None:
        return None, 0.5        # a typed delivery is under way: it ends a turn or fails
    with held:
        waiting, fresh = unannounced(sess)      # afresh, under the lock
        if not fresh or not idle(sess)[0]:
            return None, None
        mark(sess, [n.id for n in waiting])
        # The turn it starts is running from now, not from the CLI's own
        # UserPromptSubmit a moment later: in between, an unarmed channel and
        # an ended turn would let wake-send type into that turn.
        sess.append("turn-started", "rewake")
    return message(waiting, say, sess.name), None


def agent_pid(sess):
    """The agent process to outlive not: meta's pid if it is this process's
    ancestor, else the parent."""
    meta = sess.meta
    pid, start = meta.get("pid"), meta.get("pid_start")
    if isinstance(pid, int) and alive(pid, start) and descends_from(os.getpid(), pid):
        return pid
    return os.getppid()


def watch_agent(sess):
    """A pidfd on the agent process (agent_pid), or None if it is gone."""
    pid = agent_pid(sess)
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return None
    # A parent that died before the pidfd was opened is no longer the parent:
    # the pidfd would then be another process's.
    if not descends_from(os.getpid(), pid):
        os.close(fd)
        return None
    return fd


def wait(sess, seconds, say=DEFAULT_SAY, quiet=None, warn=None):
    """Wait as NAME's rewake channel: the announcement (str) to hand the
    model, or None: another waiter is armed, the deadline passed, the agent
    ended. SIGTERM ends it as None too."""
    pidfd = watch_agent(sess)
    if pidfd is None:
        return None
    lock = locks.acquire(path_of(sess, paths.REWAKE_LOCK), timeout=0)
    if lock is None:
        os.close(pidfd)
        return None             # one armed waiter is enough
    old = signal.signal(signal.SIGTERM, _stopped)
    deadline = time.monotonic() + min(max(0.0, seconds), MAX_WAIT)
    watch = DirWatch(warn) if warn else DirWatch()
    try:
        watch.add(sess.dir)
        try:
            while True:
                # Not stopped between recording the announcement and making it:
                # once made, SIGTERM waits for the exit (the CLI may then drop
                # it; the wakes themselves stay in the inbox).
                signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
                text, later = try_announce(sess, say, quiet)
                if text is not None:
                    return text
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                timeout = left if later is None else min(left, later)
                fds = [pidfd] + ([watch.fileno()] if watch.fileno() is not None else [])
                try:
                    ready, _, _ = select.select(fds, [], [], min(timeout, 1.0)
                                                if watch.fileno() is None else timeout)
                except InterruptedError:
                    continue
                if pidfd in ready:
                    return None
                watch.changes(0)
        finally:
            os.close(pidfd)
    except (NotFound, Stopped):
        return None             # removed meanwhile; stopped
    finally:
        watch.close()
        signal.signal(signal.SIGTERM, old)
        lock.release()
