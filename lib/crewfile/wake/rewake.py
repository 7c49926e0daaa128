"""The primary's wake that needs no keystroke: a waiter the agent CLI starts
at each turn's end (`crew-hook --rewake`), which returns the announcement
when wakes wait; the CLI starts the model's next turn with it. It holds
sessions/NAME/rewake.lock while it waits: a held lock is the channel armed,
and a waiter that dies lets go by dying. When it announces, and when it
ends: docs/commands/crew-hook.md, "The keystroke-free wake".
"""
import os
import select
import signal
import time

from crewfile.core import locks, paths
from crewfile.core.errors import CrewfileError, NotFound
from crewfile.core.kinds import ACCOUNT_STATE, TURN_STATE
from crewfile.core.liveness import descends_from
from crewfile.core.logfile import TailStats
from crewfile.core.notify import DirWatch
from crewfile.session import delivery, prompt, verdict
from crewfile.wake.announce import deciding, mark, waiting_wakes
from crewfile.wake.wakesend import message
from crewfile.wake.words import DEFAULT_SAY

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


def typing(sess, quiet):
    """Seconds until the captain's last key is *quiet* seconds old, or 0 (no key lately)."""
    pane, socket = sess.meta.get("tmux"), sess.meta.get("tmux_socket")
    if not pane or not socket:
        return 0.0
    try:
        key = prompt.last_key(verdict.Look(), pane, socket)
    except CrewfileError:
        return 0.0
    return 0.0 if key is None else max(0.0, key + quiet - time.time())


def unannounced(sess):
    """(the wake notices waiting, those of them nobody announced)."""
    found, told = waiting_wakes(sess)
    return found, [n for n in found if n.id not in told]


def try_announce(sess):
    """The announcement if it may be made now (and it is recorded as made),
    else (None, seconds to look again without a change, or None)."""
    waiting, fresh = unannounced(sess)
    if not fresh:
        return None, None
    ended, later = idle(sess)
    if not ended:
        return None, later
    later = typing(sess, delivery.captain_quiet())
    if later:
        return None, later
    decision = deciding(sess)
    if decision is None:
        return None, 0.5        # wake-send is announcing: what it records decides
    with decision:
        held = delivery.typing_lock(sess)
        if held is None:
            return None, 0.5    # a typed delivery is under way: it ends a turn or fails
        with held:
            waiting, fresh = unannounced(sess)      # afresh, under the locks
            if not fresh or not idle(sess)[0]:
                return None, None
            mark(sess, [n.id for n in waiting])
            # The turn it starts is running from now, not from the CLI's own
            # UserPromptSubmit a moment later: in between, an unarmed channel and
            # an ended turn would let wake-send type into that turn.
            sess.append("turn-started", "rewake")
    return message(waiting, DEFAULT_SAY, sess.name), None


def watch_agent(sess):
    """A pidfd on the agent process (meta's pid if it is our ancestor, else
    our parent), or None if it is gone: a waiter never outlives its agent."""
    pid, _, ours = sess.recorded_agent(ancestor_of=os.getpid())
    if not ours:
        pid = os.getppid()
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


def wait(sess, seconds):
    """Wait as NAME's rewake channel: the announcement (str) to hand the
    model, or None: another waiter is armed, the deadline passed, the agent
    ended. SIGTERM ends it as None too."""
    pidfd = watch_agent(sess)
    if pidfd is None:
        return None
    lock = locks.acquire(os.path.join(sess.dir, paths.REWAKE_LOCK), timeout=0)
    if lock is None:
        os.close(pidfd)
        return None             # one armed waiter is enough
    old = signal.signal(signal.SIGTERM, _stopped)
    deadline = time.monotonic() + min(max(0.0, seconds), MAX_WAIT)
    watch = DirWatch()
    try:
        watch.add(sess.dir)
        while True:
            # Not stopped between recording the announcement and making it:
            # once made, SIGTERM waits for the exit (the CLI may then drop
            # it; the wakes themselves stay in the inbox).
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
            text, later = try_announce(sess)
            if text is not None:
                return text
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            timeout = left if later is None else min(left, later)
            fds = [pidfd] + ([watch.fileno()] if watch.fileno() is not None else [])
            ready, _, _ = select.select(fds, [], [], min(timeout, 1.0)
                                        if watch.fileno() is None else timeout)
            if pidfd in ready:
                return None
            watch.changes(0)
    except (NotFound, Stopped):
        return None             # removed meanwhile; stopped
    finally:
        os.close(pidfd)
        watch.close()
        signal.signal(signal.SIGTERM, old)
        lock.release()
