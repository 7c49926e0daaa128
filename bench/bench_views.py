"""The views: crew-status start-up (tmux runs it every few seconds)."""
import os
import subprocess


def run(b):
    crew = os.path.join(b.tmp, "views-crew")
    env = dict(b.env, CREWFILE_DIR=crew)
    empty, base = b.wall_pair(b.cmd("crew-status"), [b.python, "-c", "pass"], n=40, env=env)
    b.figure("crew-status, empty crew", empty, base, budget=1.2, base_label="python -c pass")
    for i in range(5):
        subprocess.run(b.cmd("session-add") + [f"w{i}"], env=env, check=True)
        subprocess.run(b.cmd("status-append") + [f"w{i}", "turn-started"], env=env, check=True)
    five, base = b.wall_pair(b.cmd("crew-status"), [b.python, "-c", "pass"], n=40, env=env)
    b.figure("crew-status, 5 sessions", five, base, budget=1.2, base_label="python -c pass")
