"""The primary's share of the crew's tokens, as measured and under each lever (issue 34).

    python tests/soak/levers.py ROOT [--primary NAME] [--cap N] [--summary N]
                                     [--window W] [--settle S]

ROOT is a finished soak's directory (tests/soak/soak.py): each agent's HOME
(its transcripts) and request log. Every figure is computed from the same
requests the agents sent, replayed with one stated rule per lever; nothing
is sampled or guessed but the two sizes named below (--summary, and the
compaction prompt, measured). The rules (docs/soak.md, "The primary's
share, and the way to 10 %"):

  * measured: every request's usage as the stand-in reported it and the
    transcript kept it (input, cache fields, output), as crewfile's tokens
    view counts it.
  * billed as the API bills: a request's prefix that the same agent already
    sent, less than CACHE_TTL seconds before, is a cache read (0.1 of an
    input token); the rest of its input is a cache write (1.25; Claude Code
    marks the end of every request for caching); output 5 input tokens (the
    list price's ratio). Figures in input-token equivalents.
  * a context cap of N tokens: before a request whose input would pass N
    the conversation is compacted: one request of the whole conversation and
    the CLI's compaction prompt, answered by a summary of --summary tokens;
    the conversation then starts again from the agent's first request and
    the summary. N defaults to the threshold Claude Code 2.1.332 was
    measured to compact at (tests/CLAUDE_FINDINGS.md, "Auto-compact").
  * no inbox-drain round trip: where the primary ran inbox-drain although
    its hook had handed it the wakes in that very request, the request that
    carried the drain's result is not sent (its content, the wakes drained
    since, is shown in the next request instead) and the drain call is gone.
  * coalescing over W seconds: a primary round (the requests from one
    hand-over of wakes to the reply that ends it) that starts within W s of
    the start of the round it would join is answered in that round: its
    requests are not sent, its content is shown in the next request.
  * no bare turn-ended: a round whose every wake is a worker's turn-ended
    that came within S s after a done or blocked of that worker (the turn's
    news already woke the primary) is not woken at all.

The removed requests' outputs: a request not sent leaves its output to the
request before it (a drain call is replaced by the action that followed).
"""
import argparse
import glob
import json
import os
import sys
from datetime import datetime

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(os.path.dirname(HERE))]

from model_server import WAKE_EVENT  # noqa: E402  (tests/, the stand-in's own reading of a wake)

PRIMARY = "firstmate"
# Claude Code 2.1.332 with a 1M-token model compacted after a reply whose
# usage (input with cache reads, and output) came to 968,002 but not after
# 966,002: the CLI's threshold, consistent with 1M - 20k (the summary's
# reserve) - 13k (its buffer). tests/CLAUDE_FINDINGS.md, "Auto-compact".
CLI_CAP = 967_000
COMPACT_PROMPT = 1_800    # tokens: the CLI's compaction prompt (7,306 characters, measured)
SUMMARY = 3_000           # tokens: a summary's size (the model's choice: an assumption)
CACHE_TTL = 300           # seconds: the API's default cache lifetime
READ, WRITE, OUTPUT = 0.1, 1.25, 5.0
HANDED = "crewfile notice: wake"       # the hook's hand-over of a wake, in what the model is shown
DRAIN = "inbox-drain"
NEWS = ("done", "blocked")
TARGET = 0.10


class Request:
    """One main-loop request of an agent: when, what it cost, what it showed."""
    __slots__ = ("t", "input", "output", "new", "reset", "wakes", "handed", "drain", "ends")

    def __init__(self, t, input, output, new, reset=False, wakes=(), handed=False,
                 drain=False, ends=False):
        self.t, self.input, self.output, self.new, self.reset = t, input, output, new, reset
        self.wakes, self.handed, self.drain, self.ends = list(wakes), handed, drain, ends


def _time(ts):
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def _entries(home):
    """The main-thread lines of every transcript under HOME, in time order."""
    out = []
    for path in glob.glob(os.path.join(home, ".claude", "projects", "*", "*.jsonl")):
        with open(path, errors="replace") as f:
            for line in f:
                try:
                    d = json.loads(line)
                except ValueError:
                    continue                # a torn or foreign line: another program's file
                if isinstance(d, dict) and not d.get("isSidechain") and d.get("timestamp"):
                    out.append(d)
    out.sort(key=lambda d: d["timestamp"])
    return out


