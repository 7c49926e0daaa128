"""Typing text into a session's pane, safely: the one way crewfile speaks to an agent.

deliver(sess, text) types *text* into the session's registered tmux pane
(on the server recorded with it) and presses Enter, and only when all of
this holds, checked once before typing and again, afresh, just before Enter:

  live        verdict.of(sess).live is LIVE: the recorded agent process is
              alive, in the pane's process tree, the pane on its own server,
              no `ended`/`closed` record (NOT_LIVE and UNKNOWN both refuse)
  running     the agent is not stopped (SIGSTOP, Ctrl-Z) and its process
              group holds the pane's terminal (after Ctrl-Z the shell does:
              typed text would be a shell command)
  idle        generating is NO (YES and UNKNOWN are busy)
  no dialog   no permission dialog is up (typed text would answer it)
  captain     verdict.captain_at: no attached client looking at the pane
              pressed a key in the last CAPTAIN_QUIET seconds, and the
              prompt line (prompt.py) holds no draft: a half-written captain
              message is never completed by our Enter

Limits of the captain check, by design on the safe side: client_activity has
one-second resolution and covers any key of that client (a key in another
pane of the same window does not count; a key sent just before the client
switched to another window does not count either; the draft check catches
what it left on the prompt line). A captain typing through a client of
another tmux server, or over `send-keys`, is seen only through the draft.
A prompt-line placeholder (dim suggestion text some agents show when empty)
reads as a draft: the delivery is refused, never forced.

After typing, deliver waits (up to APPEAR_SECONDS) until the prompt line
shows exactly the typed text, then re-checks. If the text never shows or the
re-check fails, Enter is NOT pressed and the typed text is left on the prompt
line as a visible, unsent draft (erasing it could erase keys the captain
typed meanwhile; the captain sees it and decides). The result says so, and
the draft makes later deliveries refuse ("draft") until someone clears it.

Delivered means taken: after Enter, deliver waits (up to TAKEN_SECONDS) for
the prompt line to stop showing the text. Agent CLIs drop an Enter that
follows fast input now and then; if the text is still there, the verdict is
asked again and Enter pressed once more; if it still stays, the outcome is
NOT_SUBMITTED (the draft left visible), never DELIVERED.

An aside is never typed into (code `aside`): whatever reaches its prompt is
recorded as the captain's input, and only the captain's acts may steer or
conclude it.

Two deliverers never interleave keys: deliver holds sessions/NAME/deliver.lock
(try once; busy is a refusal). It never starts, resumes or creates anything:
no live pane, no delivery.

Returns (delivered, verdict.Answer): the code is DELIVERED or one of the
codes below, the detail is for people.
"""
import os
import re
import time

from . import paths, tmux, verdict
from .errors import BadInput, SystemFailure
from .verdict import Answer, CAPTAIN, DRAFT, NO_PROMPT

DELIVERED = "delivered"
ASIDE = "aside"                   # the captain's own conversation: nobody else types there
NOT_LIVE = "not-live"             # the verdict: not live (the detail says why)
LIVE_UNKNOWN = "live-unknown"     # the verdict: liveness unknown (the detail says why)
STOPPED = "stopped"               # the agent process is stopped (SIGSTOP, Ctrl-Z)
NOT_FOREGROUND = "not-foreground"  # something else holds the pane's terminal
GENERATING = "generating"
STATE_UNKNOWN = "state-unknown"   # no turn record to go by
DIALOG = "permission-dialog"
IN_PROGRESS = "delivery-busy"     # another delivery holds deliver.lock
FAILED = "failed"                 # tmux failed, or the typed text never showed
ABORTED = "aborted"               # re-check before Enter failed; text left unsent
NOT_SUBMITTED = "not-submitted"   # Enter pressed twice, the text stayed on the prompt line
# CAPTAIN, DRAFT, NO_PROMPT: verdict.captain_at's codes
TRANSIENT = frozenset({DRAFT, NO_PROMPT, IN_PROGRESS, NOT_SUBMITTED})

CAPTAIN_QUIET = 5.0               # seconds; $CREWFILE_CAPTAIN_QUIET overrides
APPEAR_SECONDS = 2.0
TAKEN_SECONDS = 2.0               # after Enter: how long the text may stay on the prompt line
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


def captain_quiet(env=None):
    env = os.environ if env is None else env
    try:
        value = float(env.get("CREWFILE_CAPTAIN_QUIET") or CAPTAIN_QUIET)
    except ValueError:
        return CAPTAIN_QUIET
    # nan would compare false everywhere and switch the captain check off;
    # inf would refuse every delivery for ever: neither is a setting.
    return min(max(0.0, value), 86400.0) if value == value else CAPTAIN_QUIET


