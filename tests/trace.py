"""The reference trace: a morning of a crew, written as real session files,
with every event that should wake the primary labelled and explained.

Shared by tests/test_wake_trace.py and bench/bench_wake.py (load it by path:
the module name clashes with the standard library's `trace`).

    design   an aside: opened, 50 captain turns with idle periods (long
             human waits, one long silent turn), the agent once trying to
             conclude by itself (refused: a problem), then the captain's
             conclusion, the report, the reconcile
    w1       crew: ordinary turns; one turn silent past the stale threshold
    w2       crew: ordinary turns, then blocked (written twice: one wake),
             a human wait, resumed and done
    w3       crew: ordinary turns, then its process dies (lost)

write(crew) creates them under crew's sessions/ with timestamps from
BASE on; the files look exactly as the commands leave them (meta replaced
atomically, records appended through the one writer).
"""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from crewfile.asides import reports  # noqa: E402
from crewfile.core import logwrite, paths, records  # noqa: E402
from crewfile.core.atomic import replace  # noqa: E402

BASE = (time.time() // 86400 - 1) * 86400 + 8 * 3600     # yesterday, 08:00 UTC
STALE = 600.0                # the stale threshold the trace is written for


class Label:
    """An event that must wake the primary, and why it matters."""
    __slots__ = ("ts", "session", "kind", "why")

    def __init__(self, ts, session, kind, why):
        self.ts, self.session, self.kind, self.why = ts, session, kind, why

    def matches(self, ev):
        ts, session, kind = ev
        return session == self.session and kind == self.kind and (self.ts is None or ts == self.ts)


class Trace:
    def __init__(self):
        self.logs = {}          # session -> [record lines]
        self.labels = []
        self.meta = {}

    def session(self, name, kind="crew", **extra):
        meta = {"name": name, "kind": kind, "exempt": kind == "aside",
                "created": records.timestamp(BASE), "user": "captain"}
        meta.update(extra)
        self.meta[name] = meta
        self.logs[name] = []

    def rec(self, name, t, kind, text="", why=None):
        line = records.format_line(records.timestamp(t), kind, text)
        self.logs[name].append(line)
        if why:
            self.labels.append(Label(line[:24], name, kind, why))
        return t

    def write(self, crew):
        for name, lines in self.logs.items():
            lines = [_delivered(crew, name, line) for line in lines]
            sdir = crew.ensure_sub(paths.SESSIONS, name)
            replace(os.path.join(sdir, paths.META), json.dumps(self.meta[name], indent=1) + "\n")
            logwrite.append(os.path.join(sdir, paths.STATUS), os.path.join(sdir, paths.LOCK), lines)
        return self


def _delivered(crew, name, line):
    """A `concluded` line: its report put where aside-conclude puts it, named
    as aside-conclude names it, and the line naming its path (a reader
    believes a conclusion by its report, kinds.GUARDED)."""
    ts, _, rest = line.partition(" ")
    if not rest.startswith("concluded: ") or rest.startswith("concluded: /"):
        return line
    base = reports.unique_name(name, now=records.parse_timestamp(ts))
    new = crew.ensure_sub(paths.REPORTS, paths.REPORT_NEW)
    with open(os.path.join(new, base), "w") as f:
        f.write("the report\n")
    return f"{ts} concluded: {os.path.join(new, base)}" + ("\n" if line.endswith("\n") else "")


def dead_pid():
    """A pid whose process has exited (and been reaped)."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def build(stale=STALE):
    """The trace in memory: sessions, their records, and the labels."""
    tr = Trace()
    # -- the aside: 50 captain turns, captain-paced ------------------------
    a = "design"
    tr.session(a, "aside", cwd="/src/app")
    t = BASE
    t = tr.rec(a, t, "registered", "kind=aside exempt")
    t = tr.rec(a, t + 1, "opened", "the retry policy")
    t = tr.rec(a, t + 0.2, "paused", "awaiting captain")
    t = tr.rec(a, t + 0.1, "started")
    for i in range(1, 51):
        # the captain thinks (an idle period: human wait), types, the agent answers
        think = 40 + (i * 37) % 300 + (1500 if i % 10 == 0 else 0)      # some waits > stale
        t = tr.rec(a, t + 60, "idle")
        t = tr.rec(a, t + think, "captain", f"question {i}: what about case {i}?")
        t = tr.rec(a, t + 0.05, "turn-started")
        work = 20 + (i * 13) % 90 + (stale + 60 if i == 25 else 0)      # one long silent turn
        t = tr.rec(a, t + work, "turn-ended")
        t = tr.rec(a, t + 0.05, "paused", "awaiting captain")
        if i == 30:
            # the agent judges the design settled and tries to conclude: refused
            t = tr.rec(a, t + 0.5, "problem", "self-conclusion refused",
                       why="the aside's agent tried to conclude on its own: the captain"
                           " must know a report was attempted without him")
    t = tr.rec(a, t + 90, "captain-done", "that's all, thanks")
    t = tr.rec(a, t + 0.05, "turn-started")
    t = tr.rec(a, t + 30, "turn-ended")
    t = tr.rec(a, t + 0.2, "concluded", "design,1796040000.123_1.host",
               why="the captain concluded the aside: the primary takes the report"
                   " and tears the window down")
    aside_end = t

    # -- w1: ordinary work, one turn silent past the threshold ----------------
    w = "w1"
    tr.session(w, cwd="/src/app-w1")
    t = tr.rec(w, BASE + 5, "registered", "kind=crew")
    t = tr.rec(w, t + 1, "started")
    for i in range(1, 9):
        t = tr.rec(w, t + 30, "captain", f"task {i}")
        t = tr.rec(w, t + 0.05, "turn-started")
        if i == 4:
            tr.labels.append(Label(records.timestamp(t + stale), w, "stale",
                                   "a turn silent for 10 minutes may be wedged"))
            t = tr.rec(w, t + stale + 300, "turn-ended",
                       why="the worker stopped after a long turn: next instruction or review")
        else:
            t = tr.rec(w, t + 200 + i * 17, "turn-ended",
                       why="the worker stopped: it needs its next instruction or a review")
        t = tr.rec(w, t + 0.1, "idle")
    t = tr.rec(w, t + 5, "ended", "exit",
               why="the worker's agent exited: the primary decides what next")

    # -- w2: blocked, a human wait, then done ------------------------------------
    w = "w2"
    tr.session(w, cwd="/src/app-w2")
    t = tr.rec(w, BASE + 7, "registered", "kind=crew")
    t = tr.rec(w, t + 1, "started")
    t = ordinary_turns(tr, w, t, "migration step", 3, think=40, work=300)
    t = tr.rec(w, t + 20, "turn-started")
    t = tr.rec(w, t + 100, "blocked", "needs the staging database password",
               why="the worker cannot go on without something only a person has")
    t = tr.rec(w, t + 1, "blocked", "needs the staging database password")     # a repeat: folded
    t = tr.rec(w, t + 0.1, "turn-ended", why="the blocked turn ended: the worker waits")
    t = tr.rec(w, t + 0.1, "paused", "awaiting captain")
    t = tr.rec(w, t + 600, "idle")                 # a human wait: held
    t = tr.rec(w, t + 3000, "idle")                # still waiting: held
    t = tr.rec(w, t + 30, "captain", "the password is in the vault")
    t = tr.rec(w, t + 0.05, "turn-started")
    t = tr.rec(w, t + 240, "turn-ended",
               why="the worker stopped: it needs its next instruction or a review")
    t = tr.rec(w, t + 0.1, "done", "migration applied on staging",
               why="the worker says its task is done: review and merge")
    t = tr.rec(w, t + 0.1, "idle")

    # -- w3: ordinary work, then its process dies --------------------------------
    w = "w3"
    tr.session(w, cwd="/src/app-w3", pid=dead_pid(), pid_start=1)
    t = tr.rec(w, BASE + 9, "registered", "kind=crew")
    t = tr.rec(w, t + 1, "started")
    t = ordinary_turns(tr, w, t, "lint pass", 3, think=50, work=120)
    tr.labels.append(Label(None, w, "lost", "its process is gone though it never ended:"
                                            " work may be lost, the primary must look"))
    tr.aside_end = aside_end
    return tr


def ordinary_turns(tr, w, t, prompt, n, think, work):
    """n plain turns of crew session w: captain input, work, turn-ended (a
    labelled wake: the worker needs its next instruction), idle."""
    for i in range(1, n + 1):
        t = tr.rec(w, t + think, "captain", f"{prompt} {i}")
        t = tr.rec(w, t + 0.05, "turn-started")
        t = tr.rec(w, t + work, "turn-ended",
                   why="the worker stopped: it needs its next instruction or a review")
        t = tr.rec(w, t + 0.1, "idle")
    return t


def write(crew, stale=STALE):
    """Build the trace and write it under *crew*; return it."""
    return build(stale).write(crew)


def events(text):
    """[(ts, session, kind)] of event lines."""
    out = []
    for line in text.splitlines():
        parts = line.split(" ", 3)
        if len(parts) >= 3:
            out.append((parts[0], parts[1], parts[2].rstrip(":")))
    return out


def score(tr, wake_text):
    """What the wakes did against the labels: counts, missed labels, unlabelled wakes."""
    wakes = events(wake_text)
    missed = [l for l in tr.labels if not any(l.matches(ev) for ev in wakes)]
    extra = [ev for ev in wakes if not any(l.matches(ev) for l in tr.labels)]
    per = {}
    for _ts, session, _kind in wakes:
        per[session] = per.get(session, 0) + 1
    return {"wakes": len(wakes), "per_session": per, "missed": missed, "extra": extra}