def requests(home):
    """The agent's requests, from its transcripts: one per assistant message
    (a message written in several lines counts once), with what was new in
    it (the lines since the last one) and the usage it reported."""
    out, seen, shown = [], set(), []
    for d in _entries(home):
        if d.get("type") != "assistant":
            if d.get("type") in ("user", "attachment"):
                shown.append(json.dumps(d.get("message") or d.get("attachment")))
            continue
        msg = d.get("message") or {}
        if msg.get("id") in seen or not isinstance(msg.get("usage"), dict):
            continue
        seen.add(msg.get("id"))
        u = msg["usage"]
        inp = sum(u.get(k) or 0 for k in ("input_tokens", "cache_creation_input_tokens",
                                          "cache_read_input_tokens"))
        text = "\n".join(shown)
        shown = []
        calls = [b.get("input", {}).get("command", "") for b in msg.get("content") or []
                 if isinstance(b, dict) and b.get("type") == "tool_use"]
        out.append(Request(_time(d["timestamp"]), inp, u.get("output_tokens") or 0, 0,
                           wakes=sorted(set(WAKE_EVENT.findall(text.replace("\\n", "\n")))),
                           handed=HANDED in text,
                           drain=any(c.strip().startswith(DRAIN) for c in calls),
                           ends=msg.get("stop_reason") == "end_turn"))
    prev = None
    for r in out:
        # what was new: the input less what the conversation held before it
        # (the last input and its reply); less than nothing: a new conversation
        grown = r.input - (prev.input + prev.output) if prev else -1
        r.reset, r.new = grown < 0, (r.input if grown < 0 else grown)
        prev = r
    return out


def logged(root, name):
    """How many main-loop requests the agent's request log holds."""
    try:
        with open(os.path.join(root, name, "requests.log"), errors="replace") as f:
            return sum(1 for line in f if '"main": true' in line or '"tools"' in line)
    except OSError:
        return 0


def agents(root, primary=PRIMARY):
    """{name: [Request]} for every agent with a HOME under ROOT."""
    out = {}
    for home in sorted(glob.glob(os.path.join(root, "*", "home"))):
        name = os.path.basename(os.path.dirname(home))
        reqs = requests(home)
        if reqs or name == primary:
            out[name] = reqs
    return out


def records(root, name):
    """(time, kind) of a session's status records, its rotations included."""
    out = []
    for path in sorted(glob.glob(os.path.join(root, "crew", "sessions", name, "status*"))):
        with open(path, errors="replace") as f:
            for line in f:
                ts, _, rest = line.partition(" ")
                kind = rest.split(":", 1)[0].strip()
                try:
                    out.append((_time(ts), kind))
                except ValueError:
                    continue
    return sorted(out)


# ---------------------------------------------------------------------- the rules

def rounds(reqs):
    """The primary's rounds: [first, last] index of each run of requests
    up to and including a reply that ends the turn."""
    out, start = [], 0
    for i, r in enumerate(reqs):
        if r.ends:
            out.append((start, i))
            start = i + 1
    if start < len(reqs):
        out.append((start, len(reqs) - 1))
    return out


def drains(reqs):
    """Requests carrying the result of a drain the hook made needless."""
    return {i + 1 for i, r in enumerate(reqs[:-1]) if r.drain and r.handed}


def coalesced(reqs, window):
    """Requests of the rounds that start within WINDOW s of their group's first."""
    gone, first = set(), None
    for a, b in rounds(reqs):
        if first is not None and reqs[a].t - first <= window:
            gone.update(range(a, b + 1))
        else:
            first = reqs[a].t
    return gone


def bare_turn_ends(reqs, news_of, settle):
    """Requests of the rounds woken only by turn-endeds that came within
    SETTLE s after a done or blocked of their session. *news_of*: session
    -> sorted times of its done/blocked records."""
    gone = set()
    for a, b in rounds(reqs):
        wakes = [w for i in range(a, b + 1) for w in reqs[i].wakes]
        if wakes and all(kind == "turn-ended" and _news_before(news_of.get(who, ()), _time(ts), settle)
                         for ts, who, kind in wakes):
            gone.update(range(a, b + 1))
    return gone


def _news_before(times, t, settle):
    return any(t - settle <= x <= t for x in times)


