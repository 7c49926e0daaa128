"""The crew over time, as a picture: one lane per session, from the crew
directory alone (a copy from another machine draws the same; what each bar
and mark comes from: docs/commands/crew-timeline.md). Text from the files is
escaped twice: records.escape (no control character), then as XML.
"""
import html
import time

from crewfile.background.jobs import list_jobs
from crewfile.core import logfile, records
from crewfile.core.errors import CrewfileError
from crewfile.core.kinds import BLOCKERS, KEEPS_PAUSE, MOVES_ON
from crewfile.core.text import escape
from crewfile.session import reader, sessions
from crewfile.wake import inbox

# span kinds, drawn as bars: kind -> (colour, legend)
SPANS = {"turn": ("#2e9e44", "turn (generating)"), "idle": ("#d5d8dc", "idle"),
         "dialog": ("#f1c40f", "permission dialog"), "blocked": ("#d62728", "blocked / problem"),
         "paused": ("#9b59b6", "paused: awaiting captain")}
SPAN_OF = {"turn-started": "turn", "waiting": "dialog", "turn-ended": "idle", "idle": "idle",
           "started": "idle", "registered": "idle", "respawned": "idle", "opened": "idle",
           "blocked": "blocked", "problem": "blocked", "error": "blocked", "paused": "paused"}
ENDS = ("ended", "closed")
# marks: kind -> (shape, colour, legend)
MARKS = {"nudge": ("down", "#1f77b4", "nudge delivered"),
         "nudge-unconfirmed": ("down", "#9edae5", "nudge unconfirmed (Entered, no turn recorded)"),
         "nudge-refused": ("cross", "#ff7f0e", "nudge refused / failed / disarmed"),
         "nudge-failed": ("cross", "#ff7f0e", None), "nudge-disarmed": ("cross", "#ff7f0e", None),
         "nudge-spent": ("cross", "#ff7f0e", None),
         "wake": ("dot", "#17becf", "wake sent to the primary"),
         "opened": ("diamond", "#8c564b", "aside opened / concluded / closed"),
         "concluded": ("diamond", "#8c564b", None), "closed": ("diamond", "#8c564b", None),
         "ended": ("bar", "#000000", "ended"),
         "captain": ("tick", "#555555", "captain typed")}
# jobs, drawn under the lane: outcome -> (colour, legend)
JOBS = {"ok": ("#2e9e44", "job: exited 0"), "failed": ("#d62728", "job: failed / killed"),
        "running": ("#7f7f7f", "job: running / unknown")}


class Lane:
    """One session's spans [(start, end, kind, text)] and marks [(t, kind, text)]."""

    def __init__(self, name, kind):
        self.name, self.kind = name, kind
        self.spans, self.marks, self.jobs = [], [], []


def lane_of(name, kind, recs, until):
    """The Lane drawn from *recs* (oldest first); an open span ends at *until*."""
    lane = Lane(name, kind)
    cur = None                  # (start, kind, text) of the open span
    for rec in recs:
        t = rec.time
        if rec.kind in MARKS and rec.kind != "wake":
            lane.marks.append((t, rec.kind, rec.text))
        span = SPAN_OF.get(rec.kind)
        if rec.kind in ENDS:
            span = None
        elif cur and (cur[1] == "paused" and rec.kind not in KEEPS_PAUSE
                      or cur[1] == "blocked" and rec.kind in MOVES_ON):
            span = span or "idle"           # the human wait or the block is over (glance.py's rules)
        elif span is None:
            continue
        elif cur and cur[1] in ("blocked", "paused") and span == "idle":
            continue                        # held until the session moves on
        elif cur and cur[1] == span and rec.kind not in BLOCKERS and rec.kind != "paused":
            continue
        if cur:
            lane.spans.append((cur[0], t, cur[1], cur[2]))
        cur = (t, span, f"{rec.kind}: {rec.text}" if rec.text else rec.kind) if span else None
    if cur:
        lane.spans.append((cur[0], max(until, cur[0]), cur[1], cur[2]))
    return lane


def wakes(crew, name, stats):
    """(time, text) of each wake notice in NAME's inbox and inbox.read files."""
    out, seen = [], set()
    for rec in logfile.records_backwards(inbox.every_file(crew, name), stats):
        nid, _, text = rec.text.partition(" ")
        if rec.kind == "wake" and nid not in seen:      # a notice delivered twice is one wake
            seen.add(nid)
            out.append((rec.time, text))
    return out


