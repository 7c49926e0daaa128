"""Asides: captain-record start-up, the conclusion check on a long conversation, wake traffic of a 50-turn aside."""
import os
import subprocess
import sys


def run(b):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
    from crewfile.asides import reports
    from crewfile.core import records
    crew = os.path.join(b.tmp, "crew")
    env = dict(b.env, CREWFILE_DIR=crew)
    for name in ("small", "long"):
        subprocess.run(b.cmd("session-add") + [name, "--kind", "aside"], env=env, check=True)

    # aside-say runs once per captain input (where there is no prompt hook).
    # Run here, outside any tmux server, each run is refused (not the
    # captain: evidence.caller_verdict) and writes its `problem` record.
    base = b.wall([b.python, "-c", "pass"], n=40, env=env)
    say = b.wall(b.cmd("aside-say") + ["small", "hello"], n=40, env=env)
    b.figure("aside-say wall time (refused: not run by the captain)", say, base,
             base_label="python -c pass")

    # The conclusion check on a conversation of 6 MiB (five rotated logs full)
    # whose captain last typed 200 agent records ago, against a fresh aside.
    status = os.path.join(crew, "sessions", "long", "status")
    turn = "".join(records.new_line(k, "x" * 100) for k in ("captain", "turn-started", "turn-ended"))
    for i in range(5, 0, -1):
        with open(f"{status}.{i}", "w") as f:
            f.write(turn * ((1 << 20) // len(turn)))
    with open(status, "a") as f:
        f.write(turn * 2000 + records.new_line("turn-ended", "y" * 100) * 200)
    size = sum(os.path.getsize(f"{status}.{i}") if i else os.path.getsize(status) for i in range(6))
    b.note(f"long aside log: {size / 2**20:.1f} MiB in 6 files")
    report = os.path.join(b.tmp, "report")
    with open(report, "w") as f:
        f.write("r\n")
    small = b.wall(b.cmd("aside-conclude") + ["small", "--report", report], n=20, env=env)
    long_ = b.wall(b.cmd("aside-conclude") + ["long", "--report", report], n=20, env=env)
    b.figure("aside-conclude (refused) on a 6 MiB conversation", long_, small, budget=2.0,
             base_label="on a fresh aside")

    # Wake traffic: the same 50-turn trace as an aside and as a crew session.
    wakes = {}
    for kind in ("aside", "crew"):
        wcrew = os.path.join(b.tmp, f"wake-{kind}")
        wenv = dict(b.env, CREWFILE_DIR=wcrew)
        subprocess.run(b.cmd("session-add") + ["t", "--kind", kind], env=wenv, check=True)
        lines = [records.new_line("paused", "awaiting captain")]
        for i in range(50):
            lines += [records.new_line("captain", f"turn {i}"), records.new_line("turn-started"),
                      records.new_line("turn-ended"), records.new_line("idle"),
                      records.new_line("paused", "awaiting captain")]
        # the conclusion as aside-conclude leaves it: its report in reports/new/
        new = os.path.join(wcrew, "reports", "new")
        os.makedirs(new, exist_ok=True)
        delivered = os.path.join(new, reports.unique_name("t"))
        with open(delivered, "w") as f:
            f.write("the report\n")
        lines += [records.new_line("captain-done"), records.new_line("concluded", delivered)]
        with open(os.path.join(wcrew, "sessions", "t", "status"), "a") as f:
            f.write("".join(lines))
        out = subprocess.run(f"{b.python} {b.cmd('crew-watch')[1]} --from-start --once | "
                             f"{b.python} {b.cmd('wake-filter')[1]}", shell=True, env=wenv,
                             stdout=subprocess.PIPE, text=True).stdout
        wakes[kind] = len(out.splitlines())
    b.note(f"wakes of a 50-turn aside: {wakes['aside']} (budget 1: "
           f"{'OK' if wakes['aside'] == 1 else 'OVER'}); the same trace as a crew session: "
           f"{wakes['crew']}")
    b.figure("wakes of a 50-turn aside", wakes["aside"], wakes["crew"], unit="wakes",
             base_label="as a crew session")
