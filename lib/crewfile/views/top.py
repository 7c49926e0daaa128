"""crew-top's rows: one per session and a footer, from the same files and
the same answers every command uses (glance.py's word from the verdict,
the schedules, the jobs, crew-up's state, the reports), kept between
frames so that the live view reads again only the directory a change was
in. Nothing here writes or types anything: it only reads.
"""
import os
import time
from types import SimpleNamespace

from crewfile.asides import reports
from crewfile.background.jobs import list_jobs
from crewfile.core import paths
from crewfile.core.clocks import clock_now
from crewfile.core.errors import CrewfileError, reason
from crewfile.core.output import age_text, table
from crewfile.core.text import escape
from crewfile.crew import crewup
from crewfile.nudges.schedules import due_in, load_all, matches
from crewfile.session.ownloop import own_loop
from crewfile.session.verdict import Look
from crewfile.views import glance, tokens
from crewfile.wake.inbox import count

HEADER = ("NAME", "KIND", "STATE", "AGE", "WAKES", "NUDGE", "JOBS", "TOKENS", "LAST")
# word -> (its ANSI attribute with --once, its curses colour in the live view)
COLOURS = {glance.WORKING: ("32", 2), glance.DIALOG: ("33", 3), glance.BLOCKED: ("31", 1),
           glance.PAUSED: ("35", 5), glance.LOST: ("31", 1), glance.DAMAGED: ("7", 1),
           glance.ENDED: ("2", None)}
# The files of a session's directory its row is read from: the status log and
# its rotations, meta, the inbox (WAKES). A lock taken there (lock,
# deliver.lock, rewake.lock) changes nothing a row shows: not read again.
ROW_FILES = (paths.STATUS, paths.META, paths.INBOX)


class Frame:
    """rows: [(word, [column strings])], footer: [lines], bad: how many
    sessions and parts could not be read; said: why each (a failure line each)."""

    def __init__(self, rows, footer, bad, said):
        self.rows, self.footer, self.bad, self.said = rows, footer, bad, said

    def text(self, colour=False):
        lines = table(HEADER, [cols for _, cols in self.rows]).splitlines()
        if colour:
            lines[0] = f"\x1b[1m{lines[0]}\x1b[0m"
            for i, (word, _) in enumerate(self.rows, 1):
                if word in COLOURS:
                    lines[i] = f"\x1b[{COLOURS[word][0]}m{lines[i]}\x1b[0m"
        return "\n".join(lines + [""] + self.footer) + "\n"


def frame(crew, show_ended=False):
    """The Frame of *crew* now (every file read afresh: crew-top --once)."""
    return Rows(crew, show_ended).read().frame()