def build(crew, names=None, since=None, until=None):
    """(lanes, start, end, problems): the lanes of *names* (default: every
    session), clipped to [since, until]; problems: lines naming what could
    not be read (the rest is drawn)."""
    problems, raw = [], []
    for name in names or reader.names(crew):
        sess = sessions.Session(crew, name)
        stats = logfile.TailStats()
        try:
            kind = sess.meta.get("kind", "crew")
            # every record of the log and its rotations, oldest first
            recs = list(logfile.records_backwards(sess.log_paths(), stats))[::-1]
            woke = wakes(crew, name, stats) if kind == "primary" else []
        except CrewfileError as e:
            problems.append(f"{name}: {e}")
            continue
        if stats.warning():
            problems.append(f"{name}: {stats.warning()}")
        raw.append((name, kind, recs, woke))
    jobs = _jobs(crew, problems)
    times = [r.time for _, _, recs, _ in raw for r in recs] + [j[0] for j in jobs]
    if not times:                   # nothing recorded: the last hour, empty
        times = [time.time() - 3600, time.time()]
    start = since if since is not None else min(times)
    end = until if until is not None else max(times)
    if end <= start:
        end = start + 1
    jobs = [(a, end if b is None else b, o, x, s) for a, b, o, x, s in jobs]   # running: to the end
    lanes = []
    for name, kind, recs, woke in raw:
        lane = lane_of(name, kind, recs, end)
        lane.marks += [(t, "wake", text) for t, text in woke]
        lane.spans = [(max(a, start), min(b, end), k, x) for a, b, k, x in lane.spans
                      if b >= start and a <= end]
        lane.marks = sorted(m for m in lane.marks if start <= m[0] <= end)
        lane.jobs = [(max(a, start), min(b, end), o, x, s) for a, b, o, x, s in jobs
                     if s == name and b >= start and a <= end]
        lanes.append(lane)
    return lanes, start, end, problems


def _jobs(crew, problems):
    """(start, end, outcome, text, session) of every job with a session (end
    None while it runs)."""
    out = []
    for j in list_jobs(crew, full=False):
        if "error" in j:
            problems.append(f"job {j['handle']}: {j['error']}")
            continue
        if not j.get("session") or not j.get("created"):
            continue
        t0 = records.parse_timestamp(j["created"])
        if j.get("ended"):
            t1 = records.parse_timestamp(j["ended"])
            outcome = "ok" if j.get("code") == 0 else "failed"
            how = f"killed by signal {j['signal']}" if j.get("signal") else f"exited {j['code']}"
        else:
            t1, outcome, how = None, "running", j.get("state") or "running"
        text = f"job {j['handle']} ({j.get('label') or ''}): {how}"
        out.append((t0, t1, outcome, text, j["session"]))
    return out


# -- drawing --------------------------------------------------------------------

LEFT, RIGHT, TOP, LANE_H, BAR_H = 130, 20, 40, 34, 16
WIDTH = 1200


def _x(t, start, end):
    return LEFT + (t - start) / (end - start) * (WIDTH - LEFT - RIGHT)


def _text(s):
    """Text from the files, safe inside XML: no control character, markup escaped."""
    return html.escape(escape(s), quote=True)


def _clock(t, span):
    fmt = "%H:%M" if span < 2 * 86400 else "%m-%d %H:%M"
    return time.strftime(fmt, time.gmtime(t))


