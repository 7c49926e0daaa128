"""Wake supervision: wakes on the reference trace, append-to-wake latency, wake-filter throughput.

And a backlog beside a healthy session: its append -> inbox latency, crew-watch's peak memory."""
import importlib.util
import os
import random
import select
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "lib"))

from crewfile.core.paths import Crew  # noqa: E402
from crewfile.session.sessions import Session, register  # noqa: E402

AWK = r"""
BEGIN {
  n = split("turn-ended done concluded blocked problem error stale lost waiting ended", a, " ")
  for (i = 1; i <= n; i++) normal[a[i]] = 1
  n = split("concluded problem blocked error lost", a, " ")
  for (i = 1; i <= n; i++) exempt[a[i]] = 1
  n = split(EXEMPT, a, " ")
  for (i = 1; i <= n; i++) isexempt[a[i]] = 1
}
{
  s = $2; k = $3; sub(/:$/, "", k)
  if (s in isexempt) ok = (k in exempt) && last[s] != k
  else {
    if (k == "paused") paused[s] = 1
    else if (paused[s] && k != "idle" && k != "stale") paused[s] = 0
    ok = (k in normal) && last[s] != k && !(paused[s] && (k == "idle" || k == "stale"))
  }
  last[s] = k
  if (ok) print
}
"""


