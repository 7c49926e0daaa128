"""Typing text into a session's pane, safely: the one way crewfile speaks to an agent.

deliver(sess, text) types *text* into the session's registered tmux pane and
presses Enter, and only when all of this holds, checked once before typing
and again, afresh, just before Enter:

  live        meta.tmux names a pane that is alive (liveness.Probe) and the
              session's newest lifecycle record is not `ended`/`closed`
  idle        sessions.state generating == "no" ("yes" and "unknown" are busy)
  no dialog   the newest turn record is not `waiting` (typed text would
              answer a permission dialog)
  captain     captain_at(), the one captain check (aside-reconcile asks it
              too): no attached tmux client whose active pane is the target
              pressed a key in the last CAPTAIN_QUIET seconds (tmux
              `client_activity`; send-keys does not move it, so our own
              typing never counts), and the pane shows a prompt line (the
              lowest screen line holding a prompt marker, PROMPT_MARKERS or
              meta `prompt`) with nothing typed after the marker: a
              half-written captain message is never completed by our Enter

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

An aside is never typed into (code `aside`): whatever reaches its prompt is
recorded as the captain's input, and only the captain's acts may steer or
conclude it.

Two deliverers never interleave keys: deliver holds sessions/NAME/deliver.lock
(try once; busy is a refusal). It never starts, resumes or creates anything:
no live pane, no delivery.

Returns (delivered, reason); reason is "delivered" or starts with one of the
code words below, then ": " and a detail for people.
"""
import os
import re
import time

from . import paths, tmux
from .errors import BadInput, SystemFailure

DELIVERED = "delivered"
ASIDE = "aside"                   # the captain's own conversation: nobody else types there
NOT_LIVE = "not-live"             # pane gone or dead, session ended, no pane registered
LIVE_UNKNOWN = "live-unknown"     # tmux could not be asked
GENERATING = "generating"
STATE_UNKNOWN = "state-unknown"   # no turn record to go by
DIALOG = "permission-dialog"
CAPTAIN = "captain-typing"
DRAFT = "draft"                   # text already on the prompt line
NO_PROMPT = "no-prompt"           # no prompt line on the screen
IN_PROGRESS = "delivery-busy"     # another delivery holds deliver.lock
FAILED = "failed"                 # tmux failed, or the typed text never showed
ABORTED = "aborted"               # re-check before Enter failed; text left unsent

CAPTAIN_QUIET = 5.0               # seconds; $CREWFILE_CAPTAIN_QUIET overrides
APPEAR_SECONDS = 2.0
PROMPT_MARKERS = ("\u276f", "\u203a", ">")     # Claude Code, Codex, most REPLs
MAX_TEXT = 4096
_BOX = " \t\u2502\u2503|\u00a0"
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def code_of(reason):
    """The code word of a reason string ("generating: ..." -> "generating")."""
    return reason.split(":", 1)[0]


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
        return max(0.0, float(env.get("CREWFILE_CAPTAIN_QUIET") or CAPTAIN_QUIET))
    except ValueError:
        return CAPTAIN_QUIET


class Look:
    """One look at tmux (panes, then clients, each asked at most once)."""

    def __init__(self, probe=None):
        from .liveness import Probe
        self.probe = probe or Probe()
        self._clients = None

    def clients(self):
        if self._clients is None:
            self._clients = tmux.clients()
        return self._clients

    def last_key(self, pane):
        """Epoch seconds of the newest key press by a client looking at *pane*, or None."""
        times = [t for t, p in self.clients() if p == pane]
        return max(times) if times else None


def _markers(meta):
    custom = meta.get("prompt")
    if isinstance(custom, str) and custom:
        return (custom,)
    if isinstance(custom, list) and custom:
        return tuple(m for m in custom if isinstance(m, str) and m)
    return PROMPT_MARKERS


def _marker_re(markers):
    # Claude Code draws its input line as "\u276f\u00a0" (a no-break space), while
    # the echo of past prompts above it is "\u276f " (a plain space).
    return re.compile("(?:" + "|".join(re.escape(m.rstrip()) for m in markers)
                      + ")(?:[ \u00a0]|$)")


def prompt_tail(screen, markers=PROMPT_MARKERS):
    """What follows the prompt marker on the prompt line, plus the screen lines below.

    The prompt line is the lowest line holding a marker followed by a space
    (plain or no-break) or the line's end; the first such marker on it counts. Returns (draft,
    below) with draft stripped of blanks and box-drawing edges, or None when
    no line holds a prompt.
    """
    rx = _marker_re(markers)
    lines = screen.rstrip("\n").split("\n")
    for i in range(len(lines) - 1, -1, -1):
        m = rx.search(lines[i])
        if m:
            return lines[i][m.end():].strip(_BOX), lines[i + 1:]
    return None


def _squash(text):
    return "".join(text.split())