def replay(reqs, gone=(), keep=(), cap=None, summary=SUMMARY):
    """The requests sent when those in *gone* are not: [(time, input, output,
    cached)], *cached* the prefix the agent already sent (its last request's
    input; none after a new conversation or a compaction). A request gone
    leaves its output to the one before it; its new content, if its index is
    in *keep*, goes to the next request sent. With *cap*, a compaction
    request (and a fresh conversation) before a request that would pass it."""
    out, size, carry, base, last = [], 0, 0, None, None
    for i, r in enumerate(reqs):
        if r.reset:
            size, carry, last = 0, 0, None
            base = r.new if base is None else base
        if i in gone:
            if i in keep:
                carry += r.new
            if out:
                size += r.output - out[-1][2]
                out[-1] = out[-1][:2] + (r.output,) + out[-1][3:]
            continue
        want = size + r.new + carry
        cached = last or 0
        if cap and want > cap and not r.reset:
            out.append((r.t, size + COMPACT_PROMPT, summary, cached))
            size, cached = base + summary, 0
            want = size + r.new + carry
        out.append((r.t, want, r.output, cached))
        carry, last = 0, want
        size = want + r.output
    return out


def counted(sent):
    """Tokens as the tokens view counts them: input and output."""
    return sum(inp + out for _, inp, out, _ in sent)


def billed(sent):
    """Input-token equivalents as the API bills: cache reads, writes, output."""
    total, prev_t = 0.0, None
    for t, inp, out, cached in sent:
        read = cached if prev_t is not None and t - prev_t <= CACHE_TTL else 0
        read = min(read, inp)
        total += READ * read + WRITE * (inp - read) + OUTPUT * out
        prev_t = t
    return total


# ---------------------------------------------------------------------- the figures

class Day:
    """A finished soak's requests, ready to be replayed under each lever."""

    def __init__(self, root, primary=PRIMARY):
        self.root, self.primary = root, primary
        self.agents = agents(root, primary)
        self.workers = [n for n in self.agents if n != primary]
        p = self.agents.get(primary, [])
        news = {}
        for who in {w[1] for r in p for w in r.wakes}:
            news[who] = [t for t, kind in records(root, who) if kind in NEWS]
        self.news = news

    def share(self, cost=counted, cap=None, summary=SUMMARY, drain=False, window=None,
              settle=None):
        """(primary, workers, share) under the rules asked for."""
        p = self.agents.get(self.primary, [])
        gone, keep = set(), set()
        if drain:
            d = drains(p)
            gone |= d
            keep |= d
        if window:
            c = coalesced(p, window)
            gone |= c
            keep |= c
        if settle:
            gone |= bare_turn_ends(p, self.news, settle)
        mine = cost(replay(p, gone, keep, cap, summary))
        theirs = sum(cost(replay(self.agents[w], cap=cap, summary=summary)) for w in self.workers)
        whole = mine + theirs
        return mine, theirs, (mine / whole if whole else 0.0)


def figures(root, primary=PRIMARY, cap=CLI_CAP, summary=SUMMARY, window=10.0, settle=2.0):
    """[(lever, rule, primary, workers, share)], then what reaches TARGET."""
    day = Day(root, primary)
    p = day.agents.get(primary, [])
    rows = []

    def row(lever, rule, **kw):
        mine, theirs, share = day.share(**kw)
        rows.append((lever, rule, mine, theirs, share))

    row("measured", "usage as reported, every request")
    row("billed as the API bills", f"cache read {READ}, write {WRITE}, output {OUTPUT:g}"
        f" (TTL {CACHE_TTL} s)", cost=billed)
    row(f"context cap {_n(cap)}", f"compacted past {_n(cap)}, summary {_n(summary)}",
        cap=cap, summary=summary)
    row("no inbox-drain round trip", f"{len(drains(p))} drain results not sent", drain=True)
    row(f"coalescing {window:g} s", f"{len(coalesced(p, window))} requests of rounds"
        f" within {window:g} s answered in one", window=window)
    row(f"no bare turn-ended ({settle:g} s)",
        f"{len(bare_turn_ends(p, day.news, settle))} requests of rounds woken only by them",
        settle=settle)
    row("all of these", "billed, capped, no drain, coalesced, no bare turn-ended",
        cost=billed, cap=cap, summary=summary, drain=True, window=window, settle=settle)
    # the narrowest window first (each second of it is latency), then the
    # largest cap (each compaction loses detail); else the lowest share tried
    reach, best = None, None
    for w in (window, 30.0, 60.0, 120.0):
        for n in (cap, 200_000, 100_000, 50_000, 30_000, 20_000):
            mine, theirs, share = day.share(cost=billed, cap=n, summary=summary, drain=True,
                                            window=w, settle=settle)
            if best is None or share < best[3]:
                best = (f"cap {_n(n)}, coalescing {w:g} s", mine, theirs, share)
            if share <= TARGET:
                reach = (f"all of these with a cap of {_n(n)} and coalescing over {w:g} s",
                         mine, theirs, share)
                break
        if reach:
            break
    if reach is None:
        reach = (f"not reached by these levers (lowest: {best[0]})",) + best[1:]
    grid = {(w, n): day.share(cost=billed, cap=n, summary=summary, drain=True, window=w,
                              settle=settle)[2]
            for w in (window, 30.0, 60.0) for n in (cap, 200_000, 50_000)}
    info = {"requests": {n: len(r) for n, r in day.agents.items()}, "grid": grid,
            "turn-ended": bare_counts(p, day, settle),
            "logged": {n: logged(root, n) for n in day.agents},
            "rounds": len(rounds(p)),
            "peak": max((r.input for r in p), default=0)}
    return rows, reach, info


