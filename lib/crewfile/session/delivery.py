"""Typing text into a session's pane, safely: the one way crewfile speaks to an agent.

The checks, their order and codes, and what counts as delivered are the
contract: protocol.md, Delivery (how unread keys are told: docs/internals.md).
deliver() returns (delivered, verdict.Answer): DELIVERED or a code below.
"""
import fcntl
import os
import re
import struct
import termios
import time

from crewfile.agents import codexrollout
from crewfile.core import paths
from crewfile.core.errors import BadInput, CrewfileError, SystemFailure, reason
from crewfile.core.kinds import TURN_STATE
from crewfile.core.locks import acquire
from crewfile.core.text import seconds_within
from crewfile.session import tmux, verdict
from crewfile.session.prompt import (DRAFT, NO_PROMPT, capture, captain_at, markers_of,
                                     placeholder_of, shows_typed, still_holds)
from crewfile.session.verdict import Answer

DELIVERED = "delivered"
ASIDE = "aside"                   # the captain's own conversation: nobody else types there
NOT_LIVE = "not-live"             # the verdict: not live (the detail says why)
LIVE_UNKNOWN = "live-unknown"     # the verdict: liveness unknown (the detail says why)
STOPPED = "stopped"               # the agent process is stopped (SIGSTOP, Ctrl-Z)
NOT_FOREGROUND = "not-foreground"  # something else holds the pane's terminal
GENERATING = "generating"
STATE_UNKNOWN = "state-unknown"   # no turn record to go by
DIALOG = "permission-dialog"
ACCOUNT_BLOCKED = verdict.ACCOUNT_BLOCKED   # the account stopped its turn; the block stands
STARTING = verdict.STARTING       # its start hook has not said which conversation it is
BACKGROUND = "background-tasks"   # its turn ended with background tasks still running
IN_PROGRESS = "delivery-busy"     # another delivery holds deliver.lock
FAILED = "failed"                 # tmux failed, or the typed text never showed
DISCARDED = "discarded"           # the agent read the typed keys, its prompt line stayed empty
ABORTED = "aborted"               # re-check before Enter failed; text left unsent
NOT_SUBMITTED = "not-submitted"   # Enter pressed twice, the text stayed on the prompt line
UNCONFIRMED = "unconfirmed"       # Enter pressed, the prompt line cleared, no record of the turn
# CAPTAIN, DRAFT, NO_PROMPT: prompt.captain_at's codes
TRANSIENT = frozenset({DRAFT, NO_PROMPT, IN_PROGRESS, NOT_SUBMITTED})

CAPTAIN_QUIET = 5.0               # seconds; $CREWFILE_CAPTAIN_QUIET overrides
APPEAR_SECONDS = 2.0
UNREAD_SECONDS = 15.0             # how long typed keys may wait unread for a starved agent
TAKEN_SECONDS = 2.0               # after Enter: how long the text may stay on the prompt line
RECORD_SECONDS = 15.0             # after Enter: how long a recording agent's hook may take
START_SECONDS = 60.0              # after the first Enter of an agent process that starts
#                                   with it (enters_once, verdict.still_starting): its start, then
#                                   its SessionStart hook
CLOSE_SECONDS = 1.0               # how long a turn its hooks ended may stay open in a rollout
CLOSE_LOOK = 0.02                 # seconds between looks at it meanwhile
MAX_TEXT = 4096
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def check_text(text):
    """Text that can be typed as one line: non-empty, no control characters."""
    if not isinstance(text, str) or not text.strip():
        raise BadInput("empty message")
    if _CONTROL.search(text):
        raise BadInput("message contains a control character or newline"
                       " (it would be typed as a key)")
    if len(text) > MAX_TEXT:
        raise BadInput(f"message longer than {MAX_TEXT} characters")
    return text


def captain_quiet():
    # at most a day: inf would refuse every delivery for ever
    return seconds_within(os.environ.get("CREWFILE_CAPTAIN_QUIET"), CAPTAIN_QUIET, 86400.0)


