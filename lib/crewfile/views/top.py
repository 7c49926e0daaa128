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
from crewfile.session.sessions import is_registered
from crewfile.session.verdict import Look, own_loop
from crewfile.views import glance, tokens
from crewfile.wake.inbox import count

HEADER = ("NAME", "KIND", "STATE", "AGE", "WAKES", "NUDGE", "JOBS", "TOKENS", "LAST")


class Frame:
    """rows: [(word or None, [column strings])], footer: [lines], bad: damaged
    count; said: why each session or part of the crew marked `?` is (for a
    failure line each on stderr)."""

    def __init__(self, rows, footer, bad, said=()):
        self.rows, self.footer, self.bad, self.said = rows, footer, bad, list(said)

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


def frame(crew, now=None, show_ended=False):
    """The Frame of *crew* now (every file read afresh: crew-top --once)."""
    return Rows(crew, show_ended).read(now).frame(now)


# What a change in a directory of the crew makes stale (Rows.update):
SESSION, SESSIONS, JOBS, NUDGES, FOOTER, ALL = "session", "sessions", "jobs", "nudges", "footer", "all"


class Rows:
    """crew-top's rows, kept between frames: each session's row is read
    again only when its own files change (update(), driven by inotify), the
    crew's jobs, schedules and footer only when theirs do. Liveness comes
    from processes and tmux, which no file announces: relook() probes every
    session's again (its files not read: a long-lived log costs nothing
    there), and brings AGE and TOKENS up to date."""

    def __init__(self, crew, show_ended=False):
        self.crew, self.show_ended = crew, show_ended
        self.sessions = {}          # name -> (glance.Row, wakes, tokens, wake line, read at)
        self.nudges, self.nudge_bad, self.jobs, self.footer = [], 0, {}, []
        # A part of the crew that cannot be read (jobs/ a file, crew-up/lock a
        # FIFO) -> why: its column or footer line shows `?`; the rest is shown.
        self.broken = {}
        # name -> its own loop's line for the footer (verdict.own_loop), read
        # with its row: a job made or deleted ends a turn, whose record re-reads it.
        self.own = {}

    def read(self, now=None):
        """Read every session and the crew's parts afresh; returns self."""
        now = time.time() if now is None else now
        look, costs = Look(), _Costs(self.crew)     # each tmux server asked once for all its panes
        self.sessions = {name: self._read(name, look, costs, now, why)
                         for name, why in glance.entries(self.crew)}
        self._read_parts((JOBS, NUDGES, FOOTER), now)
        return self

    def update(self, changed, now=None):
        """Read again what *changed* names: {(SESSION, name), (JOBS,), (NUDGES,),
        (FOOTER,), (ALL,)}; a session no longer registered leaves the rows."""
        if (ALL,) in changed:
            return self.read(now)
        now = time.time() if now is None else now
        look, costs = Look(), _Costs(self.crew)
        for what in changed:
            if what[0] != SESSION:
                continue
            name = what[1]
            why = None if is_registered(self.crew, name) else glance.unusable(self.crew, name)
            if is_registered(self.crew, name) or why is not None:
                self.sessions[name] = self._read(name, look, costs, now, why)
            else:
                self.sessions.pop(name, None)
        self._read_parts({what[0] for what in changed}, now)
        return self

    def relook(self, now=None):
        """Probe each session's liveness again, from its kept records; returns self."""
        now = time.time() if now is None else now
        look, costs = Look(), _Costs(self.crew)
        for name, (row, wakes, _tokens, _line, _at) in list(self.sessions.items()):
            if row.facts is None:               # damaged: nothing to probe
                continue
            row = glance.relook(row, look, now)
            wake_line = costs.wake_line(row) if row.state["kind"] == "primary" else None
            self.sessions[name] = (row, wakes, costs.column(row), wake_line, now)
        return self

    def _read(self, name, look, costs, now, why=None):
        """The kept row of session *name*; *why*: it cannot be one (glance.unusable)."""
        self.own.pop(name, None)
        if why is not None:
            return glance.Row(name, glance.DAMAGED, error=why), "?", "?", None, now
        row = glance.row(self.crew, name, look, now, also=lambda s: _wakes(self.crew, name, s.at))
        if row.word == glance.DAMAGED:
            return row, "?", "?", None, now
        self.own[name] = _own_line(row)
        wake_line = costs.wake_line(row) if row.state["kind"] == "primary" else None
        return row, row.also, costs.column(row), wake_line, now

    def _read_parts(self, which, now):
        if JOBS in which:
            self.jobs = self._part(JOBS, lambda: _jobs(self.crew), None)
        if NUDGES in which:
            self.nudges, self.nudge_bad = self._part(NUDGES, lambda: _nudges(self.crew, now),
                                                     (None, 0))
        if FOOTER in which:
            self.footer = []
            for part, line in (("crew-up", crew_up_line), ("reports", reports_line)):
                found = self._part(part, lambda: line(self.crew), None)
                self.footer.append(escape(f"{part}: ? ({self.broken[part]})") if found is None
                                   else found)

    def _part(self, part, read, unknown):
        """read(), or *unknown* when that part of the crew cannot be read."""
        try:
            found = read()
        except (OSError, CrewfileError) as e:
            self.broken[part] = reason(e)
            return unknown
        self.broken.pop(part, None)
        return found

    def frame(self, now=None):
        """The Frame from the rows kept (the AGE column as of *now*)."""
        now = time.time() if now is None else now
        out, bad, wake_lines, said = [], 0, [], []
        for name in sorted(self.sessions):
            row, wakes, tokens, wake_line, read_at = self.sessions[name]
            if row.word == glance.DAMAGED:
                bad += 1
                said.append(row.error)
                out.append((row.word, [row.name, "?", "damaged", "?", "?", "?", "?", "?",
                                       "error: " + escape(row.error)]))
                continue
            if row.word == glance.ENDED and not self.show_ended:
                continue
            if wake_line:
                wake_lines.append(wake_line)
            if self.own.get(name):
                wake_lines.append(self.own[name])
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
            out.append((row.word, [row.name, kind, word, age_text(age), wakes, nudge, jobs,
                                   tokens, escape(last)]))
        footer = self.footer + wake_lines
        if self.nudge_bad:
            footer.append(f"nudges: {self.nudge_bad} schedule file(s) cannot be read"
                          " (nudge-ls names them)")
        said += self.broken.values()
        return Frame(out, footer, bad + self.nudge_bad + len(self.broken), said)


