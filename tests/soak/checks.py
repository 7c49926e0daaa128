"""The soak's invariants and figures, read from what the day left: the
crew directory, the stand-in models' request logs (model_server --soak:
one line per request, what was new in it and when it arrived), crew-up's
state sampled every second, and /proc sampled every second.

Each violation is one line naming its evidence; the report ends with them.
"""
import glob
import hashlib
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time

import levers  # beside this file
from claude_harness import BIN as _BIN
from crewfile.core import paths, records
from crewfile.session.sessions import Session
from crewfile.views import tokens

RESTART_BOUND = 15.0      # seconds crew-up's pipe may be down: a restart on a loaded machine
TAKEN_WITHIN = 90.0       # seconds: a wake still pending this long before the end was lost
HEARD_WITHIN = 120.0      # seconds: a job outcome unheard this long before the end
IN_FLIGHT = 30.0          # seconds: a notice drained this close to the end may be in a
                          # turn the teardown cut (not one the crew lost)
RSS_GROWTH = 1.5          # a process whose RSS grew past this ratio (and by RSS_SLACK) ...
RSS_SLACK = 16 << 10      # kB
SYNTHESIZED = ("stale", "lost", "error")
BIN = str(_BIN)


class Samples:
    """crew-up's downtime and crewfile's processes, sampled through the day."""

    def __init__(self):
        self.down_since = None
        self.gaps = []             # (seconds, why)
        self.rss = {}              # pid -> (command, [kB, ...])
        self.cpu = {}              # pid -> (command, seconds of CPU last seen)
        self.tick = os.sysconf("SC_CLK_TCK")

    def down_for(self, seconds, why):
        self.gaps.append((seconds, why))

    def take(self, soak):
        now = time.monotonic()
        if soak.crewup_running():
            if self.down_since is not None:
                self.gaps.append((now - self.down_since, "crew-up's stages not all running"))
                self.down_since = None
        elif self.down_since is None:
            self.down_since = now
        for pid, command in crewfile_processes(soak.mark).items():
            try:
                with open(f"/proc/{pid}/status") as f:
                    rss = next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except (OSError, StopIteration, IndexError):
                continue
            self.rss.setdefault(pid, (command, []))[1].append(rss)
            self.cpu[pid] = (command, (int(fields[11]) + int(fields[12])) / self.tick)


def crewfile_processes(mark):
    """{pid: command} of the crewfile commands the soak started (bin/NAME run
    by Python), hooks included, found by the soak's mark in their environment."""
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            if len(argv) < 2 or not argv[1].startswith(BIN.encode() + b"/"):
                continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                if mark.encode() not in f.read().split(b"\0"):
                    continue
        except OSError:
            continue
        out[int(pid)] = os.path.basename(argv[1].decode())
    return out


def left_behind(mark, me):
    """{pid: command line} of the processes carrying the soak's mark, but *me*."""
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == me:
            continue
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                if f.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                    continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                if mark.encode() not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                out[int(pid)] = f.read().replace(b"\0", b" ").decode("utf-8", "replace")[:200]
        except (OSError, IndexError):
            continue
    return out


# ------------------------------------------------------------------ what was sent
def requests(log):
    """The stand-in's log lines (model_server --soak), in order."""
    out = []
    try:
        with open(log) as f:
            for line in f:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
    except FileNotFoundError:
        pass
    return out


def shown(log):
    """[(arrival time, text)]: each piece of text the model was shown for the
    first time, once (a request repeats what came before; a resumed
    conversation sends it again: the same block is counted once)."""
    seen, out = set(), []
    for req in requests(log):
        if not req.get("main"):
            continue
        for msg in req.get("new") or []:
            content = msg.get("content")
            blocks = [content] if isinstance(content, str) else content or []
            for block in blocks:
                text = json.dumps(block, sort_keys=True)
                key = hashlib.sha256(text.encode()).digest()
                if key not in seen:
                    seen.add(key)
                    out.append((req["received"], text))
    return out


