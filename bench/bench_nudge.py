"""Nudges: nudge-tick over 1,000 and 10,000 schedules with 1,000 sessions; session-ls over
the 1,000 beside the one before the verdict; --watch latency."""
import json
import os
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "lib"))

SESSIONS = 1000
DUE_SHARE = 100          # one schedule in DUE_SHARE is due (its target is busy)


def build(b, crew, n_schedules, pane):
    """1,000 busy sessions in one live pane, each with its server and agent
    recorded (the verdict checks all of it); n schedules, 1% of them due."""
    from crewfile.core import clocks, records
    from crewfile.core.paths import Crew
    from crewfile.session.sessions import agent_fields, pane_fields
    c = Crew(crew)
    sessions = os.path.join(c.ensure_sub("sessions"))
    if not os.path.isdir(os.path.join(sessions, "s999")):
        ts = records.timestamp()
        where = pane_fields(pane, {"CREWFILE_TMUX": os.environ["CREWFILE_TMUX"]})
        pid = int(subprocess.run(["tmux", "-S", where["tmux_socket"], "display", "-p", "-t", pane,
                                  "#{pane_pid}"], capture_output=True, text=True).stdout)
        where.update(agent_fields(pid))
        for i in range(SESSIONS):
            d = os.path.join(sessions, f"s{i}")
            os.mkdir(d, 0o700)
            meta = {"name": f"s{i}", "kind": "crew", "exempt": False, "created": ts, "user": "u",
                    "cwd": f"/srv/tree{i}", "session_key": f"k{i}", **where}
            with open(os.path.join(d, "meta"), "w") as f:
                json.dump(meta, f)
            with open(os.path.join(d, "status"), "w") as f:
                f.write(f"{ts} registered: kind=crew\n{ts} turn-started\n")
    nd = c.ensure_sub("nudges")
    for name in os.listdir(nd):
        os.unlink(os.path.join(nd, name))
    now = clocks.clock_now()
    for j in range(n_schedules):
        i = j % SESSIONS
        base = dict(now)
        if j % DUE_SHARE == 0:
            base["mono"] -= 7200
            base["wall"] -= 7200
        s = {"id": f"n{j:08x}", "user": f"u{j // SESSIONS}", "session": f"s{i}",
             "session_key": f"k{i}", "agent_session_id": None, "every": 3600,
             "message": "continue", "max": 100, "attempts": 0, "armed": True,
             "created": records.timestamp(), "rev": f"r{j}", "base": base, "last_attempt": None,
             "last_outcome": None, "last_code": None, "last_reason": None, "last_change": None}
        with open(os.path.join(nd, s["id"]), "w") as f:
            json.dump(s, f)


def run(b):
    sockdir = tempfile.mkdtemp(prefix="cf-b-", dir="/tmp")
    sock = os.path.join(sockdir, "s")
    env = dict(b.env, CREWFILE_TMUX=sock)
    env.pop("TMUX", None)
    tmux = ["tmux", "-S", sock, "-f", "/dev/null"]
    pane = subprocess.run(tmux + ["new-session", "-d", "-s", "b", "-P", "-F", "#{pane_id}",
                                  "sleep 3600"], env=env, capture_output=True, text=True).stdout.strip()
    try:
        base = b.wall([b.python, "-c", "pass"], n=20, env=env)
        times = {}
        os.environ["CREWFILE_TMUX"] = sock
        for n in (1000, 10000):
            crew = os.path.join(b.tmp, "crew")
            build(b, crew, n, pane)
            e = dict(env, CREWFILE_DIR=crew)
            subprocess.run(b.cmd("nudge-tick") + ["--quiet"], env=e, check=True)   # first: records refusals
            times[n] = b.wall(b.cmd("nudge-tick") + ["--quiet"], n=7, env=e, warmup=1)
            b.figure(f"nudge-tick, {n:,} schedules ({n // DUE_SHARE} due, targets busy), "
                     f"{SESSIONS:,} sessions", times[n], base, base_label="python -c pass")
        b.figure("10,000 against 1,000 schedules (linear: <= 10x)", times[10000], times[1000],
                 budget=10.0, base_label="1,000")
        b.figure("nudge-tick over 10,000 schedules against the 1 s budget", times[10000], 1.0,
                 budget=1.0, base_label="budget")
        old = before_verdict(b)
        if old:
            e = dict(env, CREWFILE_DIR=os.path.join(b.tmp, "crew"))
            now_t, old_t = b.wall_pair(b.cmd("nudge-tick") + ["--quiet"],
                                       [b.python, os.path.join(old, "bin", "nudge-tick"), "--quiet"],
                                       n=5, env=e, warmup=1)
            b.figure("nudge-tick, 10,000 schedules, beside the one before the verdict", now_t, old_t,
                     base_label="nudge-tick before the verdict (pane only)")
        session_ls(b, env, os.path.join(b.tmp, "crew"))
        watch_latency(b, env, sock)
    finally:
        subprocess.run(tmux + ["kill-server"], env=env, capture_output=True)
        subprocess.run(["rm", "-rf", sockdir])


def before_verdict(b):
    """bin/ and lib/ as they were before the verdict (git's commit 9e0bd2b:
    liveness was the pane alone), or None without git."""
    old = os.path.join(b.tmp, "before-verdict")
    if not os.path.isdir(old):
        arch = subprocess.run(["git", "-C", REPO, "archive", "9e0bd2b", "bin", "lib"],
                              capture_output=True)
        if arch.returncode != 0:
            b.note("beside the pre-verdict commands: git archive failed, skipped")
            return None
        os.makedirs(old)
        subprocess.run(["tar", "-x", "-C", old], input=arch.stdout, check=True)
    return old