class Rows:
    """crew-top's rows, kept between frames: update() reads again only what
    a change touched; relook() probes liveness, which no file announces,
    without reading a file. *watch* (the live view's DirWatch) is given each
    directory before it is read: a file made meanwhile wakes it again."""

    def __init__(self, crew, show_ended=False, watch=None):
        self.crew, self.show_ended, self.watch = crew, show_ended, watch
        # name -> (glance.Row, TOKENS, wake-turns line, own-loop line, read at); the
        # own loop is read with the row: a cron job made or deleted ends a turn
        self.sessions = {}
        c = crew    # each part of the crew by its directories; what was read; why not
        self.part_of = {c.sub(paths.JOBS): "jobs", c.sub(paths.NUDGES): "nudges",
                        c.sub(paths.REPORTS): "reports",
                        c.sub(paths.REPORTS, paths.REPORT_NEW): "reports",
                        c.sub(crewup.DIR): "crew-up"}
        self.parts, self.broken = {}, {}
        # transcript path -> tokens.Tally, read on (each byte once); crew-status's
        # tokens.cache, loaded afresh for each pass (crew-top writes nothing)
        self.tallies, self.cache = {}, None

    def read(self):
        """Read every session and the crew's parts afresh; returns self."""
        c = self.crew
        if self.watch is not None:
            for d in (c.root, c.sub(paths.SESSIONS), *self.part_of):
                self._watch(d)
            for sub in (paths.SESSIONS, paths.JOBS):
                try:
                    for name in paths.list_dir(c.sub(sub)):
                        self._watch(c.sub(sub, name))
                except (OSError, CrewfileError):
                    pass                # not made yet, or a link: its row says so
        now, look, self.cache = time.time(), Look(), None   # Look: one ask per tmux server
        self.sessions = {name: self._read(name, look, now, why)
                         for name, why in glance.entries(c)}
        for part in READERS:
            self._read_part(part)
        return self

    def update(self, changes):
        """Read again what DirWatch's *changes* [(directory, entry)] touched:
        one session, one part, or everything when a directory of the crew
        was made or replaced. A session no longer registered leaves the rows."""
        c = self.crew
        sessions, jobs = c.sub(paths.SESSIONS), c.sub(paths.JOBS)
        names, parts, everything = set(), set(), False
        for d, name in changes:
            if d in (sessions, jobs) and name:      # one came, left or was replaced
                self.watch.forget(os.path.join(d, name))
                self._watch(os.path.join(d, name))
            if d == sessions:
                names.add(name)
            elif os.path.dirname(d) == sessions:
                if not name or name.startswith(ROW_FILES):     # '': the directory itself
                    names.add(os.path.basename(d))
            elif d in self.part_of or os.path.dirname(d) == jobs:
                parts.add(self.part_of.get(d, "jobs"))
                if d == c.sub(paths.REPORTS):       # reports/new may be new
                    self._watch(c.sub(paths.REPORTS, paths.REPORT_NEW))
            elif d == c.root and os.path.join(d, name) in (sessions, *self.part_of):
                everything = True
        if everything:
            return self.read()
        now, look, self.cache = time.time(), Look(), None
        for name in names - {""}:
            found = glance.entry(c, name)
            if found is None:
                self.sessions.pop(name, None)
            else:
                self.sessions[name] = self._read(name, look, now, found[1])
        for part in READERS:
            if part in parts:
                self._read_part(part)
        return self

    def relook(self):
        """Probe each session's liveness again, from its kept records; returns self."""
        now, look, self.cache = time.time(), Look(), None
        for name, (row, _tokens, _line, own, _at) in list(self.sessions.items()):
            if row.facts is not None:       # None: damaged, nothing to probe
                row = glance.relook(row, look, now)
                self.sessions[name] = (row, *self._costs(row), own, now)
        return self

    def _watch(self, d):
        if os.path.isdir(d) and not os.path.islink(d):
            self.watch.add(d)

    def _read(self, name, look, now, why):
        """The kept row of session *name*; *why*: it cannot be one (glance.entry)."""
        row = (glance.Row(name, glance.DAMAGED, error=why) if why is not None else
               glance.row(self.crew, name, look, now, also=lambda s, recs: SimpleNamespace(
                   wakes=_wakes(self.crew, name, s.at), own=_own_line(name, s, recs))))
        if row.word == glance.DAMAGED:
            return row, None, None, None, now
        return (row, *self._costs(row), row.also.own, now)

    def _tally(self, path):
        """One transcript's Tally, read on from this view's last reading of it."""
        if self.tallies.get(path) is not None:
            t = tokens.read(path, self.tallies[path])
        else:
            self.cache = self.cache or tokens.Cache(self.crew)
            t = self.cache.tally(path)
        self.tallies[path] = t
        return t

    def _costs(self, row):
        """The row's TOKENS column, and for a primary its footer's wake-turns line."""
        path = row.sess.meta.get("transcript_path")
        t = tokens.session_used(path, self._tally) if isinstance(path, str) else None
        if row.state["kind"] != "primary":
            line = None
        elif t is None:
            line = escape(f"wake turns: {row.name} names no transcript that can be read")
        else:
            line = escape(f"wake turns: {tokens.share(t.wake, t.total)} of {row.name}'s tokens"
                          f" ({tokens.short(t.wake)} of {tokens.short(t.total)})")
        return tokens.text(None if t is None else t.total), line

    def _read_part(self, part):
        """Read one part of the crew; None, and why in self.broken, when it cannot be."""
        try:
            self.parts[part] = READERS[part](self.crew)
            self.broken.pop(part, None)
        except (OSError, CrewfileError) as e:
            self.parts[part], self.broken[part] = None, reason(e)

    def frame(self):
        """The Frame from the rows kept (the AGE column as of now)."""
        now = time.time()
        out, bad, wake_lines, said = [], 0, [], []
        jobs, nudges = self.parts["jobs"], self.parts["nudges"]
        for name in sorted(self.sessions):
            row, tokens_, wake_line, own, read_at = self.sessions[name]
            if row.word == glance.DAMAGED:
                bad += 1
                said.append(row.error)
                out.append((row.word, [row.name, "?", "damaged", "?", "?", "?", "?", "?",
                                       "error: " + escape(row.error)]))
                continue
            if row.word == glance.ENDED and not self.show_ended:
                continue
            wake_lines += [line for line in (wake_line, own) if line]
            st, word = row.state, row.word
            if word in (glance.LOST, glance.UNKNOWN) and st["why"]:
                word += f"({st['why']})"
            elif st["live"] == "unknown":
                word += "(live?)"
            elif st["stopped"] == "yes":
                word += "(stopped)"
            last = (st["last_kind"] or "-") + (": " + st["last_text"] if st["last_text"] else "")
            age = None if st["age"] is None else st["age"] + (now - read_at)
            out.append((row.word, [
                row.name, st["kind"] + ("*" if st["kind"] == "aside" else ""), word,
                age_text(age), row.also.wakes,
                "?" if nudges is None else _nudge_for(nudges[0], row.sess.meta),
                "?" if jobs is None else jobs.get(row.name, "-"), tokens_, escape(last)]))
        footer = [escape(f"{part}: ? ({self.broken[part]})") if self.parts[part] is None
                  else self.parts[part] for part in ("crew-up", "reports")] + wake_lines
        unread = nudges[1] if nudges else 0
        if unread:
            footer.append(f"nudges: {unread} schedule file(s) cannot be read"
                          " (nudge-ls names them)")
        return Frame(out, footer, bad + unread + len(self.broken),
                     said + list(self.broken.values()))


