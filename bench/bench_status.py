"""Foundation: command start-up, state query cost on a huge log, contended appends."""
import os
import subprocess
import time


def run(b):
    crew = os.path.join(b.tmp, "crew")
    env = dict(b.env, CREWFILE_DIR=crew)
    subprocess.run(b.cmd("session-add") + ["w1"], env=env, check=True)
    app, base = b.wall_pair(b.cmd("status-append") + ["w1", "idle"], [b.python, "-c", "pass"],
                            n=40, env=env)
    b.figure("status-append wall time", app, base, base_label="python -c pass")

    # status-show on a 1 GiB log against a 1 KiB log.
    subprocess.run(b.cmd("session-add") + ["big"], env=dict(env), check=True)
    subprocess.run(b.cmd("session-add") + ["small"], env=dict(env), check=True)
    # Records of a usual length (a MiB holds 16,384 of them): the MiB a
    # query reads is as many records as a long-lived session's.
    line = b"2026-11-29T22:01:17.123Z problem: " + b"x" * 29 + b"\n"
    log = os.path.join(crew, "sessions", "big", "status")
    with open(log, "ab") as f:
        block = line * ((1 << 20) // len(line))
        for _ in range(1024):
            f.write(block)
        f.write(b"2026-11-29T22:01:18.000Z turn-started\n")
    with open(os.path.join(crew, "sessions", "small", "status"), "ab") as f:
        f.write(b"2026-11-29T22:01:18.000Z turn-started\n")
    b.note(f"big log: {os.path.getsize(log) / 2**30:.2f} GiB")
    big_t, small_t = b.wall_pair(b.cmd("status-show") + ["big"], b.cmd("status-show") + ["small"],
                                 n=20, env=env)
    b.figure("status-show on a 1 GiB log", big_t, small_t, budget=2.0, base_label="on a 1 KiB log")
    os.unlink(log)

    # 8 processes x 2,000 appends: library vs bash flock(1) + echo.
    subprocess.run(b.cmd("session-add") + ["race"], env=env, check=True)
    lock = os.path.join(crew, "sessions", "race", "lock")
    status = os.path.join(crew, "sessions", "race", "status")
    lib = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib")
    py = ("import sys; sys.path.insert(0, %r)\n"
          "from crewfile.core.paths import Crew\nfrom crewfile.session.sessions import Session\n"
          "s = Session(Crew(%r), 'race')\n"
          "for i in range(2000): s.append('note', 'x' * 90)\n") % (lib, crew)
    t0 = time.perf_counter()
    procs = [subprocess.Popen([b.python, "-c", py], env=env) for _ in range(8)]
    for p in procs:
        p.wait()
    lib_t = time.perf_counter() - t0
    # flock(1) on a descriptor of the documented lock path: one lock per line.
    sh = (f'exec 9>{lock}; for i in $(seq 2000); do flock 9; '
          f'echo "2026-11-29T22:01:17.123Z note: {"x" * 90}" >> {status}; flock -u 9; done')
    t0 = time.perf_counter()
    procs = [subprocess.Popen(["bash", "-c", sh]) for _ in range(8)]
    for p in procs:
        p.wait()
    sh_t = time.perf_counter() - t0
    b.figure("8 x 2,000 appends through the library", lib_t, sh_t, unit="s",
             base_label="bash flock(1) + echo")
