"""Jobs: latency from a job's last statement to job-wait returning, against 2 s polling and tsp -w.

Each trial: a job blocks on a FIFO; the waiter is started and has counted
itself in; the FIFO is written; the job's last statement records the time
(`date +%s.%N`) and the job exits; the latency is the moment the waiter
returned minus that time. Medians over 200 trials each.
"""
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time

TRIALS = 200
POLL_EVERY = 2.0          # how popular task queues wait (pueue polls its daemon every 2 s)


def _job_argv(fifo, stamp):
    return ["sh", "-c", 'read x < "$1"; date +%s.%N > "$2"', "sh", fifo, stamp]


def _release(fifo):
    with open(fifo, "w") as f:
        f.write("go\n")


def _stamp(path):
    with open(path) as f:
        return float(f.read())


def _fifos(tmp, i):
    fifo, stamp = os.path.join(tmp, f"fifo{i}"), os.path.join(tmp, f"stamp{i}")
    os.mkfifo(fifo)
    return fifo, stamp


def run(b):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
    from crewfile import jobs, jobwatch, locks
    from crewfile.paths import Crew
    crew_dir = os.path.join(b.tmp, "crew")
    env = dict(b.env, CREWFILE_DIR=crew_dir)
    env.pop("CREWFILE_SESSION", None)
    crew = Crew(crew_dir)

    base = b.wall([b.python, "-c", "pass"], n=30, env=env)
    t = b.wall(b.cmd("job-ls"), n=30, env=env)
    b.figure("job-ls start-up (no jobs)", t, base, budget=1.5, base_label="python -c pass")
    t = b.wall(b.cmd("job-exec") + ["--", "true"], n=30, env=env)
    b.figure("job-exec wall time (returns once the command runs)", t, base,
             base_label="python -c pass")
    t = b.wall(b.cmd("job-ls"), n=30, env=env)
    b.figure(f"job-ls wall time ({len(jobs.handles(crew))} jobs)", t, base,
             base_label="python -c pass")
    subprocess.run(b.cmd("job-sweep") + ["--older-than", "0s", "--unheard-older-than", "0s"],
                   env=env, stdout=subprocess.DEVNULL)

    # job-wait (the real command, already waiting when the job ends).
    lat = []
    for i in range(TRIALS):
        fifo, stamp = _fifos(b.tmp, f"w{i}")
        h = subprocess.run(b.cmd("job-exec") + ["--"] + _job_argv(fifo, stamp), env=env,
                           stdout=subprocess.PIPE, text=True, check=True).stdout.strip()
        waiter = subprocess.Popen(b.cmd("job-wait") + [h], env=env, stdout=subprocess.DEVNULL)
        waiters = jobs.Job(crew, h).waiters_path
        while not locks.is_held(waiters):
            time.sleep(0.0005)
        _release(fifo)
        waiter.wait()
        lat.append(time.time() - _stamp(stamp))
    jw = statistics.median(lat)
    b.note(f"job-wait: median {jw * 1000:.2f} ms, p90 {sorted(lat)[int(TRIALS * 0.9)] * 1000:.2f} ms")

    # A 2-second polling wait on the same result file, 50 jobs at a time.
    lat = []
    for batch in range(TRIALS // 50):
        handles, fifos = [], []
        for i in range(50):
            fifo, stamp = _fifos(b.tmp, f"p{batch}-{i}")
            handles.append(jobwatch.start(crew, _job_argv(fifo, stamp)))
            fifos.append((fifo, stamp))
        seen = {}

        def poll(k, phase):
            result = jobs.Job(crew, handles[k]).result_path
            time.sleep(phase)
            while not os.path.exists(result):
                time.sleep(POLL_EVERY)
            seen[k] = time.time()
        import random
        rng = random.Random(batch)
        threads = [threading.Thread(target=poll, args=(k, rng.uniform(0, POLL_EVERY)))
                   for k in range(50)]
        for t in threads:
            t.start()
        for k in rng.sample(range(50), 50):
            time.sleep(rng.uniform(0, POLL_EVERY / 50))
            _release(fifos[k][0])
        for t in threads:
            t.join()
        lat += [seen[k] - _stamp(fifos[k][1]) for k in range(50)]
    polled = statistics.median(lat)
    b.figure(f"job end -> job-wait returns (median of {TRIALS})", jw, polled,
             base_label=f"a {POLL_EVERY:.0f} s polling wait")

    # Debian's task-spooler: `tsp -w ID`.
    tsp = shutil.which("tsp")         # Debian names task-spooler's ts(1) tsp
    if not tsp:
        b.note("task-spooler is not installed (apt-get install -y task-spooler): no tsp -w figure")
        return
    tenv = dict(env, TS_SOCKET=os.path.join(b.tmp, "ts.sock"), TMPDIR=b.tmp, TS_MAXFINISHED="1000")
    lat = []
    try:
        for i in range(TRIALS):
            fifo, stamp = _fifos(b.tmp, f"t{i}")
            jid = subprocess.run([tsp] + _job_argv(fifo, stamp), env=tenv, stdout=subprocess.PIPE,
                                 text=True, check=True).stdout.strip()
            waiter = subprocess.Popen([tsp, "-w", jid], env=tenv, stdout=subprocess.DEVNULL)
            time.sleep(0.02)           # tsp shows no registration to await; give it time to connect
            _release(fifo)
            waiter.wait()
            lat.append(time.time() - _stamp(stamp))
    finally:
        subprocess.run([tsp, "-K"], env=tenv, capture_output=True)
    tw = statistics.median(lat)
    b.figure(f"job end -> job-wait returns (median of {TRIALS})", jw, tw, base_label="tsp -w")