def status_records(crew, name):
    path = crew.session_file(name, paths.STATUS)
    out = []
    for p in sorted(glob.glob(path + ".*")) + [path]:
        if p.endswith(".lock"):
            continue
        try:
            with open(p, "rb") as f:
                out += [r for r in map(records.parse, f) if r is not None]
        except OSError:
            pass
    return out


def read_text(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def inbox_lines(crew, name):
    """Every wake notice ever posted to NAME: (notice, drained?)."""
    out = []
    for what, drained in ((paths.INBOX_READ, True), (paths.INBOX, False)):
        try:
            with open(crew.session_file(name, what), "rb") as f:
                for raw in f:
                    rec = records.parse(raw)
                    if rec is not None and rec.kind == "wake":
                        nid, _, text = rec.text.partition(" ")
                        out.append((rec.ts, nid, text, drained))
        except FileNotFoundError:
            pass
    return out


def mentions(text, nid):
    """Whether *text* names notice *nid* (not one whose id it begins: `w1:5:221`
    is not `w1:5:221:lost`)."""
    return re.search(re.escape(nid) + r"(?![\w:])", text) is not None


def event_of(text):
    """(ts, session, kind) of an event line."""
    ts, session, rest = (text.split(" ", 2) + ["", ""])[:3]
    return ts, session, rest.split(":", 1)[0].split(" ", 1)[0]


def repeated_after_death(soak, name, hits):
    """Each repeat in *hits* (arrival times of one notice at NAME's model)
    follows a kill of NAME's agent after the showing before it: a notice
    handed to an agent killed before its transcript kept it is put back for
    the next life (docs/files/inbox.md, `offered`; a duplicate is the lesser
    error). Any other repeat is a violation."""
    deaths = [soak.t0 + at for at, what in soak.events
              if (what.startswith(f"{name}'s agent ") and "SIGKILLed" in what)
              or what == "tmux server killed"]
    return all(any(a < d < b for d in deaths) for a, b in zip(hits, hits[1:]))


def put_back_once(posted):
    """*posted* with each notice once: a notice put back for its agent's next
    life (docs/files/inbox.md, `offered`) is drained again, so the same line,
    its time and id alike, is in inbox.read twice; a second post of an event
    would have a time of its own."""
    seen = set()
    return [p for p in posted if (p[0], p[1]) not in seen and not seen.add((p[0], p[1]))]


# ------------------------------------------------------------------ invariants
def check_wakes(soak, fig):
    """Every wake posted reaches the primary's model exactly once; every
    event the filter passes (replayed from the logs) was posted once."""
    bad = []
    primary = soak.rigs["firstmate"]
    texts = shown(primary.log)
    posted = put_back_once(inbox_lines(soak.crew, "firstmate"))
    latencies, again = [], 0
    for ts, nid, text, drained in posted:
        hits = [at for at, t in texts if mentions(t, nid)]
        if len(hits) > 1 and repeated_after_death(soak, "firstmate", hits):
            again += 1
            latencies.append(hits[0] - records.parse_timestamp(event_of(text)[0]))
        elif len(hits) > 1:
            bad.append(f"wake {nid} ({text[:80]}) reached the primary's model {len(hits)} times,"
                       f" at {', '.join(f'{h - soak.t0:.1f}s' for h in hits)}")
        elif hits:
            latencies.append(hits[0] - records.parse_timestamp(event_of(text)[0]))
        elif drained and records.parse_timestamp(ts) < soak.t_end - IN_FLIGHT:
            bad.append(f"wake {nid} ({text[:80]}) was drained but never reached the model")
        elif records.parse_timestamp(ts) < soak.t_end - TAKEN_WITHIN:
            bad.append(f"wake {nid} ({text[:80]}) posted at {ts} was still pending at the end")
    fig["wakes posted"] = len(posted)
    fig["wakes shown to the model"] = len(latencies)
    fig["wakes shown again after their agent was killed"] = again
    fig["wakes pending at the end"] = sum(1 for p in posted if not p[3]
                                          and not any(mentions(t, p[1]) for _, t in texts))
    fig["event -> model latency"] = percentiles(latencies)
    # the filter's own judgement, replayed over the whole day's logs
    replay = subprocess.run(f"{sys.executable} {BIN}/crew-watch --from-start --once"
                            f" | {sys.executable} {BIN}/wake-filter", shell=True,
                            capture_output=True, text=True, timeout=300)
    wanted = {}
    for line in replay.stdout.splitlines():
        ev = event_of(line)
        if ev[1] != "firstmate" and ev[2] not in SYNTHESIZED and ev[0][:4].isdigit() \
                and records.parse_timestamp(ev[0]) < soak.t_end - 5:
            wanted[ev] = line
    got = {}
    for ts, nid, text, _ in posted:
        got.setdefault(event_of(text), []).append(nid)
    for ev, line in sorted(wanted.items()):
        if ev not in got:
            bad.append(f"wake-worthy event never posted to the primary: {line[:120]}")
    for ev, nids in sorted(got.items()):
        if len(nids) > 1:
            bad.append(f"event {' '.join(ev)} posted {len(nids)} times: {', '.join(nids)}")
    fig["wake-worthy events (replayed)"] = len(wanted)
    return bad


def check_recorders(soak):
    bad = []
    for name, pane, path in getattr(soak, "recorders", []):
        with open(path, "rb") as f:
            got = f.read()
        if got:
            bad.append(f"{len(got)} bytes typed into {name}'s dead pane {pane}: {got[:120]!r}"
                       f" ({path})")
    return bad


TYPED = {"firstmate": "crewfile: "}     # what crewfile types into each, but the workers'
# Gemini CLI with model steering on (geminirig): a line submitted while its
# agent runs is sent as this, with the tool's response or after the turn
STEERED = "User steering update:"
# The Stop hook's reason, which Claude Code may hand the model in a later
# request, inside a turn, as a task notification: the hook's words (the same
# as wake-send's announcement), not typed ones
STOP_SAID = 'Stop hook blocking error from command "Stop": '


def check_typing(soak):
    """Nothing typed into a generating conversation: a line crewfile typed
    (a nudge, wake-send's announcement) reaches the model only as a prompt
    of its own, never inside a turn (Claude Code hands keys typed during a
    turn to the model with the next tool result; Gemini CLI, steered, sends
    them as a steering update, with the tool's response or after the turn)."""
    bad = []
    for name in ["firstmate", *soak.names]:
        typed = TYPED.get(name, "SOAK-GO ")
        for req in requests(soak.rigs[name].log) if name in soak.rigs else []:
            new = json.dumps(req.get("new") or [])
            if not req.get("main"):
                continue
            if STEERED in new:
                at = new.index(STEERED)
                bad.append(f"{name}: a line typed while its agent worked reached its model as"
                           f" a steering update, at {req['received'] - soak.t0:.1f}s:"
                           f" {new[at:at + 160]}")
            elif '"tool_result"' in new and typed in new.replace(
                    json.dumps(STOP_SAID + typed)[1:-1], ""):
                at = new.index(typed)
                bad.append(f"{name}: typed text reached its model inside a turn, at"
                           f" {req['received'] - soak.t0:.1f}s: {new[max(0, at - 40):at + 100]}")
    return bad


def check_asides(soak):
    bad = []
    for path in glob.glob(os.path.join(soak.crew.root, "sessions", "*", "meta")):
        name = os.path.basename(os.path.dirname(path))
        if Session(soak.crew, name).meta.get("kind") != "aside":
            continue
        acted = False
        for r in status_records(soak.crew, name):
            if r.kind == "registered":
                acted = False
            elif r.kind == "captain-done":
                acted = True
            elif r.kind == "concluded" and not acted:
                bad.append(f"aside {name} concluded at {r.ts} without the captain's act")
    return bad


def check_progress(soak):
    """The loop never stalls: every worker takes turns in the day's last
    quarter (a crew whose workers wait for ever would keep every other
    promise by doing nothing)."""
    since = soak.t_end - (soak.t_end - soak.t0_day) / 4
    return [f"{name} took no turn after {since - soak.t0:.0f}s (the day's last quarter)"
            for name in soak.names
            if not any(r.kind == "turn-started" and records.parse_timestamp(r.ts) >= since
                       for r in status_records(soak.crew, name))]


def check_jobs(soak, fig):
    bad = []
    r = subprocess.run([sys.executable, os.path.join(BIN, "job-ls"), "--json"],
                       capture_output=True, text=True, timeout=60)
    try:
        jobs = json.loads(r.stdout)
    except ValueError:
        return [f"job-ls --json: exit {r.returncode}: {r.stderr.strip()}"]
    heard, again = {}, 0
    shown_to = {n: shown(soak.rigs[n].log) for n in soak.names if n in soak.rigs}
    drained = {n: set(re.findall(r" job (j-[0-9a-f]+) ", read_text(
        soak.crew.session_file(n, paths.INBOX_READ)))) for n in soak.names}
    for job in jobs:
        h, owner = job.get("handle"), job.get("session")
        heard[job.get("heard")] = heard.get(job.get("heard"), 0) + 1
        notices = [at for at, t in shown_to.get(owner, []) if "crewfile notice" in t
                   and f"job {h}" in t]
        if len(notices) > 1 and repeated_after_death(soak, owner, notices):
            again += 1
        elif len(notices) > 1:
            bad.append(f"job {h} of {owner}: its outcome reached the model {len(notices)} times")
        if not notices and h in drained.get(owner, set()) and job.get("ended") \
                and records.parse_timestamp(job["ended"]) < soak.t_end - IN_FLIGHT:
            bad.append(f"job {h} of {owner}: its notice was drained but never reached the model")
        if job.get("heard") == "wait" and notices:
            bad.append(f"job {h} of {owner}: heard by job-wait and announced as well")
        # unheard (heard null): said by the announcement when its owner was
        # not live (the outcome stays listed as unheard, as designed)
        if job.get("heard") is None and job.get("ended") and not job.get("announce_reason") \
                and records.parse_timestamp(job["ended"]) < soak.t_end - HEARD_WITHIN:
            bad.append(f"job {h} of {owner}: ended at {job['ended']}, never heard nor said why")
    fig["jobs"] = len(jobs)
    fig["job outcomes shown again after their agent was killed"] = again
    fig["jobs heard"] = ", ".join(f"{k or 'unheard (owner not live)'}: {v}"
                                  for k, v in sorted(heard.items(), key=str))
    return bad


def check_crewup(soak, fig):
    gaps = soak.samples.gaps
    fig["crew-up down"] = (f"{len(gaps)} time(s), longest {max(g for g, _ in gaps):.1f} s"
                           if gaps else "never")
    return [f"crew-up's pipe down {g:.1f} s ({why}): more than a restart ({RESTART_BOUND:g} s)"
            for g, why in gaps if g > RESTART_BOUND]


def check_rss(soak, fig):
    bad, peak = [], {}
    for pid, (command, kb) in soak.samples.rss.items():
        peak[command] = max(peak.get(command, 0), max(kb))
        if len(kb) >= 20:
            q = len(kb) // 4
            early, late = statistics.median(kb[:q]), statistics.median(kb[-q:])
            if late > early * RSS_GROWTH and late - early > RSS_SLACK:
                bad.append(f"{command} pid {pid} grew from {early:.0f} kB to {late:.0f} kB"
                           f" ({len(kb)} samples)")
    fig["peak RSS per command (MB)"] = ", ".join(f"{c} {kb / 1024:.1f}"
                                                for c, kb in sorted(peak.items()))
    return bad


def check_left(soak):
    found = left_behind(soak.mark, os.getpid())
    deadline = time.monotonic() + 30
    while found and time.monotonic() < deadline:     # a job's sleep ends by itself
        time.sleep(0.5)
        found = left_behind(soak.mark, os.getpid())
    for pid in found:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return [f"left alive after the run: pid {pid}: {c}" for pid, c in sorted(found.items())]


# ------------------------------------------------------------------ figures
def percentiles(xs):
    if not xs:
        return "-"
    xs = sorted(xs)
    p50, p99 = xs[len(xs) // 2], xs[min(len(xs) - 1, int(len(xs) * 0.99))]
    return f"p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms ({len(xs)} wakes)"


def figures(soak, fig):
    used, kinds, wake = {}, {}, 0
    for name in ["firstmate", *soak.names]:
        path = Session(soak.crew, name).meta.get("transcript_path")
        found = tokens.session_used(path, tokens.read) if path else None
        used[name] = found.total if found else 0
        wake += found.wake if found and name == "firstmate" else 0
        for r in status_records(soak.crew, name):
            kinds.setdefault(name, {}).setdefault(r.kind, []).append(r)
    total = sum(used.values()) or 1
    fig["tokens (by text: ~4 characters a token)"] = ", ".join(
        f"{n} {tokens.text(u)}" for n, u in used.items())
    fig["primary's share of the crew's tokens"] = (
        f"{100 * used['firstmate'] / total:.1f} % ({100 * wake / total:.1f} % in wake turns)")
    crew_records = sum(len(status_records(soak.crew, os.path.basename(os.path.dirname(p))))
                       for p in glob.glob(os.path.join(soak.crew.root, "sessions", "*", "meta"))
                       if not p.endswith("/firstmate/meta"))
    fig["records by the crew / wakes posted / primary turns"] = (
        f"{crew_records} / {fig.get('wakes posted', '-')} /"
        f" {len(kinds.get('firstmate', {}).get('turn-ended', []))}")
    p_turns = len(kinds.get("firstmate", {}).get("turn-ended", []))
    w_turns = sum(len(kinds.get(n, {}).get("turn-ended", [])) for n in soak.names)
    tasks = sum(len(kinds.get(n, {}).get("done", [])) for n in soak.names)
    fig["primary turns / worker turns / tasks done"] = f"{p_turns} / {w_turns} / {tasks}"
    calls = sum(1 for r in requests(soak.rigs["firstmate"].log) if r.get("main"))
    fig["primary turns per worker task"] = f"{p_turns / tasks:.2f}" if tasks else "-"
    # a turn the Stop hook keeps going with new wakes is one turn of many
    # round trips: the model requests are the primary's real work
    fig["primary model requests per worker task"] = f"{calls / tasks:.2f}" if tasks else "-"
    nudges = {}
    for n in soak.names:
        for kind, recs in kinds.get(n, {}).items():
            if not kind.startswith("nudge"):
                continue
            for r in recs:
                key = kind if kind != "nudge-refused" else \
                    f"refused {(r.text.split(' ') + ['', ''])[1].rstrip(':')}"
                nudges[key] = nudges.get(key, 0) + 1
    fig["nudges"] = ", ".join(f"{k} {v}" for k, v in sorted(nudges.items())) or "none"
    cpu = sum(s for _, s in soak.samples.cpu.values())
    hours = max(soak.t_end - soak.t0_day, 1) / 3600
    sessions = len(soak.names) + 1
    fig["crewfile CPU (its commands, sampled)"] = (
        f"{cpu:.1f} s: {cpu / (sessions * hours):.1f} s per session-hour")
    other_workers(soak, fig, kinds)
    svg = os.path.join(soak.root, "timeline.svg")
    r = subprocess.run([sys.executable, os.path.join(BIN, "crew-timeline"), "--svg", svg],
                       capture_output=True, text=True, timeout=120)
    fig["timeline"] = svg if r.returncode == 0 else f"crew-timeline exit {r.returncode}:" \
                                                    f" {r.stderr.strip()}"


# What differs for a Codex or a Gemini worker, and why (docs/soak.md, "Codex
# workers", "Gemini workers"): none of the day's disturbances is skipped for it.
DIFFERS = {
    "Codex": ("no /exit in the day (Codex's interactive /exit fires no SessionEnd)",
              "its commands run outside Codex's sandbox (sandbox_mode danger-full-access):"
              " inside it a background job ends with the tool call that started it"),
    "Gemini": ("its shell tool runs without asking (-y), as a Claude worker's --allowedTools"
               " Bash",
               "typing: checked with model steering on (a line typed while it works reaches"
               " the model as a steering update); Gemini's default queues such a line and"
               " sends it as a prompt of its own after the turn, which no request shows"),
}


def other_workers(soak, fig, kinds):
    """The Codex and Gemini workers, their turns and tasks, and what differs for them."""
    for agent, names in (("Codex", getattr(soak, "codex", ())),
                         ("Gemini", getattr(soak, "gemini", ()))):
        names = sorted(names)
        if not names:
            continue
        turns = sum(len(kinds.get(n, {}).get("turn-ended", [])) for n in names)
        tasks = sum(len(kinds.get(n, {}).get("done", [])) for n in names)
        fig[f"{agent} workers (turns / tasks done)"] = f"{', '.join(names)} ({turns} / {tasks})"
        victim = soak.names[0]      # disturb.Disturb's: the lone agent kill
        killed = (f"the lone agent kill falls on {victim}, a {agent} worker (its dead pane"
                  " recorded)" if victim in names else
                  f"the lone agent kill falls on {victim}, not a {agent} worker: no {agent}"
                  " dead pane is recorded; the tmux server's kill ends the"
                  f" {agent} workers too, and crew-respawn resumes them")
        fig[f"for a {agent} worker"] = "; ".join((killed, *DIFFERS[agent]))


CONTINUOUS = (("dead pane", check_recorders), ("typing", check_typing), ("asides", check_asides))


def during(soak):
    """The checks that read only what is final once written, run while the
    day goes on: a violation is said (and kept) when it is first seen."""
    for what, check in CONTINUOUS:
        for line in check(soak):
            if (what, line) not in soak.violations:
                soak.violations.append((what, line))
                soak.say(f"VIOLATION [{what}] {line}")


def lever_lines(soak):
    """levers.py's figures for this day; a day they cannot be read from says why
    (figures, not an invariant: no violation)."""
    try:
        rows, reach, info = levers.figures(soak.root, "firstmate")
        return levers.text(rows, reach, info, "firstmate")
    except Exception as e:
        return [f"not computed: {type(e).__name__}: {e}"]


def report(soak):
    fig, v = {}, soak.violations
    steps = [("wakes", lambda: check_wakes(soak, fig)),
             *((what, lambda check=check: check(soak)) for what, check in CONTINUOUS),
             ("jobs", lambda: check_jobs(soak, fig)), ("progress", lambda: check_progress(soak)),
             ("crew-up", lambda: check_crewup(soak, fig)), ("rss", lambda: check_rss(soak, fig)),
             ("figures", lambda: figures(soak, fig) or []),
             ("processes", lambda: check_left(soak))]
    for what, step in steps:
        if not hasattr(soak, "t_end"):
            soak.t_end = time.time()
        if not hasattr(soak, "t0_day"):
            soak.t0_day = soak.t_end
        try:
            v += [(what, line) for line in step() if (what, line) not in v]
        except Exception as e:          # a check that cannot run is a violation too
            v.append((what, f"the check failed: {type(e).__name__}: {e}"))
    path = os.path.join(soak.root, "report.txt")
    lines = [f"crewfile soak: seed {soak.seed}, {len(soak.names)} workers,"
             f" {soak.duration:g} s day (day {getattr(soak, 'digest', '-')})", ""]
    lines += ["Figures:"] + [f"  {k}: {val}" for k, val in fig.items()] + [""]
    lines += ["The primary's share under each lever (tests/soak/levers.py,"
              " docs/soak.md):"] + [f"  {line}" for line in lever_lines(soak)] + [""]
    lines += ["The day:"] + [f"  {at:7.1f}s {what}" for at, what in soak.events] + [""]
    lines += [f"Violations: {len(v)}"] + [f"  [{what}] {line}" for what, line in v]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path