def check(sess, look=None, now=None, quiet=None, typed=None, screen=True, known=None):
    """(None, Verdict) when it is safe to type (or, with *typed*, to press Enter), else (Answer, Verdict).

    screen=False stops after the cheap part (the verdict): no client query, no capture.
    known: a Verdict of *sess* taken in this same look (a tick's), used instead
    of asking again; deliver never passes one (its checks are afresh).
    """
    from .prompt import capture, markers_of, placeholder_of, prompt_tail, shows_typed
    look = look or verdict.Look()
    now = time.time() if now is None else now
    quiet = captain_quiet() if quiet is None else quiet
    meta = sess.meta if known is not None else sess.reread().meta   # afresh: a hook may
    #                                                   have recorded the agent meanwhile
    v = None
    if meta.get("kind") == "aside":
        return Answer(ASIDE, "an aside is the captain's conversation: typed text would be"
                             " recorded as the captain's words"), v
    if not meta.get("tmux"):
        return Answer(NOT_LIVE, "no tmux pane is registered for the session"), v
    v = known if known is not None else verdict.of(sess, look)
    if v.live == verdict.NOT_LIVE:
        return Answer(NOT_LIVE, str(v.why)), v
    if v.live != verdict.LIVE:
        return Answer(LIVE_UNKNOWN, str(v.why)), v
    if v.stopped != verdict.NO:
        return Answer(STOPPED, "the agent process is stopped (SIGSTOP or Ctrl-Z)"
                      if v.stopped == verdict.YES else "cannot tell if the agent is stopped"), v
    if v.foreground != verdict.YES:
        return Answer(NOT_FOREGROUND, "another process holds the pane's terminal"
                      if v.foreground == verdict.NO else "cannot tell what holds the pane"), v
    if v.dialog == verdict.YES:
        return Answer(DIALOG, "a permission dialog is up"), v
    if v.generating == verdict.YES:
        return Answer(GENERATING, "a turn is running"), v
    if v.generating != verdict.NO:
        return Answer(STATE_UNKNOWN, "no turn record says whether it is generating"), v
    if not screen:
        return None, v
    markers, placeholder = markers_of(meta), placeholder_of(meta)
    if typed is None:
        who, why = verdict.captain_at(v.pane, v.socket, within=quiet, markers=markers,
                                      placeholder=placeholder,
                                      look=look, now=now)
        if who != verdict.NO:
            return why, v
        return None, v
    key = look.last_key(v.pane, v.socket)
    if key is not None and now - key < quiet:
        return Answer(CAPTAIN, f"a key was pressed in its window {max(0, int(now - key))}s ago"), v
    try:
        shown = capture(v.pane, v.socket, placeholder)
    except SystemFailure as e:
        return Answer(FAILED, str(e)), v
    if prompt_tail(shown, markers) is None:
        return Answer(NO_PROMPT, "no prompt line on the screen"), v
    if not shows_typed(shown, typed, markers):
        return Answer(DRAFT, "the prompt line holds more than the typed text"), v
    return None, v


def deliver(sess, text, look=None, now=None, quiet=None):
    """Type *text* into the session's pane and press Enter, if safe: (delivered, Answer)."""
    from .locks import acquire
    from .prompt import markers_of, placeholder_of, shows_typed, still_holds
    check_text(text)
    lock = acquire(os.path.join(sess.dir, paths.DELIVER_LOCK), timeout=0)
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
        markers, placeholder = markers_of(sess.meta), placeholder_of(sess.meta)
        if not _wait_screen(pane, socket, lambda s: shows_typed(s, text, markers), APPEAR_SECONDS,
                            placeholder):
            return False, Answer(FAILED, "the typed text did not show on the prompt line;"
                                         " Enter not pressed, the text is left there unsent")
        for attempt in (1, 2):
            why, v = check(sess, verdict.Look(), None, quiet, typed=text)
            if why:
                return False, Answer(ABORTED, f"{why.code} just before Enter ({why.detail});"
                                              " Enter not pressed, the text is left on the"
                                              " prompt line unsent")
            before = _turn_mark(sess)
            try:
                tmux.press_enter(pane, socket=socket)
            except SystemFailure as e:
                return False, Answer(FAILED, f"{e}; the text is left on the prompt line unsent")
            if _wait_screen(pane, socket, lambda s: (not still_holds(s, text, markers)
                                                     or _turn_mark(sess) != before),
                            TAKEN_SECONDS, placeholder):
                return True, Answer(DELIVERED)
        return False, Answer(NOT_SUBMITTED, "Enter pressed twice, the text stayed on the"
                                            " prompt line; it is left there unsent")


def _turn_mark(sess):
    """The newest turn record (its line): a new one after Enter means the text was taken."""
    from .logfile import TailStats
    from .sessions import TURN_STATE
    rec = sess.last_of(TURN_STATE, TailStats())
    return rec.line() if rec is not None else None


def _wait_screen(pane, socket, test, seconds, placeholder=None):
    """Wait (up to *seconds*) until the pane's screen passes *test*; True if it did."""
    from .prompt import capture
    deadline = time.monotonic() + seconds
    while True:      # the pane shows keys a moment after they are sent
        try:
            if test(capture(pane, socket, placeholder)):
                return True
        except SystemFailure:
            pass
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
