"""crew-top's frame: one row per session and a footer, from the same files
and the same answers every command uses (glance.py's word from the verdict,
the schedules, the jobs, crew-up's state, the reports). Nothing here
writes or types anything: it only reads.
"""
import time

from crewfile.asides import reports
from crewfile.background.jobs import list_jobs
from crewfile.core import paths
from crewfile.core.clocks import clock_now
from crewfile.core.errors import CrewfileError, reason
from crewfile.core.output import age_text, table
from crewfile.core.text import escape
from crewfile.crew import crewup
from crewfile.nudges.schedules import due_in, load_all, matches
from crewfile.session.verdict import Look, own_loop
from crewfile.views import glance, tokens
from crewfile.wake.inbox import count

HEADER = ("NAME", "KIND", "STATE", "AGE", "WAKES", "NUDGE", "JOBS", "TOKENS", "LAST")


class Frame:
    """rows: [(word or None, [column strings])], footer: [lines], bad: damaged
    count; said: why each session or part of the crew marked `?` is (for a
    failure line each on stderr)."""

    def __init__(self, rows, footer, bad, said):
        self.rows, self.footer, self.bad, self.said = rows, footer, bad, said

    def text(self, colour=False):
        lines = table(HEADER, [cols for _, cols in self.rows]).splitlines()
        if colour:
            lines[0] = f"\x1b[1m{lines[0]}\x1b[0m"
            for i, (word, cols) in enumerate(self.rows, 1):
                c = COLOURS.get(word)
                if c:
                    lines[i] = f"\x1b[{c}m{lines[i]}\x1b[0m"
        return "\n".join(lines + [""] + self.footer) + "\n"


COLOURS = {glance.WORKING: "32", glance.DIALOG: "33", glance.BLOCKED: "31", glance.PAUSED: "35",
           glance.LOST: "31", glance.DAMAGED: "7", glance.ENDED: "2"}


def frame(crew, show_ended=False):
    """The Frame of *crew* now (every file read afresh: crew-top --once)."""
    return Rows(crew, show_ended).read().frame()


# What a change in a directory of the crew makes stale (Rows.update):
SESSION, JOBS, NUDGES, FOOTER, ALL = "session", "jobs", "nudges", "footer", "all"