def bare_counts(reqs, day, settle):
    """(turn-ended wakes shown, those within SETTLE s after a done/blocked of
    their session, those with one within SETTLE s after them)."""
    shown = {w for r in reqs for w in r.wakes if w[2] == "turn-ended"}
    before = after = 0
    for ts, who, _ in shown:
        t, times = _time(ts), day.news.get(who, ())
        before += _news_before(times, t, settle)
        after += any(t < x <= t + settle for x in times)
    return len(shown), before, after


def _n(n):
    return f"{n / 1e6:.3g}M" if n >= 1e6 else f"{n / 1e3:.3g}k" if n >= 1e3 else f"{n:g}"


def text(rows, reach, info, primary=PRIMARY):
    """The figures as lines of the soak's report."""
    req = info["requests"]
    out = [f"requests (transcripts / logs): {primary} {req.get(primary, 0)} /"
           f" {info['logged'].get(primary, 0)}, workers"
           f" {sum(v for k, v in req.items() if k != primary)} /"
           f" {sum(v for k, v in info['logged'].items() if k != primary)};"
           f" primary rounds {info['rounds']}, its largest request {_n(info['peak'])}"]
    for lever, rule, mine, theirs, share in rows:
        out.append(f"{lever}: {100 * share:.1f} % (primary {_n(mine)}, workers {_n(theirs)};"
                   f" {rule})")
    shown, before, after = info["turn-ended"]
    out.append(f"turn-ended wakes shown: {shown}; within the settle time after their"
               f" session's done/blocked: {before}; followed by one within it: {after}")
    out.append("all of these, by cap and coalescing window: " + "; ".join(
        f"{_n(n)} {w:g} s {100 * v:.1f} %" for (w, n), v in info["grid"].items()))
    what, mine, theirs, share = reach
    out.append(f"to reach {100 * TARGET:g} %: {what}: {100 * share:.1f} %"
               f" (primary {_n(mine)}, workers {_n(theirs)})")
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("root", help="a finished soak's directory")
    p.add_argument("--primary", default=PRIMARY, help=f"the primary's name (default {PRIMARY})")
    p.add_argument("--cap", type=int, default=CLI_CAP,
                   help=f"context cap in tokens (default {CLI_CAP}, the CLI's)")
    p.add_argument("--summary", type=int, default=SUMMARY,
                   help=f"a compaction summary's tokens (default {SUMMARY})")
    p.add_argument("--window", type=float, default=10.0,
                   help="coalescing window in seconds (default 10)")
    p.add_argument("--settle", type=float, default=2.0,
                   help="seconds a turn-ended follows a done/blocked (default 2)")
    a = p.parse_args(argv)
    if not os.path.isdir(a.root):
        print(f"levers: {a.root}: not a directory", file=sys.stderr)
        return 2
    rows, reach, info = figures(a.root, a.primary, a.cap, a.summary, a.window, a.settle)
    for line in text(rows, reach, info, a.primary):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