def check(sess, look=None, now=None, quiet=None, typed=None, screen=True, known=None):
    """(None, Verdict) when it is safe to type (or, with *typed*, to press
    Enter), else (Answer, Verdict). screen=False: the verdict alone. known: a
    Verdict of this same look (a tick's); deliver never passes one."""
    look = look or verdict.Look()
    now = time.time() if now is None else now
    quiet = captain_quiet() if quiet is None else quiet
    # Afresh unless known: a hook may have recorded the agent meanwhile.
    meta = sess.meta if known is not None else sess.reread().meta
    if meta.get("kind") == "aside":
        return Answer(ASIDE, "an aside is the captain's conversation: typed text would be"
                             " recorded as the captain's words"), None
    if not meta.get("tmux"):
        return Answer(NOT_LIVE, "no tmux pane is registered for the session"), None
    v = known if known is not None else verdict.of(sess, look)
    if v.live != verdict.LIVE:
        return Answer(NOT_LIVE if v.live == verdict.NOT_LIVE else LIVE_UNKNOWN, str(v.why)), v
    if v.stopped != verdict.NO:
        return Answer(STOPPED, "the agent process is stopped (SIGSTOP or Ctrl-Z)"
                      if v.stopped == verdict.YES else "cannot tell if the agent is stopped"), v
    if v.foreground != verdict.YES:
        return Answer(NOT_FOREGROUND, "another process holds the pane's terminal"
                      if v.foreground == verdict.NO else "cannot tell what holds the pane"), v
    starting = verdict.not_yet_known(sess)
    if starting is not None:       # the turn records below are an earlier process's
        held = _screen_holds(v, meta, quiet, look, now) if screen and typed is None else None
        return held or starting, v      # what its screen shows says more (a dialog's option)
    if v.dialog == verdict.YES:
        return Answer(DIALOG, "a permission dialog is up"), v
    if v.account is not None:
        return v.account, v
    if v.background == verdict.YES:
        return Answer(BACKGROUND, "its turn ended with background tasks running; it goes on"
                                  " by itself when they end"), v
    if v.generating == verdict.YES:
        return Answer(GENERATING, "a turn is running"), v
    if v.generating != verdict.NO:
        return Answer(STATE_UNKNOWN, "no turn record says whether it is generating"), v
    goes_on = _turn_goes_on(meta)
    if goes_on is not None or not screen:
        return goes_on, v
    return _screen_holds(v, meta, quiet, look, now, typed), v


def _turn_goes_on(meta):
    """Why a turn its hooks said ended goes on, or None. Codex takes a
    subagent's report that comes back while its Stop hooks run into the same
    turn, its model asked again with no prompt hook; its rollout closes a turn
    only after those hooks (agents.codexrollout.turn_open). A turn still open
    there is waited for, CLOSE_SECONDS at most: the usual end is closed a few
    milliseconds after the hook's record."""
    path = meta.get("transcript_path")
    if meta.get("agent") != codexrollout.AGENT or not isinstance(path, str) or not path:
        return None
    deadline = time.monotonic() + CLOSE_SECONDS
    while True:
        try:
            running = codexrollout.turn_open(path)
        except (OSError, CrewfileError) as e:
            return Answer(STATE_UNKNOWN, f"its rollout cannot be read: {reason(e)}")
        if not running:         # closed, or no turn there yet (its first prompt's hook names it)
            return None
        if time.monotonic() >= deadline:
            return Answer(GENERATING, "its rollout says the turn its hooks said ended goes on (a"
                                      " subagent's report came back as it ended)")
        time.sleep(CLOSE_LOOK)


def _screen_holds(v, meta, quiet, look, now, typed=None):
    """Why the pane's screen or a person's keys hold typing (prompt.captain_at), or None."""
    who, why = captain_at(v.pane, v.socket, within=quiet, meta=meta, look=look, now=now,
                          typed=typed)
    return why if who != verdict.NO else None


def typing_lock(sess):
    """The session's deliver.lock, one try: a Lock, or None while another
    delivery types into its pane (or a respawn or retirement acts on it)."""
    return acquire(os.path.join(sess.dir, paths.DELIVER_LOCK), timeout=0)


