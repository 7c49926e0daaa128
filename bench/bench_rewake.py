"""The primary's wake latency with the real Claude Code: keystroke-free (crew-hook --rewake) beside typed (wake-send).

From a wake line written into a running wake-send (the pipeline's last stage;
what comes before it is the same for both paths) to the stand-in model
receiving the request that carries it; p50 over N trials each. The typed path
runs with wake-send's default window (0.5 s, as crew-up runs it): typing is
announced a window after a burst's first wake; the keystroke-free waiter sees
the inbox change at once (inotify).
"""
import json
import os
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "lib"))
sys.path.insert(0, os.path.join(REPO, "tests"))

N = int(os.environ.get("REWAKE_TRIALS", "7"))
P = "firstmate"
TS = "2026-11-29T22:01:17.123Z"


def _wait(pred, timeout=60, every=0.005):
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise TimeoutError("bench: timed out")
        time.sleep(every)


def trials(b, tmp, rewake):
    from types import SimpleNamespace
    from claude_harness import make_rig
    from crewfile.core.logfile import TailStats
    from crewfile.core.paths import Crew
    from crewfile.session.sessions import Session, register
    from crewfile.wake import announce
    crew = Crew(os.path.join(tmp, "crew"))
    register(crew, P, kind="primary")
    sess = Session(crew, P)
    env = {"CREWFILE_SESSION": P, "CREWFILE_DIR": crew.root}
    os.makedirs(tmp, exist_ok=True)
    rig = make_rig(tmp, SimpleNamespace(sock=os.path.join(tmp, "tmux.sock")), env)
    if not rewake:      # the typed path alone: the install without its asyncRewake hook
        path = os.path.join(rig.project, ".claude", "settings.json")
        with open(path) as f:
            settings = json.load(f)
        for group in settings["hooks"]["Stop"]:
            group["hooks"] = [h for h in group["hooks"] if not h.get("asyncRewake")]
        with open(path, "w") as f:
            json.dump(settings, f)
    times = []
    sender = None
    try:
        rig.start()
        rig.turn("hello")
        sender = subprocess.Popen(b.cmd("wake-send") + [P], stdin=subprocess.PIPE,
                                  stderr=subprocess.PIPE, env=dict(b.env, CREWFILE_DIR=crew.root))

        def ended():
            rec = sess.last_of(("turn-started", "turn-ended"), TailStats())
            return rec is not None and rec.kind == "turn-ended"
        for i in range(N):
            _wait(ended)
            if rewake:
                _wait(lambda: announce.armed(sess))
            mark = f"BENCH-{int(rewake)}-{i}-END"
            t0 = time.perf_counter()
            sender.stdin.write(f"{TS} w1 done: {mark}\n".encode())
            sender.stdin.flush()
            _wait(lambda: mark in _log(rig))
            times.append(time.perf_counter() - t0)
            _wait(lambda: rig.turns_done() >= i + 2 and ended())
    finally:
        said = ""
        if sender is not None:
            sender.stdin.close()
            said = sender.stderr.read().decode(errors="replace")
            sender.wait(60)
        rig.stop()
    typed = said.count(f"wake(s) to {P}: ")      # wake-send's log of each typed announcement
    return times, typed


def _log(rig):
    try:
        with open(rig.log, errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def run(b):
    sys.path.insert(0, os.path.join(REPO, "tests"))
    from claude_harness import find_claude
    if not find_claude(REPO):
        b.note("SKIPPED: the real Claude Code is not installed (make claude-code)")
        return
    free, typed_free = trials(b, os.path.join(b.tmp, "free"), True)
    typed, typed_typed = trials(b, os.path.join(b.tmp, "typed"), False)
    p50 = statistics.median
    b.note(f"{N} trials each; announcements typed into the pane: keystroke-free {typed_free}, typed path {typed_typed}")
    b.figure("wake line -> model request, keystroke-free (p50)", p50(free), p50(typed),
             base_label="typed (p50)")
    b.note("keystroke-free: " + " ".join(f"{t * 1000:.0f}" for t in free) + " ms")
    b.note("typed:          " + " ".join(f"{t * 1000:.0f}" for t in typed) + " ms")