def _wakes(crew, name, at):
    """Notices pending in NAME's inbox ('?' if it cannot be read); at: its directory, opened."""
    try:
        n, more = count(crew, name, at=at)
    except CrewfileError:
        return "?"
    return f"{n}{'+' if more else ''}" if n or more else "-"


def _own_line(name, sess, recs):
    """'own loop: NAME: 1 cron (...)' while the session's own cron jobs are
    armed (its nudges are held meanwhile), else None; *recs*: its row's read."""
    try:
        loop, _ = own_loop(sess, recs)
    except (CrewfileError, OSError):
        return None
    if loop is None:
        return None
    return escape(f"own loop: {name}: {loop.detail.split(': ', 1)[1]}")


def _nudge_for(scheds, meta):
    """The next nudge of the session whose meta is *meta*: 'in 5m', 'due', or why it is held."""
    mine = [s for s in scheds if matches(s, meta)]
    if not mine:
        return "-"
    s = max(mine, key=lambda s: bool(s.get("armed")))
    why = s.get("last_code") or s.get("last_reason") or "-"
    if not s.get("armed"):
        return escape(f"disarmed:{why}")
    if s.get("last_outcome") == "refused":
        return escape(f"held:{why}")
    left = due_in(s, clock_now())
    return "due" if left <= 0 else f"in {age_text(left)}"


def _nudges(crew):
    """(the schedules, how many schedule files cannot be read)."""
    bad = []
    return load_all(crew, bad), len(bad)


def _jobs(crew):
    """{session: 'N run,M unheard'} from the jobs' own files."""
    found = {}
    for j in list_jobs(crew, full=False):
        if not j.get("session") or "error" in j:
            continue
        what = ("run" if j.get("state") in ("running", "starting") else "unheard"
                if j.get("ended") and not j.get("heard") and not j.get("announced") else None)
        if what:
            found.setdefault(j["session"], {"run": 0, "unheard": 0})[what] += 1
    return {s: ",".join(f"{n[w]} {w}" for w in ("run", "unheard") if n[w])
            for s, n in found.items()}


def crew_up_line(crew):
    """crew-up: what --status says, in one line."""
    found = crewup.status_lines(crew)
    if found is None:
        return "crew-up: not running (wakes are not delivered: crew-up PRIMARY)"
    head, rows = found
    stages = ", ".join(f"{r[0]} {'up' if r[1] == 'yes' else 'DOWN'}"
                       + (f" ({r[4]} restarts)" if r[4] != "0" else "") for r in rows[1:])
    return escape(f"{head}; {stages or 'no stages yet'}")


def reports_line(crew):
    waiting = reports.listing(crew, states=(paths.REPORT_NEW,))
    if not waiting:
        return "reports: none waiting"
    return escape(f"reports: {len(waiting)} waiting in reports/new ("
                  + ", ".join(sorted({r.aside for r in waiting})) + ")")


READERS = {"jobs": _jobs, "nudges": _nudges, "crew-up": crew_up_line, "reports": reports_line}
