HELP = """\
crew-status
One short line saying how the crew is: for a tmux status line or a prompt.

  --tmux   with tmux colour codes (#[fg=...]), for status-right

Counts of the sessions not ended, by their state (glance.py, from the
verdict): working (generating), idle, dialog (a permission dialog is up),
blocked (blocked/problem/error, until the session moves on), paused
(awaiting captain, until the wait is over), lost (the verdict says not live), unknown, damaged (its files
cannot be used); then the wakes pending in the primary's inbox. Only the
counts that are not zero are shown; `crew: empty` when no session is
registered, `crew: all ended` when none is left.

Example: tmux set -g status-right '#(crew-status --tmux)'
"""

COLOUR = {"working": "green", "idle": "default", "dialog": "yellow", "blocked": "red",
          "paused": "magenta", "lost": "red", "unknown": "colour244", "damaged": "red",
          "wakes": "cyan"}


def run(args):
    import sys
    from ..cli import crew
    from ..errors import PARTIAL
    from .. import glance
    c = crew(args)
    rows = glance.rows(c)
    sys.stdout.write(line(rows, *glance.wakes_pending(c, rows), tmux=args.tmux) + "\n")
    return PARTIAL if any(r.word == glance.DAMAGED for r in rows) else 0


def line(rows, wakes, bad_inbox, tmux=False):
    """The segment's text for *rows* and *wakes* pending."""
    from .. import glance
    if not rows:
        return "crew: empty"
    n = glance.counts(rows)
    parts = [(w, n[w]) for w in glance.ORDER if n.get(w)]
    if wakes or bad_inbox:
        parts.append(("wakes", f"{wakes}{'?' if bad_inbox else ''}"))
    if not parts:
        return "crew: all ended"
    words = []
    for w, k in parts:
        text = f"{k} {w}"
        words.append(f"#[fg={COLOUR[w]}]{text}#[default]" if tmux else text)
    return " ".join(words)