def _wakes(crew, name, at=None):
    """Notices pending in NAME's inbox ('?' if it cannot be read); at: its
    directory, opened."""
    try:
        n, more = count(crew, name, at=at)
    except CrewfileError:
        return "?"
    return f"{n}{'+' if more else ''}" if n or more else "-"


_tallies = {}    # transcript path -> tokens.Tally: the live view reads each byte once


class _Costs:
    """What supervision costs, per row: the TOKENS column, and for a primary
    the footer's share of wake turns. Starts from crew-status's
    tokens.cache when it has the transcript (read only: crew-top writes
    nothing), then from this process's own tallies."""

    def __init__(self, crew):
        self.crew, self.cache, self.seen = crew, None, {}

    def tally(self, row):
        """tokens.Used by the row's agent and its subagents, or None."""
        path = row.sess.meta.get("transcript_path")
        if not isinstance(path, str):
            return None
        if path not in self.seen:
            self.seen[path] = tokens.session_used(path, self._read)
        return self.seen[path]

    def _read(self, path):
        """One transcript's Tally, read on from this process's last reading."""
        if path in _tallies:
            t = tokens.read(path, _tallies[path])
        else:
            if self.cache is None:
                self.cache = tokens.Cache(self.crew)
            t = self.cache.tally(path)
        if t is None:
            _tallies.pop(path, None)
        else:
            _tallies[path] = t
        return t

    def column(self, row):
        t = self.tally(row)
        return tokens.text(None if t is None else t.total)

    def wake_line(self, row):
        t = self.tally(row)
        if t is None:
            return escape(f"wake turns: {row.name} names no transcript that can be read")
        return escape(f"wake turns: {tokens.share(t.wake, t.total)} of {row.name}'s tokens"
                      f" ({tokens.short(t.wake)} of {tokens.short(t.total)})")


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


def _nudges(crew, now):
    bad = []
    return load_all(crew, bad), len(bad)


def _nudge_for(scheds, meta):
    """The next nudge of the session whose meta is *meta*: 'in 5m', 'due', or why it is held."""
    if not scheds:
        return "-"
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
    """{session: 'N run M unheard'} from the jobs' own files."""
    count = {}
    for j in list_jobs(crew, full=False):
        s = j.get("session")
        if not s or "error" in j:
            continue
        run, unheard = count.get(s, (0, 0))
        if j.get("state") in ("running", "starting"):
            run += 1
        elif j.get("ended") and not j.get("heard") and not j.get("announced"):
            unheard += 1
        count[s] = (run, unheard)
    out = {}
    for s, (run, unheard) in count.items():
        parts = ([f"{run} run"] if run else []) + ([f"{unheard} unheard"] if unheard else [])
        out[s] = ",".join(parts) or "-"
    return out


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