def session_ls(b, env, crew):
    """session-ls over the 1,000 sessions, beside the session-ls of before the
    verdict, run alternately."""
    e = dict(env, CREWFILE_DIR=crew)
    old = before_verdict(b)
    if not old:
        return
    new, before = b.wall_pair(b.cmd("session-ls"), [b.python, os.path.join(old, "bin", "session-ls")],
                              n=7, env=e, warmup=1)
    b.figure(f"session-ls, {SESSIONS:,} sessions (agent, pane and server checked)", new, before,
             base_label="session-ls before the verdict (pane only)")


def watch_latency(b, env, sock):
    """turn-ended -> nudge delivered: nudge-tick --watch against a one-shot tick run at once."""
    from crewfile.core import records
    crew = os.path.join(b.tmp, "crew-watch")
    e = dict(env, CREWFILE_DIR=crew, CREWFILE_SESSION="w1")
    tmux = ["tmux", "-S", sock, "-f", "/dev/null"]
    fake = os.path.join(REPO, "tests", "fake-agent")
    status = os.path.join(crew, "sessions", "w1", "status")

    def lat(mode, long_log=False):
        gate = os.path.join(b.tmp, "gate")
        holder = subprocess.Popen(["flock", "-o", gate, "sleep", "600"], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        while subprocess.run(["flock", "-n", gate, "true"]).returncode == 0:
            time.sleep(0.005)
        subprocess.run(["rm", "-rf", crew])
        pane = subprocess.run(tmux + ["new-window", "-d", "-t", "b:", "-P", "-F", "#{pane_id}",
                                      "-e", f"CREWFILE_DIR={crew}", "-e", "CREWFILE_SESSION=w1", fake],
                              env=e, capture_output=True, text=True).stdout.strip()
        pid = subprocess.run(tmux + ["display", "-p", "-t", pane, "#{pane_pid}"], env=e,
                             capture_output=True, text=True).stdout.strip()
        subprocess.run(b.cmd("session-add") + ["w1", "--tmux", pane, "--cwd", b.tmp, "--pid", pid],
                       env=e, check=True)
        if long_log:        # weeks of turns since its registration: all but the MiB a query reads
            turn = "".join(records.new_line(k) for k in ("turn-started", "turn-ended")).encode()
            with open(status, "ab") as f:
                f.write(turn * ((1 << 20) // len(turn) - 100))
        start = os.path.getsize(status)

        def new():
            with open(status) as f:
                f.seek(start)
                return f.read()
        _wait(lambda: "ready>" in _screen(tmux, pane, e))
        subprocess.run(b.cmd("nudge-add") + ["--session", "w1", "--every", "1", "--message", "nudged"],
                       env=e, check=True, stdout=subprocess.DEVNULL)
        subprocess.run(tmux + ["send-keys", "-t", pane, "-l", f"RUN: flock {gate} true"], env=e)
        subprocess.run(tmux + ["send-keys", "-t", pane, "Enter"], env=e)
        _wait(lambda: "turn-started" in new())
        time.sleep(1.1)                    # the schedule's 1 s floor passes during the turn
        watcher = None
        if mode == "watch":
            watcher = subprocess.Popen(b.cmd("nudge-tick") + ["--watch"], env=e,
                                       stdout=subprocess.PIPE, text=True)
            watcher.stdout.readline()      # its first tick: refused, generating
        holder.kill()
        holder.wait()
        if mode == "tick":
            _wait(lambda: "turn-ended" in new())
            while "delivered" not in subprocess.run(b.cmd("nudge-tick"), env=e, capture_output=True,
                                                    text=True).stdout:
                pass
        _wait(lambda: "captain: nudged" in new())
        if watcher:
            watcher.terminate()
            watcher.wait()
        subprocess.run(tmux + ["kill-pane", "-t", pane], env=e)
        recs = [records.parse(l) for l in new().splitlines()]
        ended = next(r.time for r in recs if r and r.kind == "turn-ended")
        got = next(r.time for r in recs if r and r.kind == "captain" and r.text == "nudged")
        return got - ended

    watch = sorted(lat("watch") for _ in range(5))[2]
    tick = sorted(lat("tick") for _ in range(5))[2]
    b.figure("turn-ended -> nudge typed and read, nudge-tick --watch", watch, tick,
             base_label="a cron tick that happens to run at turn-ended")
    b.note(f"goal (DESIGN.md): under 100 ms: {'OK' if watch < 0.100 else 'OVER'}")
    long = sorted(lat("watch", long_log=True) for _ in range(5))[2]
    b.figure("  the same, the session's log a MiB of turns since its registration", long, watch,
             base_label="a new log")
    b.note(f"goal (DESIGN.md): under 100 ms: {'OK' if long < 0.100 else 'OVER'}")
    b.note("(cron itself ticks once a minute: from turn-ended it waits 30 s on average, 60 s at worst)")


def _screen(tmux, pane, env):
    return subprocess.run(tmux + ["capture-pane", "-p", "-t", pane], env=env, capture_output=True,
                          text=True).stdout


def _wait(pred, timeout=30):
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise SystemExit("bench_nudge: timed out")
        time.sleep(0.005)
