import sys

from crewfile.core.errors import PARTIAL, failure_line
from crewfile.core.paths import Crew
from crewfile.session.tmuxseen import Seen
from crewfile.session.verdict import Look
from crewfile.views import glance

EXIT_AT_ONCE = True     # cli.leave(): it reads, and its one write (tokens.cache) is renamed before run() returns

COLOUR = {"working": "green", "idle": "default", "starting": "blue", "dialog": "yellow",
          "blocked": "red",
          "paused": "magenta", "lost": "red", "unknown": "colour244", "damaged": "red",
          "wakes": "cyan", "tok": "colour244"}


def run(args):
    c = Crew(args.dir)
    rows = glance.rows(c, _look(args.panes))
    sys.stdout.write(line(rows, *glance.wakes_pending(c, rows), tmux=args.tmux,
                          used=crew_tokens(c, rows)) + "\n")
    damaged = [r for r in rows if r.word == glance.DAMAGED]
    sys.stderr.write("".join(failure_line("crew-status", r.error) for r in damaged))
    return PARTIAL if damaged else 0


def _look(panes):
    """The verdict's Look, with the pane list tmux handed in (--panes), if any.
    The agent CLI's registry left unread: it can only make a live session
    unknown, which no word of the line tells from live."""
    listed = None if panes is None else Seen.listed(panes)
    if panes is not None and listed is None:
        sys.stderr.write("crew-status: --panes is not a pane list as tmux expands it"
                         " (see --help): asking tmux\n")
    return Look(listed, registry=False)


def crew_tokens(crew, rows):
    """Tokens used by the crew's agents (each transcript once), as the line
    shows them, or None when no session names a transcript that can be read."""
    paths = {p for r in rows if r.sess is not None
             for p in (r.sess.meta.get("transcript_path"),) if isinstance(p, str) and p}
    if not paths:
        return None
    # The status line's budget: the tokens view costs a fifth of it, and a
    # crew whose agents record no transcript never needs it.
    from crewfile.views.tokens import Cache, session_used, short
    cache = Cache(crew)
    found = [u for u in (session_used(p, cache.tally) for p in sorted(paths)) if u is not None]
    cache.save()
    return short(sum(u.total for u in found)) if found else None


def line(rows, wakes, bad_inbox, more=False, tmux=False, used=None):
    """The segment's text for *rows*, *wakes* pending (*more*: at least that
    many) and the tokens *used* (crew_tokens' text)."""
    if not rows:
        return "crew: empty"
    words = [r.word for r in rows]         # ORDER: every word but ENDED
    parts = [(w, words.count(w)) for w in glance.ORDER if w in words]
    if wakes or bad_inbox:
        parts.append(("wakes", f"{wakes}{'+' if more else ''}{'?' if bad_inbox else ''}"))
    if used is not None:
        parts.append(("tok", used))
    if not any(w != "tok" for w, _ in parts):
        return " ".join(["crew: all ended"] + [f"{k} tok" for _, k in parts])
    return " ".join(f"#[fg={COLOUR[w]}]{k} {w}#[default]" if tmux else f"{k} {w}"
                    for w, k in parts)