def deliver(sess, text, look=None, now=None, quiet=None):
    """Type *text* into the session's pane and press Enter, if safe: (delivered, Answer)."""
    check_text(text)
    lock = typing_lock(sess)
    if lock is None:
        return False, Answer(IN_PROGRESS, f"another delivery to {sess.name} is in progress")
    with lock:
        why, v = check(sess, look, now, quiet)
        if why:
            return False, why
        pane, socket = v.pane, v.socket
        try:
            tmux.type_literally(pane, text, socket=socket)
        except SystemFailure as e:
            return False, Answer(FAILED, str(e))
        # The screen's word on the typed text; SystemFailure when tmux cannot be asked.
        markers, placeholder = markers_of(sess.meta), placeholder_of(sess.meta)
        shows = lambda: shows_typed(capture(pane, socket, placeholder), text, markers)  # noqa: E731
        holds = lambda: still_holds(capture(pane, socket, placeholder), text, markers)  # noqa: E731
        if not _wait_screen(shows, APPEAR_SECONDS):
            shown, unread = _wait_read(sess.meta.get("pid"), shows)
            if not shown:
                # read, and the prompt line empty (verdict's rule: no draft on it)
                if unread == 0 and captain_at(pane, socket, meta=sess.meta)[0] == verdict.NO:
                    return False, Answer(DISCARDED, "the agent read the typed keys and its prompt"
                                                    " line stayed empty: it discarded them; Enter"
                                                    " not pressed, nothing is left there")
                return False, Answer(FAILED, "the typed text did not show on the prompt line;"
                                             " Enter not pressed, the text is left there unsent")
        recorded = records_prompts(sess)
        once = enters_once(sess)
        starting = once and verdict.still_starting(sess)
        mark = PROMPT_MARK if recorded else TURN_STATE
        before = _turn_mark(sess, mark)
        kinds = FIRST_SIGNS if starting else TAKEN_SIGNS
        signs = _turn_mark(sess, kinds)
        for attempt in (1, 2):
            if attempt == 2 and (_turn_mark(sess, mark) != before
                                 or _turn_mark(sess, kinds) != signs):
                return True, Answer(DELIVERED)      # the first Enter's, recorded late
            why, _ = check(sess, verdict.Look(), None, quiet, typed=text)
            if why:
                return False, Answer(ABORTED, f"{why.code} just before Enter ({why.detail});"
                                              " Enter not pressed, the text is left on the"
                                              " prompt line unsent")
            try:
                tmux.press_enter(pane, socket=socket)
            except SystemFailure as e:
                return False, Answer(FAILED, f"{e}; the text is left on the prompt line unsent")
            if once:
                return _wait_once(sess, recorded, starting, kinds, signs, holds)
            if recorded:
                taken = _wait_record(sess, before, holds)
            else:       # the screen's word: the text left the prompt line, or a turn record came
                taken = _wait_screen(lambda: not holds() or _turn_mark(sess, mark) != before,
                                     TAKEN_SECONDS)
            if taken:
                return True, Answer(DELIVERED)
            if taken is None:
                return False, _cleared_unconfirmed()
        return False, Answer(NOT_SUBMITTED, "Enter pressed twice, the text stayed on the"
                                            " prompt line; it is left there unsent")


def _wait_read(pid, shows):
    """(shown, unread bytes or None) once the text did not show in
    APPEAR_SECONDS: keys unread mean a starved agent, not dropped keys."""
    unread = _keys_unread(pid)
    late = time.monotonic() + UNREAD_SECONDS
    while unread and time.monotonic() < late:
        if _wait_screen(shows, 0.2):
            return True, _keys_unread(pid)
        unread = _keys_unread(pid)
    if unread == 0 and _wait_screen(shows, APPEAR_SECONDS):
        return True, 0
    return False, unread


def _keys_unread(pid):
    """Typed bytes unread on the agent's stdin, or None when that cannot be
    told (docs/internals.md, Delivery)."""
    try:
        fd = os.open(f"/proc/{int(pid)}/fd/0",
                     os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (OSError, TypeError, ValueError):
        return None
    try:
        if termios.tcgetattr(fd)[3] & termios.ICANON:
            return None
        return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, bytes(4)))[0]
    except (OSError, termios.error):
        return None
    finally:
        os.close(fd)