class Rows:
    """crew-top's rows, kept between frames: each part read again only when its
    files change (update(), from inotify); relook() probes liveness, which no
    file announces, without reading a file (a long-lived log costs nothing)."""

    def __init__(self, crew, show_ended=False):
        self.crew, self.show_ended = crew, show_ended
        # name -> (glance.Row, TOKENS, wake-turns line, own-loop line, read at); the
        # own loop is read with the row: a cron job made or deleted ends a turn
        self.sessions = {}
        self.nudges, self.nudge_bad, self.jobs, self.footer = [], 0, {}, []
        # A part of the crew that cannot be read (jobs/ a file, crew-up/lock a
        # FIFO) -> why: its column or footer line shows `?`; the rest is shown.
        self.broken = {}
        # transcript path -> tokens.Tally, read on (each byte once); crew-status's
        # tokens.cache, loaded afresh for each pass (crew-top writes nothing)
        self.tallies, self.cache = {}, None

    def read(self):
        """Read every session and the crew's parts afresh; returns self."""
        now, look, self.cache = time.time(), Look(), None   # Look: one ask per tmux server
        self.sessions = {name: self._read(name, look, now, why)
                         for name, why in glance.entries(self.crew)}
        self._read_parts((JOBS, NUDGES, FOOTER))
        return self

    def update(self, changed):
        """Read again what *changed* names: {(SESSION, name), (JOBS,), (NUDGES,),
        (FOOTER,), (ALL,)}; a session no longer registered leaves the rows."""
        if (ALL,) in changed:
            return self.read()
        now, look, self.cache = time.time(), Look(), None
        for name in [what[1] for what in changed if what[0] == SESSION]:
            found = glance.entry(self.crew, name)
            if found is None:
                self.sessions.pop(name, None)
            else:
                self.sessions[name] = self._read(name, look, now, found[1])
        self._read_parts({what[0] for what in changed})
        return self

    def relook(self):
        """Probe each session's liveness again, from its kept records; returns self."""
        now, look, self.cache = time.time(), Look(), None
        for name, (row, _tokens, _line, own, _at) in list(self.sessions.items()):
            if row.facts is not None:       # None: damaged, nothing to probe
                row = glance.relook(row, look, now)
                self.sessions[name] = (row, *self._costs(row), own, now)
        return self

    def _read(self, name, look, now, why=None):
        """The kept row of session *name*; *why*: it cannot be one (glance.unusable)."""
        if why is not None:
            return glance.Row(name, glance.DAMAGED, error=why), None, None, None, now
        row = glance.row(self.crew, name, look, now, also=lambda s: _wakes(self.crew, name, s.at))
        if row.word == glance.DAMAGED:
            return row, None, None, None, now
        return (row, *self._costs(row), _own_line(row), now)

    def _tally(self, path):
        """One transcript's Tally, read on from this view's last reading of it."""
        if path in self.tallies:
            t = tokens.read(path, self.tallies[path])
        else:
            if self.cache is None:
                self.cache = tokens.Cache(self.crew)
            t = self.cache.tally(path)
        if t is None:
            self.tallies.pop(path, None)
        else:
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

    def _read_parts(self, which):
        if JOBS in which:
            self.jobs = self._part(JOBS, lambda: _jobs(self.crew))
        if NUDGES in which:
            bad = []
            self.nudges = self._part(NUDGES, lambda: load_all(self.crew, bad))
            self.nudge_bad = 0 if self.nudges is None else len(bad)
        if FOOTER in which:
            self.footer = []
            for part, line in (("crew-up", crew_up_line), ("reports", reports_line)):
                found = self._part(part, lambda: line(self.crew))
                self.footer.append(escape(f"{part}: ? ({self.broken[part]})") if found is None
                                   else found)

    def _part(self, part, read):
        """read(), or None when that part of the crew cannot be read."""
        try:
            found = read()
        except (OSError, CrewfileError) as e:
            self.broken[part] = reason(e)
            return None
        self.broken.pop(part, None)
        return found

    def frame(self):
        """The Frame from the rows kept (the AGE column as of now)."""
        now = time.time()
        out, bad, wake_lines, said = [], 0, [], []
        for name in sorted(self.sessions):
            row, tokens, wake_line, own, read_at = self.sessions[name]
            if row.word == glance.DAMAGED:
                bad += 1
                said.append(row.error)
                out.append((row.word, [row.name, "?", "damaged", "?", "?", "?", "?", "?",
                                       "error: " + escape(row.error)]))
                continue
            if row.word == glance.ENDED and not self.show_ended:
                continue
            wake_lines += [line for line in (wake_line, own) if line]
            st = row.state
            kind = st["kind"] + ("*" if st["kind"] == "aside" else "")
            word = row.word
            if word in (glance.LOST, glance.UNKNOWN) and st["why"]:
                word += f"({st['why']})"
            elif st["live"] == "unknown":
                word += "(live?)"
            elif st["stopped"] == "yes":
                word += "(stopped)"
            last = st["last_kind"] or "-"
            if st["last_text"]:
                last += ": " + st["last_text"]
            age = None if st["age"] is None else st["age"] + (now - read_at)
            nudge = "?" if self.nudges is None else _nudge_for(self.nudges, row.sess.meta)
            jobs = "?" if self.jobs is None else self.jobs.get(row.name, "-")
            out.append((row.word, [row.name, kind, word, age_text(age), row.also, nudge, jobs,
                                   tokens, escape(last)]))
        footer = self.footer + wake_lines
        if self.nudge_bad:
            footer.append(f"nudges: {self.nudge_bad} schedule file(s) cannot be read"
                          " (nudge-ls names them)")
        said += self.broken.values()
        return Frame(out, footer, bad + self.nudge_bad + len(self.broken), said)


def _wakes(crew, name, at=None):
    """Notices pending in NAME's inbox ('?' if it cannot be read); at: its directory, opened."""
    try:
        n, more = count(crew, name, at=at)
    except CrewfileError:
        return "?"
    return f"{n}{'+' if more else ''}" if n or more else "-"


def _own_line(row):
    """'own loop: NAME: 1 cron (...)' while the session's own cron jobs are
    armed (its nudges are held meanwhile), else None."""
    try:
        loop, _ = own_loop(row.sess)
    except (CrewfileError, OSError):
        return None
    if loop is None:
        return None
    return escape(f"own loop: {row.name}: {loop.detail.split(': ', 1)[1]}")


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


def _jobs(crew):
    """{session: 'N run,M unheard'} from the jobs' own files."""
    run, unheard = {}, {}
    for j in list_jobs(crew, full=False):
        s = j.get("session")
        if not s or "error" in j:
            continue
        if j.get("state") in ("running", "starting"):
            run[s] = run.get(s, 0) + 1
        elif j.get("ended") and not j.get("heard") and not j.get("announced"):
            unheard[s] = unheard.get(s, 0) + 1
    return {s: ",".join(f"{n} {what}" for n, what in ((run.get(s), "run"),
                                                       (unheard.get(s), "unheard")) if n)
            for s in run.keys() | unheard.keys()}


def crew_up_line(crew):
    """crew-up: what --status says, in one line."""
    found = crewup.status_lines(crew)
    if found is None:
        return "crew-up: not running (wakes are not delivered: crew-up PRIMARY)"
    head, rows = found
    stages = ", ".join(f"{r[0]} {'up' if r[1] == 'yes' else 'DOWN'}"
                       + (f" ({r[4]} restarts)" if r[4] not in ("0", 0) else "") for r in rows[1:])
    return escape(f"{head}; {stages or 'no stages yet'}")


def reports_line(crew):
    waiting = reports.listing(crew, states=(paths.REPORT_NEW,))
    if not waiting:
        return "reports: none waiting"
    return escape(f"reports: {len(waiting)} waiting in reports/new ("
                  + ", ".join(sorted({r.aside for r in waiting})) + ")")
