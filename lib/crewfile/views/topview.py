"""crew-top's live view: the frame of top.py in curses, redrawn when a file
of the crew changes (notify.DirWatch), reading again only what changed
(top.Rows); liveness, which no file announces, probed every FULL seconds.
It only reads, and switches the captain's tmux client (keys:
docs/commands/crew-top.md).
"""
import curses
import os
import select
import time

from crewfile.asides import reports
from crewfile.core import paths
from crewfile.core.errors import CrewfileError
from crewfile.core.logfile import TailStats
from crewfile.core.notify import DirWatch, POLL
from crewfile.core.output import table
from crewfile.core.text import escape
from crewfile.session import tmux
from crewfile.session.sessions import Session
from crewfile.views import top
from crewfile.wake.inbox import pending

FULL = 10.0          # seconds between looks at liveness; CREWFILE_TOP_FULL sets it


def full_period():
    """FULL, or CREWFILE_TOP_FULL's seconds (docs/commands/crew-top.md)."""
    try:
        return max(1.0, float(os.environ.get("CREWFILE_TOP_FULL") or FULL))
    except ValueError:
        return FULL


class View:
    def __init__(self, crew, show_ended=False):
        self.crew, self.sel, self.filter, self.message = crew, 0, "", ""
        self.watch = DirWatch(warn=lambda msg: setattr(self, "message", msg))
        self.kept, self.frame, self.full_at = top.Rows(crew, show_ended, self.watch), None, 0.0

    def refresh(self):
        """Read everything afresh."""
        self._show(self.kept.read())

    def relook(self):
        """Liveness probed again for every row (no file read)."""
        self._show(self.kept.relook())

    def _show(self, kept):
        self.full_at, self.frame = time.monotonic(), kept.frame()

    def apply(self, changes):
        """Read again only what *changes* (DirWatch.changes()) touched."""
        if changes is None:                 # the kernel lost events: read it all
            self.watch.reset()
            return self.refresh()
        self.frame = self.kept.update(changes).frame()

    def rows(self):
        return [r for r in self.frame.rows if self.filter in " ".join(r[1])]

    def selected(self):
        rows = self.rows()
        if not rows:
            return None
        self.sel = max(0, min(self.sel, len(rows) - 1))
        return rows[self.sel][1][0]

    def draw(self, scr):
        scr.erase()
        h, w = scr.getmaxyx()
        rows = self.rows()
        lines = table(top.HEADER, [cols for _, cols in rows]).splitlines()
        _put(scr, 0, lines[0], w, curses.A_BOLD)
        self.selected()
        for i, line in enumerate(lines[1:h - 4]):
            attr = curses.A_REVERSE if i == self.sel else 0
            word = rows[i][0]
            if word in PAIRS:
                attr |= curses.color_pair(PAIRS[word])
            _put(scr, i + 1, line, w, attr)
        y = min(len(lines), h - 4) + 1
        for line in self.frame.footer:
            if y < h - 1:
                _put(scr, y, line, w)
                y += 1
        hint = "Enter: go to pane  i: inbox  l: log  r: reports  /: filter  q: quit"
        if self.filter:
            hint = f"filter: {escape(self.filter)}  " + hint
        _put(scr, h - 1, self.message or hint, w, curses.A_DIM)
        scr.refresh()

    def go(self, name):
        """Switch the captain's tmux client to NAME's pane (never types into it)."""
        try:
            meta = Session(self.crew, name).meta
            pane, socket = meta.get("tmux"), meta.get("tmux_socket")
            if not pane or not socket:
                self.message = f"{name}: no tmux pane recorded"
                return
            code, _ = tmux.run("switch-client", "-t", pane, check=False, socket=socket)
        except CrewfileError as e:
            self.message = f"{name}: {e}"
            return
        self.message = (f"{name}: switched to {pane}" if code == 0 else
                        f"{name}: no tmux client of {socket} to switch (attach one)")

    def lines_of(self, key, name):
        """The lines of the list shown for *key* (i, l, r)."""
        try:
            if key == "r":
                found = reports.listing(self.crew, states=(paths.REPORT_NEW,))
                return [escape(f"{r.aside}  {r.path}") for r in found] or ["no reports waiting"]
            if name is None:
                return ["no session chosen"]
            if key == "i":
                found = pending(self.crew, name)
                return ([escape(f"{n.ts} {n.kind}: {n.text}") for n in found]
                        or [f"{name}: inbox empty"])
            recs = Session(self.crew, name).last_records(1000, TailStats())
            return [escape(r.line().rstrip("\n")) for r in recs] or [f"{name}: no records"]
        except CrewfileError as e:
            return [escape(f"{name}: {e}")]


