"""Reading an agent's prompt line off its pane's screen.

The prompt line is the lowest screen line holding a prompt marker followed
by a space (plain or no-break) or the line's end; what follows the first
such marker on it is the draft. A session may name its own markers (meta
`prompt`, a string or a list). The captain check (captain_at) reads it
here, beside the keys pressed in the pane's window: whether a person is at
the pane, asked before crewfile types into it or tears it down.
"""
import re
import time

from crewfile.agents import load
from crewfile.core.errors import SystemFailure
from crewfile.session import tmux
from crewfile.session.verdict import Answer, Look, NO, TMUX_UNKNOWN, UNKNOWN, YES

PROMPT_MARKERS = ("\u276f", "\u203a", ">")     # Claude Code, Codex, most REPLs
_BOX = " \t\u2502\u2503|\u00a0"

# why the captain is at a pane (captain_at), or its screen cannot say
CAPTAIN = "captain-typing"             # a key was pressed in a window looking at it
DRAFT = "draft"                        # its prompt line holds a draft
NO_PROMPT = "no-prompt"                # no prompt line on its screen


def _drawing_agent(meta):
    """The adapter of a session's agent that draws its own prompt (Codex,
    Gemini CLI), or None."""
    agent = meta.get("agent") if isinstance(meta, dict) else None
    return load(agent) if agent in ("codex", "gemini") else None


def markers_of(meta):
    """The session's prompt markers: meta `prompt`, else its agent's, else the common ones."""
    custom = meta.get("prompt") if isinstance(meta, dict) else None
    if isinstance(custom, str) and custom:
        return (custom,)
    if isinstance(custom, list) and custom:
        return tuple(m for m in custom if isinstance(m, str) and m) or PROMPT_MARKERS
    return getattr(_drawing_agent(meta), "PROMPT_MARKERS", PROMPT_MARKERS)


def _marker_re(markers):
    # Claude Code draws its input line as "\u276f\u00a0" (a no-break space), while
    # the echo of past prompts above it is "\u276f " (a plain space).
    return re.compile("(?:" + "|".join(re.escape(m.rstrip()) for m in markers)
                      + ")(?:[ \u00a0]|$)")


def prompt_tail(screen, markers=PROMPT_MARKERS):
    """(draft, lines below) of the prompt line, or None when no line holds a
    prompt; draft is stripped of blanks and box-drawing edges."""
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
    want, have = _squash(text), _squash(draft)
    if have == want:
        return True
    # An agent's own input box wraps long text onto the lines below it.
    region = have + "".join(_squash(line.strip(_BOX)) for line in below)
    return len(have) > 0 and want.startswith(have) and region.startswith(want)


def still_holds(screen, text, markers=PROMPT_MARKERS):
    """After Enter: the prompt line still starts with (a part of) *text*, so it was not taken."""
    found = prompt_tail(screen, markers)
    if found is None:
        return False
    have, want = _squash(found[0]), _squash(text)
    return bool(have) and (want.startswith(have) or have.startswith(want))


def placeholder_of(meta):
    """The SGR parameters of the placeholder on the session's empty prompt
    line (Codex dim, Gemini a grey), or None."""
    return getattr(_drawing_agent(meta), "PLACEHOLDER", None)


_SGR = re.compile(r"\x1b\[([0-9;:]*)m")
_OTHER_ESC = re.compile(r"\x1b(?:\[[0-9;?]*[A-Za-ln-z]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[()][0-9A-B]|.)")


def without_placeholder(screen, sgr):
    """The plain text of *screen* (captured with escapes) without the
    characters drawn with the SGR parameters *sgr* (a placeholder's style):
    an attribute such as "2" (dim) until reset (0, 22), or a colour such as
    "38;5;248" until another colour or reset."""
    colour = sgr.startswith(("38;", "48;"))
    off = ("0", "") + (("39", "38") if sgr.startswith("38;") else ("49", "48") if colour
                       else ("22",) if sgr in ("1", "2") else ("2" + sgr,))
    out, hidden, pos = [], False, 0
    for m in _SGR.finditer(screen):
        seg = screen[pos:m.start()]
        out.append("\n" * seg.count("\n") if hidden else seg)   # lines stay lines
        params = m.group(1).replace(":", ";")
        parts = params.split(";") if params else [""]
        if (";" + sgr + ";") in (";" + params + ";"):
            hidden = True
        elif hidden and (parts[0] in off or "0" in parts or (not colour and "22" in parts)):
            hidden = False
        pos = m.end()
    tail = screen[pos:]
    out.append("\n" * tail.count("\n") if hidden else tail)
    return _OTHER_ESC.sub("", "".join(out))


def capture(pane, socket=None, placeholder=None):
    """The pane's screen as plain text; with *placeholder*, without the
    placeholder's characters (so an empty prompt line reads empty)."""
    if placeholder is None:
        return tmux.capture(pane, socket=socket)
    return without_placeholder(tmux.capture(pane, socket=socket, escapes=True), placeholder)


def last_key(look, pane, socket):
    """Epoch seconds of the newest key press by a client looking at *pane*, or
    None; each server's clients asked at most once per *look* (a verdict.Look)."""
    if socket not in look.clients:
        look.clients[socket] = tmux.clients(socket)
    return max((t for t, p in look.clients[socket] if p == pane), default=None)


def captain_at(pane, socket, within=None, since=None, meta=None, look=None, now=None,
               typed=None):
    """Is the captain at *pane* now? (YES/NO/UNKNOWN, Answer or None): a key
    pressed in the last *within* seconds (or since epoch *since*), or a draft
    on the prompt line (with *typed*, crewfile's own text just typed: anything
    but it). send-keys does not move client_activity, so crewfile's own typing
    never counts. *meta*: the session's, for its prompt markers."""
    look = look or Look()
    now = time.time() if now is None else now
    key = last_key(look, pane, socket)
    if key is not None:
        ago = max(0, int(now - key))
        if (within is not None and now - key < within) or (since is not None and key >= int(since)):
            return YES, Answer(CAPTAIN, f"a key was pressed in its window {ago}s ago")
    try:
        screen = capture(pane, socket, placeholder_of(meta))
    except SystemFailure as e:
        return UNKNOWN, Answer(TMUX_UNKNOWN, str(e))
    markers = markers_of(meta)
    found = prompt_tail(screen, markers)
    if found is None:
        return UNKNOWN, Answer(NO_PROMPT, "no prompt line on the screen")
    if typed is not None and not shows_typed(screen, typed, markers):
        return YES, Answer(DRAFT, "the prompt line holds more than the typed text")
    if typed is None and found[0]:
        return YES, Answer(DRAFT, f"the prompt line holds {found[0][:40]!r}")
    return NO, None