def shows_typed(screen, text, markers=PROMPT_MARKERS):
    """True when the prompt line holds exactly *text* from its start (wrapping allowed)."""
    found = prompt_tail(screen, markers)
    if found is None:
        return False
    draft, below = found
    want = _squash(text)
    have = _squash(draft)
    if have == want:
        return True
    # An agent's own input box wraps long text onto the lines below it.
    region = have + "".join(_squash(line.strip(_BOX)) for line in below)
    return len(have) > 0 and want.startswith(have) and region.startswith(want)


def check(sess, look=None, now=None, quiet=None, typed=None, screen=True):
    """(None, pane) when it is safe to type (or, with *typed*, to press Enter), else (code, detail).

    screen=False stops after the cheap part (liveness and the status log):
    no client query, no capture.
    """
    from . import sessions
    from .liveness import UNKNOWN, YES
    look = look or Look()
    now = time.time() if now is None else now
    quiet = captain_quiet() if quiet is None else quiet
    meta = sess.meta
    if meta.get("kind") == "aside":
        return ASIDE, ("an aside is the captain's conversation: typed text would be"
                       " recorded as the captain's words")
    if not meta.get("tmux"):
        return NOT_LIVE, "no tmux pane is registered for the session"
    live = look.probe.live(meta)
    if live == UNKNOWN:
        return LIVE_UNKNOWN, "tmux could not be asked"
    if live != YES:
        return NOT_LIVE, f"pane {meta['tmux']} is gone"
    pane = look.probe.pane_of(meta)
    st = sessions.state(sess, look.probe, now)
    if st["ended"]:
        return NOT_LIVE, "the session has ended"
    if st["waiting"]:
        return DIALOG, "a permission dialog is up"
    if st["generating"] == "yes":
        return GENERATING, "a turn is running"
    if st["generating"] != "no":
        return STATE_UNKNOWN, "no turn record says whether it is generating"
    if not screen:
        return None, pane
    code, detail = captain_at(pane, meta, look, now, quiet, typed=typed)
    return (code, detail) if code else (None, pane)


def captain_at(pane, meta, look=None, now=None, quiet=None, since=None, typed=None):
    """Is the captain at *pane*? (None, None) if not, else (code, detail).

    The one captain check, asked by delivery before typing and by
    aside-reconcile before tearing a window down. CAPTAIN: an attached
    client looking at the pane pressed a key in the last *quiet* seconds,
    or at or after epoch second *since*; DRAFT: the prompt line holds text
    (with *typed*: more than the typed text); NO_PROMPT: no prompt line on
    the screen (the captain cannot be ruled out); FAILED: the pane could not
    be read. *meta* gives the prompt markers (meta `prompt`).
    """
    look = look or Look()
    now = time.time() if now is None else now
    quiet = captain_quiet() if quiet is None else quiet
    key = look.last_key(pane)
    if key is not None and (now - key < quiet or (since is not None and key >= since)):
        return CAPTAIN, f"a key was pressed in its window {max(0, int(now - key))}s ago"
    try:
        screen = tmux.capture(pane)
    except SystemFailure as e:
        return FAILED, str(e)
    markers = _markers(meta)
    found = prompt_tail(screen, markers)
    if found is None:
        return NO_PROMPT, "no prompt line on the screen"
    if typed is None:
        if found[0]:
            return DRAFT, f"the prompt line holds {found[0][:40]!r}"
    elif not shows_typed(screen, typed, markers):
        return DRAFT, "the prompt line holds more than the typed text"
    return None, None


def deliver(sess, text, look=None, now=None, quiet=None):
    """Type *text* into the session's pane and press Enter, if safe: (delivered, reason)."""
    from .locks import acquire
    check_text(text)
    lock = acquire(os.path.join(sess.dir, paths.DELIVER_LOCK), timeout=0)
    if lock is None:
        return False, f"{IN_PROGRESS}: another delivery to {sess.name} is in progress"
    with lock:
        code, detail = check(sess, look, now, quiet)
        if code:
            return False, f"{code}: {detail}"
        pane = detail
        try:
            tmux.type_literally(pane, text)
        except SystemFailure as e:
            return False, f"{FAILED}: {e}"
        markers = _markers(sess.meta)
        deadline = time.monotonic() + APPEAR_SECONDS
        while True:        # the pane shows typed keys a moment later: wait for them
            try:
                if shows_typed(tmux.capture(pane), text, markers):
                    break
            except SystemFailure:
                pass
            if time.monotonic() > deadline:
                return False, (f"{FAILED}: the typed text did not show on the prompt line;"
                               " Enter not pressed, the text is left there unsent")
            time.sleep(0.02)
        code, detail = check(sess, Look(), None, quiet, typed=text)
        if code:
            return False, (f"{ABORTED}: {code} just before Enter ({detail});"
                           " Enter not pressed, the text is left on the prompt line unsent")
        try:
            tmux.press_enter(pane)
        except SystemFailure as e:
            return False, f"{FAILED}: {e}; the text is left on the prompt line unsent"
        return True, DELIVERED
