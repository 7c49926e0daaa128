"""Volume: crew-status beside a primary's 50 MB pending inbox, against an empty one.

A view counts at most inbox.COUNT_LIMIT bytes of an inbox (`N+ wakes`), so
a huge inbox costs about what an empty one does (issue 30, item 5)."""
import os
import statistics
import subprocess
import time

LINE = (b"2026-11-29T22:01:17.123Z wake: 18c-1-1 2026-11-29T22:01:17.000Z w1 problem: "
        + b"x" * 150 + b"\n")


def crew_with_inbox(b, label, mb):
    """A crew (primary boss, crew w1) whose primary has *mb* MB of pending
    wakes; its environment."""
    env = dict(b.env, CREWFILE_DIR=os.path.join(b.tmp, label))
    subprocess.run(b.cmd("session-add") + ["boss", "--kind", "primary"], env=env, check=True)
    subprocess.run(b.cmd("session-add") + ["w1"], env=env, check=True)
    if mb:
        with open(os.path.join(env["CREWFILE_DIR"], "sessions", "boss", "inbox"), "ab") as f:
            f.write(LINE * (mb * 2**20 // len(LINE)))
    return env


def run(b, n=30, warmup=3):
    envs = {"big": crew_with_inbox(b, "big", 50), "empty": crew_with_inbox(b, "empty", 0)}
    said = subprocess.run(b.cmd("crew-status"), env=envs["big"], capture_output=True,
                          text=True).stdout.strip()
    b.note(f"crew-status beside 50 MB: {said}")
    # Alternately, each in its own crew (as Bench.wall_pair does in one).
    times = {"big": [], "empty": []}
    for i in range(n + warmup):
        for label, env in envs.items():
            t0 = time.perf_counter()
            subprocess.run(b.cmd("crew-status"), env=env, stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if i >= warmup:
                times[label].append(time.perf_counter() - t0)
    b.figure("crew-status, the primary's inbox 50 MB pending", statistics.median(times["big"]),
             statistics.median(times["empty"]), budget=2.0, base_label="an empty inbox")
