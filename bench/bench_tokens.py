"""What supervision costs: crew-status with the crew's tokens (tokens.cache)."""
import os
import subprocess
import time

FIXTURE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                       "tests", "transcripts", "claude-primary.jsonl")
COPIES = 1000          # ~30 MB of real Claude Code transcript


def run(b):
    crews = {}
    for label in ("with", "without"):
        crew = os.path.join(b.tmp, f"crew-{label}")
        env = dict(b.env, CREWFILE_DIR=crew)
        for i in range(5):
            subprocess.run(b.cmd("session-add") + [f"w{i}"], env=env, check=True)
            subprocess.run(b.cmd("status-append") + [f"w{i}", "turn-started"], env=env,
                           check=True)
        crews[label] = crew
    path = os.path.join(b.tmp, "transcript.jsonl")
    text = open(FIXTURE).read()
    with open(path, "w") as f:
        for i in range(COPIES):
            f.write(text.replace('"id":"msg_0', f'"id":"msg_{i}_'))
    size = os.path.getsize(path)
    lib = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib")
    subprocess.run([b.python, "-c", "import sys; sys.path.insert(0, %r)\n"
                    "from crewfile.core.paths import Crew\nfrom crewfile.session.sessions import Session\n"
                    "Session(Crew(%r), 'w0').update_meta(transcript_path=%r)"
                    % (lib, crews["with"], path)], env=b.env, check=True)
    t0 = time.perf_counter()
    out = subprocess.run(b.cmd("crew-status"), env=dict(b.env, CREWFILE_DIR=crews["with"]),
                         capture_output=True, text=True, check=True).stdout.strip()
    first = time.perf_counter() - t0
    b.note(f"crew-status, first call on a {size / 1e6:.0f} MB transcript (counted into"
           f" tokens.cache): {first * 1000:.0f} ms -> {out!r}")

    def status(label):
        return ["env", f"CREWFILE_DIR={crews[label]}"] + b.cmd("crew-status")
    with_, without = b.wall_pair(status("with"), status("without"), n=30)
    b.figure("crew-status, 5 sessions, a 30 MB transcript read on from tokens.cache",
             with_, without, budget=1.1, base_label="the same crew with no transcript")
    with open(path, "a") as f:          # what a turn adds, then read on
        f.write(text)
    with_, without = b.wall_pair(status("with"), status("without"), n=1, warmup=0)
    b.note(f"crew-status after a turn appended {len(text)} bytes: {with_ * 1000:.0f} ms"
           f" (no transcript: {without * 1000:.0f} ms)")