PAIRS = {}


def _put(scr, y, text, w, attr=0):
    try:
        scr.addnstr(y, 0, text, max(0, w - 1), attr)
    except curses.error:
        pass


def _colours():
    """A curses colour pair for each word top.COLOURS gives a colour."""
    if not curses.has_colors():
        return
    curses.start_color()
    try:
        curses.use_default_colors()
        bg = -1
    except curses.error:
        bg = curses.COLOR_BLACK
    for n, (word, (_, fg)) in enumerate(top.COLOURS.items(), 1):
        if fg is not None:
            curses.init_pair(n, fg, bg)
            PAIRS[word] = n


def _wait(view, timeout):
    """Until a key is pressed, a crew file changes or *timeout* passes: "key",
    or DirWatch.changes() (polling: looked at every POLL seconds)."""
    fd = view.watch.fileno()
    if fd is None:
        ready, _, _ = select.select([0], [], [], max(0, min(timeout, POLL)))
        return "key" if ready else view.watch.changes(0)
    ready, _, _ = select.select([0, fd], [], [], max(0, timeout))
    if 0 in ready:
        return "key"
    return view.watch.changes(0) if ready else set()


def _list(scr, title, lines):
    """Show *lines* scrollable; back on q, Esc or Enter."""
    top_ = max(0, len(lines) - 1)
    while True:
        scr.erase()
        h, w = scr.getmaxyx()
        body = h - 2
        top_ = max(0, min(top_, len(lines) - body))
        _put(scr, 0, title, w, curses.A_BOLD)
        for i, line in enumerate(lines[top_:top_ + body]):
            _put(scr, i + 1, line, w)
        _put(scr, h - 1, "up/down, PgUp/PgDn: scroll  q: back", w, curses.A_DIM)
        scr.refresh()
        key = scr.getch()
        if key in (ord("q"), 27, 10, 13, curses.KEY_ENTER):
            return
        top_ += {curses.KEY_UP: -1, ord("k"): -1, curses.KEY_DOWN: 1, ord("j"): 1,
                 curses.KEY_PPAGE: -body, curses.KEY_NPAGE: body}.get(key, 0)


def _ask(scr, prompt):
    h, w = scr.getmaxyx()
    _put(scr, h - 1, " " * (w - 1), w)
    _put(scr, h - 1, prompt, w)
    curses.echo()
    curses.curs_set(1)
    try:
        raw = scr.getstr(h - 1, len(prompt), 60)
    finally:
        curses.noecho()
        curses.curs_set(0)
    return raw.decode("utf-8", "replace").strip()


def main(crew, show_ended=False):
    def body(scr):
        try:
            curses.curs_set(0)
        except curses.error:
            pass
        _colours()
        scr.keypad(True)
        view = View(crew, show_ended)
        view.refresh()
        full = full_period()
        while True:
            if time.monotonic() >= view.full_at + full:    # however busy the files are
                view.relook()
            view.draw(scr)
            found = _wait(view, view.full_at + full - time.monotonic())
            if found != "key":
                if found is None or found:
                    view.apply(found)
                continue
            key = scr.getch()
            view.message = ""
            if key in (ord("q"), ord("Q")):
                return
            if key in (curses.KEY_DOWN, ord("j")):
                view.sel += 1
            elif key in (curses.KEY_UP, ord("k")):
                view.sel = max(0, view.sel - 1)
            elif key in (10, 13, curses.KEY_ENTER):
                name = view.selected()
                if name:
                    view.go(name)
            elif key in (ord("i"), ord("l"), ord("r")):
                name = view.selected()
                title = {"i": f"inbox of {name}", "l": f"log of {name}", "r": "reports waiting"}
                _list(scr, title[chr(key)], view.lines_of(chr(key), name))
                view.apply(view.watch.changes(0))     # what came while the list was shown
            elif key == ord("/"):
                view.filter = _ask(scr, "filter: ")
                view.sel = 0
    curses.wrapper(body)