def _ticks(start, end):
    steps = (60, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800)
    step = next((s for s in steps if (end - start) / s <= 10), steps[-1])
    return range(int(start // step + 1) * step, -int(-end // 1), step)     # t < end


def _mark(shape, x, y, colour, title):
    t = f"<title>{title}</title>"
    if shape == "down":
        return (f'<path d="M{x - 5:.1f},{y - 12} L{x + 5:.1f},{y - 12} L{x:.1f},{y - 3} Z"'
                f' fill="{colour}">{t}</path>')
    if shape == "cross":
        return (f'<path d="M{x - 4:.1f},{y - 12} L{x + 4:.1f},{y - 4} M{x + 4:.1f},{y - 12}'
                f' L{x - 4:.1f},{y - 4}" stroke="{colour}" stroke-width="2.5">{t}</path>')
    if shape == "dot":
        return f'<circle cx="{x:.1f}" cy="{y + 12}" r="4" fill="{colour}">{t}</circle>'
    if shape == "diamond":
        return (f'<path d="M{x:.1f},{y - 7} L{x + 6:.1f},{y} L{x:.1f},{y + 7} L{x - 6:.1f},{y} Z"'
                f' fill="{colour}" stroke="#fff">{t}</path>')
    if shape == "bar":
        return (f'<rect x="{x - 1.5:.1f}" y="{y - 10}" width="3" height="20"'
                f' fill="{colour}">{t}</rect>')
    return (f'<rect x="{x - 0.5:.1f}" y="{y + 8}" width="1" height="5"'
            f' fill="{colour}">{t}</rect>')


def svg(lanes, start, end):
    """The picture: an SVG document (a string)."""
    legend = [(c, text, "span") for c, text in SPANS.values()] \
        + [(c, text, shape) for shape, c, text in MARKS.values() if text] \
        + [(c, text, "job") for c, text in JOBS.values()]
    rows_h = TOP + LANE_H * max(1, len(lanes))
    height = rows_h + 30 + 22 * -(-len(legend) // 4) + 16      # the legend: 4 a row
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}"'
           f' viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">',
           f'<rect width="{WIDTH}" height="{height}" fill="#ffffff"/>',
           f'<text x="{LEFT}" y="16" font-size="13">crew timeline, '
           f'{_text(records.timestamp(start))} .. {_text(records.timestamp(end))} (UTC)</text>']
    for t in _ticks(start, end):
        x = _x(t, start, end)
        out.append(f'<line x1="{x:.1f}" y1="{TOP - 8}" x2="{x:.1f}" y2="{rows_h}"'
                   f' stroke="#eeeeee"/>')
        out.append(f'<text x="{x:.1f}" y="{TOP - 12}" text-anchor="middle"'
                   f' fill="#444">{_clock(t, end - start)}</text>')
    if not lanes:
        out.append(f'<text x="{LEFT}" y="{TOP + 20}">no sessions in this range</text>')
    for i, lane in enumerate(lanes):
        y = TOP + i * LANE_H + LANE_H // 2
        label = lane.name + (f" ({lane.kind})" if lane.kind in ("aside", "primary") else "")
        out.append(f'<text x="{LEFT - 8}" y="{y + 4}" text-anchor="end">{_text(label)}'
                   f'<title>{_text(lane.name)}: {_text(lane.kind)}</title></text>')
        out.append(f'<line x1="{LEFT}" y1="{y}" x2="{WIDTH - RIGHT}" y2="{y}" stroke="#f4f4f4"/>')
        for a, b, k, text in lane.spans:
            x0, x1 = _x(a, start, end), _x(b, start, end)
            out.append(f'<rect x="{x0:.2f}" y="{y - BAR_H // 2}" width="{max(x1 - x0, 0.8):.2f}"'
                       f' height="{BAR_H}" fill="{SPANS[k][0]}"><title>{_text(lane.name)}: {k}'
                       f' {_clock(a, 0)}..{_clock(b, 0)} ({_text(text)})</title></rect>')
        for a, b, o, text, _s in lane.jobs:
            x0, x1 = _x(a, start, end), _x(b, start, end)
            out.append(f'<rect x="{x0:.2f}" y="{y + BAR_H // 2 + 1}" width="{max(x1 - x0, 2):.2f}"'
                       f' height="4" fill="{JOBS[o][0]}"><title>{_text(lane.name)}: {_text(text)}'
                       f' {_clock(a, 0)}..{_clock(b, 0)}</title></rect>')
        for t, kind, text in lane.marks:
            shape, c, _ = MARKS[kind]
            title = f"{_text(lane.name)} {_clock(t, 0)} {kind}" + (f": {_text(text)}" if text else "")
            out.append(_mark(shape, _x(t, start, end), y, c, title))
    ly = rows_h + 30
    out.append(f'<text x="10" y="{ly}" font-weight="bold">legend</text>')
    for n, (c, text, shape) in enumerate(legend):
        x, y = 80 + n % 4 * 280, ly + n // 4 * 22
        if shape == "span":
            out.append(f'<rect x="{x}" y="{y - 10}" width="18" height="12" fill="{c}"/>')
        elif shape == "job":
            out.append(f'<rect x="{x}" y="{y - 4}" width="18" height="4" fill="{c}"/>')
        else:
            out.append(_mark(shape, x + 9, y - 4 if shape != "dot" else y - 16, c, _text(text)))
        out.append(f'<text x="{x + 26}" y="{y}">{_text(text)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def page(picture, title="crew timeline"):
    """One self-contained HTML page holding the picture (hover: each mark's title)."""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_text(title)}</title>"
            "<style>body{font-family:sans-serif;margin:1em}svg{max-width:100%;height:auto}"
            "</style></head><body>\n"
            f"<h1>{_text(title)}</h1>\n<p>Hover over a mark or a bar for its record.</p>\n"
            f"{picture}</body></html>\n")