def load_trace():
    spec = importlib.util.spec_from_file_location("crew_trace", os.path.join(REPO, "tests", "trace.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run(b):
    reference_trace(b)
    latency(b)
    throughput(b)
    startup(b)
    backlog(b)


def reference_trace(b):
    trace = load_trace()
    crew = Crew(os.path.join(b.tmp, "trace"))
    tr = trace.write(crew)
    env = dict(b.env, CREWFILE_DIR=crew.root)
    events = subprocess.run(b.cmd("crew-watch") + ["--from-start", "--once"], env=env,
                            capture_output=True, text=True, check=True).stdout
    wakes = subprocess.run(b.cmd("wake-filter"), input=events, env=env,
                           capture_output=True, text=True, check=True).stdout
    sc = trace.score(tr, wakes)
    every = trace.events(events)
    b.note("reference trace (aside `design`: 50 captain turns; crew w1 w2 w3; see tests/trace.py)")
    b.note(f"{'session':<8} {'no filter':>10} {'filter':>7} {'labelled':>9}")
    for name in ["design", "w1", "w2", "w3"]:
        raw = sum(1 for e in every if e[1] == name)
        lab = sum(1 for l in tr.labels if l.session == name)
        b.note(f"{name:<8} {raw:>10} {sc['per_session'].get(name, 0):>7} {lab:>9}")
    b.note(f"{'all':<8} {len(every):>10} {sc['wakes']:>7} {len(tr.labels):>9}"
           f"   missed: {len(sc['missed'])}, unlabelled wakes: {len(sc['extra'])}")
    b.figure("wakes to the primary with wake-filter", sc["wakes"], len(every), unit="wakes",
             base_label="without it")
    b.figure("aside wakes with wake-filter", sc["per_session"].get("design", 0),
             sum(1 for e in every if e[1] == "design"), unit="wakes", base_label="without it")
    b.note("the labelled actionable events, and why each matters:")
    for l in sorted(tr.labels, key=lambda l: (l.session, l.ts or "")):
        b.note(f"  {l.ts or '(at the probe)':<24} {l.session:<6} {l.kind:<10} {l.why}")


def _pipeline(b, env, watch_args):
    r1, w1 = os.pipe()
    r2, w2 = os.pipe()
    watch = subprocess.Popen(b.cmd("crew-watch") + watch_args, env=env, stdout=w1,
                             stderr=subprocess.DEVNULL)
    filt = subprocess.Popen(b.cmd("wake-filter"), env=env, stdin=r1, stdout=w2)
    for fd in (r1, w1, w2):
        os.close(fd)
    return watch, filt, r2


def _read_line(fd, buf, timeout=10):
    while b"\n" not in buf[0]:
        ready, _, _ = select.select([fd], [], [], timeout)
        if not ready:
            raise SystemExit("bench: the pipeline produced nothing")
        buf[0] += os.read(fd, 65536)
    line, buf[0] = buf[0].split(b"\n", 1)
    return line


def _latencies(b, env, crew, name, watch_args, trials, gap):
    sess = Session(crew, name)
    watch, filt, fd = _pipeline(b, env, watch_args)
    buf = [b""]
    try:
        while True:         # ready when a record comes through
            sess.append("turn-started")
            sess.append("blocked", "warm-up")
            ready, _, _ = select.select([fd], [], [], 1.5)
            if ready:
                break
        while select.select([fd], [], [], 1.5)[0]:     # drain the other warm-ups
            if not os.read(fd, 65536):
                break
        out = []
        rng = random.Random(3)
        for i in range(trials):
            sess.append("turn-started")
            time.sleep(gap[0] + rng.random() * (gap[1] - gap[0]))   # the watcher sleeps again
            t0 = time.perf_counter()
            sess.append("blocked", f"trial {i}")
            line = _read_line(fd, buf)
            out.append(time.perf_counter() - t0)
            assert line.endswith(f"trial {i}".encode()), line
        return out
    finally:
        watch.terminate()
        watch.wait()
        filt.wait()
        os.close(fd)


def latency(b):
    crew = Crew(os.path.join(b.tmp, "latency"))
    register(crew, "w1")
    register(crew, "w2")
    env = dict(b.env, CREWFILE_DIR=crew.root)
    ino = _latencies(b, env, crew, "w1", [], 200, (0.005, 0.01))
    # appends at random moments of the polling period, as they would come
    poll = _latencies(b, env, crew, "w2", ["--poll", "1"], 20, (0.0, 1.0))
    b.note(f"append -> line out of `crew-watch | wake-filter`: median {statistics.median(ino) * 1000:.2f} ms,"
           f" p90 {sorted(ino)[int(len(ino) * 0.9)] * 1000:.2f} ms over {len(ino)} trials"
           f" (budget: median under 50 ms)")
    b.figure("append -> wake line, inotify (median of 200)", statistics.median(ino),
             statistics.median(poll), base_label="`crew-watch --poll 1` (median of 20)")


def _event_file(b, crew):
    """1,000,000 event lines: four crew sessions and an aside, an ordinary mix."""
    path = os.path.join(b.tmp, "events")
    for name in ("w1", "w2", "w3", "w4"):
        register(crew, name)
    register(crew, "design", kind="aside")
    rng = random.Random(5)
    turn = ["captain: go on", "turn-started", "turn-ended", "idle"]
    aside = ["captain: what about the cache?", "turn-started", "turn-ended",
             "paused: awaiting captain", "idle"]
    rare = ["blocked: needs a password", "problem: disk full", "stale: silent for 10m since turn-started",
            "done: merged", "paused: awaiting captain"]
    ts = "2026-11-29T22:01:17.123Z"
    lines, n = [], 0
    while n < 1_000_000:
        name = rng.choice(("w1", "w2", "w3", "w4", "design"))
        seq = aside if name == "design" else turn
        for kind in seq:
            lines.append(f"{ts} {name} {kind}\n")
        if rng.random() < 0.05:
            lines.append(f"{ts} {name} {rng.choice(rare)}\n")
        n = len(lines)
    with open(path, "w") as f:
        f.write("".join(lines[:1_000_000]))
    return path


def _timed(argv, path, env, n=3):
    times, out = [], None
    for _ in range(n):
        with open(path, "rb") as src:
            t0 = time.perf_counter()
            p = subprocess.run(argv, stdin=src, stdout=subprocess.PIPE, env=env, check=True)
            times.append(time.perf_counter() - t0)
        out = p.stdout
    return statistics.median(times), out


def throughput(b):
    crew = Crew(os.path.join(b.tmp, "throughput"))
    path = _event_file(b, crew)
    env = dict(b.env, CREWFILE_DIR=crew.root)
    awk_t, awk_out = _timed(["awk", "-v", "EXEMPT=design", AWK], path, env)
    mode = os.environ.get("PYTHONUNBUFFERED", "")
    py_t, py_out = _timed(b.cmd("wake-filter"), path, env)
    other = dict(env)
    if mode:
        other.pop("PYTHONUNBUFFERED", None)
    else:
        other["PYTHONUNBUFFERED"] = "1"
    py2_t, py2_out = _timed(b.cmd("wake-filter"), path, other)
    same = "same output" if py_out == awk_out == py2_out else "OUTPUT DIFFERS"
    b.note(f"1,000,000 event lines ({os.path.getsize(path) / 1e6:.0f} MB), {len(py_out.splitlines())}"
           f" pass; wake-filter and awk agree: {same}")
    b.note(f"measured with PYTHONUNBUFFERED={mode!r} (the environment's), then with"
           f" PYTHONUNBUFFERED={other.get('PYTHONUNBUFFERED', '')!r}: {py2_t:.3f} s")
    # throughput ratio = awk time / our time: at least a third of awk's throughput
    b.figure("wake-filter throughput (awk time / wake-filter time)", awk_t / py_t, 1.0, unit="x",
             budget=1 / 3, base_label="mawk's", lower_is_better=False)
    b.note(f"wake-filter {py_t:.3f} s, mawk {awk_t:.3f} s, on the same file")


def startup(b):
    crew = Crew(os.path.join(b.tmp, "startup"))
    register(crew, "w1")
    register(crew, "a1", kind="aside")
    env = dict(b.env, CREWFILE_DIR=crew.root)
    base = b.wall([b.python, "-c", "pass"], n=30, env=env)
    t = b.wall(b.cmd("wake-filter"), n=30, env=env)
    b.figure("wake-filter start-up (empty input)", t, base, base_label="python -c pass")
    t = b.wall(b.cmd("crew-watch") + ["--once"], n=30, env=env)
    b.figure("crew-watch --once on 2 sessions", t, base, base_label="python -c pass")


# Backlog sizes in MB (BENCH_BACKLOG_MB, comma-separated): the latency beside
# each, and crew-watch's peak memory on the largest against 1 MB.
BACKLOG_MB = [int(x) for x in os.environ.get("BENCH_BACKLOG_MB", "50,1024").split(",")]


def _backlog_log(crew, name, mb):
    """*mb* MB of valid records appended to NAME's log as a shell writer does:
    no lock, no rotation."""
    from crewfile.core import records
    line = records.format_line(records.timestamp(time.time()), "note", "x" * 60).encode()
    block = line * ((1 << 20) // len(line))
    with open(Session(crew, name).status_path, "ab") as log:
        for _ in range(mb):
            log.write(block)


def _fresh_to_inbox(b, mb):
    """Seconds from w2's append of a `problem` (after a `blocked`: not folded)
    to its wake in boss's inbox, with `crew-watch --resume C | wake-filter |
    wake-send boss --cursor C` (as crew-up runs it) and w1's log *mb* MB
    behind (0: none)."""
    crew = Crew(os.path.join(b.tmp, f"backlog-{mb}"))
    register(crew, "boss", kind="primary")
    register(crew, "w1")
    register(crew, "w2")
    env = dict(b.env, CREWFILE_DIR=crew.root)
    cursor = os.path.join(b.tmp, f"cursor-{mb}")
    subprocess.run(b.cmd("crew-watch") + ["--resume", cursor, "--once"], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    pipe = subprocess.Popen(["sh", "-c", f'"$0" "$1" --resume "$2" | "$0" "$3" |'
                             f' "$0" "$4" boss --cursor "$2" --quiet',
                             b.python, os.path.join(REPO, "bin", "crew-watch"), cursor,
                             os.path.join(REPO, "bin", "wake-filter"),
                             os.path.join(REPO, "bin", "wake-send")],
                            env=env, start_new_session=True)
    inbox = os.path.join(crew.session_dir("boss"), "inbox")
    try:
        Session(crew, "w2").append("blocked", "warm-up")
        while not (os.path.exists(inbox) and b"warm-up" in open(inbox, "rb").read()):
            time.sleep(0.01)
        _backlog_log(crew, "w1", mb)
        time.sleep(0.5)                     # the pipe is in the backlog's midst
        t0 = time.perf_counter()
        Session(crew, "w2").append("problem", "fresh")
        while b"fresh" not in open(inbox, "rb").read():
            time.sleep(0.01)
        return time.perf_counter() - t0
    finally:
        os.killpg(pipe.pid, 15)
        pipe.wait()
        while True:                         # every stage gone, its last write done
            try:
                os.killpg(pipe.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)


def _watch_rss(b, mb):
    """Peak resident memory (MB) of `crew-watch --from-start --once` on an *mb* MB log."""
    crew = Crew(os.path.join(b.tmp, f"rss-{mb}"))
    register(crew, "w1")
    _backlog_log(crew, "w1", mb)
    proc = subprocess.Popen(b.cmd("crew-watch") + ["--from-start", "--once"],
                            env=dict(b.env, CREWFILE_DIR=crew.root), stdout=subprocess.DEVNULL)
    _, _, usage = os.wait4(proc.pid, 0)
    proc.returncode = 0
    return usage.ru_maxrss / 1024


def backlog(b):
    base = _fresh_to_inbox(b, 0)
    for mb in BACKLOG_MB:
        t = _fresh_to_inbox(b, mb)
        b.figure(f"append -> inbox of a healthy session, another {mb} MB behind", t, base,
                 base_label="none behind")
        b.note(f"goal: under 1 s: {'OK' if t < 1 else 'OVER'}")
    small, big = _watch_rss(b, 1), _watch_rss(b, max(BACKLOG_MB))
    b.figure(f"crew-watch --from-start --once peak RSS, {max(BACKLOG_MB)} MB log", big, small,
             unit="MB", base_label="1 MB log")
    b.note(f"goal: within 32 MB of each other: {'OK' if big - small <= 32 else 'OVER'}")