def records_prompts(sess):
    """Does the session's agent record each prompt it takes? Then its record,
    not the screen, is the evidence (protocol.md, Delivery)."""
    agent = verdict.adapter(sess)
    if agent is None or "UserPromptSubmit" not in agent.EVENTS.values():
        return False
    return sess.newest_this_life(lambda rec: rec.kind in ("started", "turn-started")) is not None


PROMPT_MARK = {"turn-started": "yes"}
# Records a prompt hook writes as it takes a prompt: once one follows Enter,
# Enter is never pressed again. `started` too while the process of an agent
# whose SessionStart comes with its first prompt (enters_once) is starting
# (verdict.still_starting).
TAKEN_SIGNS = frozenset({"captain", "turn-started"})
FIRST_SIGNS = TAKEN_SIGNS | {"started"}


def enters_once(sess):
    """Is Enter pressed only once for the session's agent (its adapter's
    START_WITH_FIRST_PROMPT)? It shows the typed text until its hooks have
    run, and takes an Enter pressed meanwhile as the same prompt again: the
    text still shown is no sign the first Enter was dropped."""
    return getattr(verdict.adapter(sess), "START_WITH_FIRST_PROMPT", False)


def _wait_once(sess, recorded, starting, kinds, before, holds):
    """After the one Enter of an agent that enters_once: (delivered, Answer).
    Delivered on a new record of *kinds* (*before*: the newest before Enter)
    within RECORD_SECONDS, START_SECONDS while its process is *starting*
    (verdict.still_starting), or, for a session that records no prompts yet, on the
    screen's word (the text left the prompt line: an agent without
    crew-hook); else unconfirmed, never Entered again."""
    start = time.monotonic()
    bound = START_SECONDS if starting else RECORD_SECONDS     # Codex says "Waiting for
    #                startup" (a respawned one: "Running hook") that long loaded (> 15 s)
    while True:
        if _turn_mark(sess, kinds) != before:
            return True, Answer(DELIVERED)
        try:
            shown = holds()
        except SystemFailure:
            shown = True            # unknown: not the screen's word that it was taken
        if not shown and not recorded:
            return True, Answer(DELIVERED)
        if time.monotonic() - start > bound:
            break
        time.sleep(0.05)
    if not shown:
        return False, _cleared_unconfirmed(bound)
    return False, Answer(UNCONFIRMED, (
        f"Enter pressed; the text still shows on the prompt line and no record came within"
        f" {bound:g}s: its agent shows the text until its hooks have run (its"
        f" SessionStart with its first prompt), so whether it was taken cannot be told"
        f" (a `started` or `turn-started` record after this says so); not pressed again"))


def _cleared_unconfirmed(seconds=RECORD_SECONDS):
    return Answer(UNCONFIRMED, (
        f"Enter pressed; the prompt line no longer shows the text, but no"
        f" turn-started record came within {seconds:g}s: it may not have"
        f" been taken, or be taken late (a turn-started record after this"
        f" says so); not typed again"))


def _wait_record(sess, before, holds):
    """After Enter, for an agent that records its prompts: True (a new
    `turn-started`), False (Enter swallowed: press it again) or None (unknown)."""
    start = time.monotonic()
    while True:
        if _turn_mark(sess, PROMPT_MARK) != before:
            return True
        waited = time.monotonic() - start
        try:
            shown = holds()
        except SystemFailure:
            shown = False
        if shown and waited > TAKEN_SECONDS:
            return False
        if waited > RECORD_SECONDS:
            return None
        time.sleep(0.05)


def _turn_mark(sess, kinds):
    """The newest record of *kinds* as a line: a new one after Enter means
    the text was taken."""
    rec = sess.last_of(kinds)
    return rec.line() if rec is not None else None


def _wait_screen(test, seconds):
    """Wait (up to *seconds*) until *test*, a look at the screen, is true; True if it was."""
    deadline = time.monotonic() + seconds
    while True:      # the pane shows keys a moment after they are sent
        try:
            if test():
                return True
        except SystemFailure:
            pass
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
