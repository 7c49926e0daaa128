"""Jobs: job-exec start-up, job-ls over 1,000 jobs, and the latency from a job's last statement to job-wait returning, against 2 s polling and tsp -w.

Each figure against its baseline run alternately in the same run. job-wait:
each trial: a job blocks on a FIFO; the waiter is started and waits
(counted in: it holds its shared flock on `waiters`); the FIFO is written;
the job's last statement records the time (`date +%s.%N`) and the job
exits; the latency is the moment the waiter returned minus that time.
Medians over 200 trials each. Trial by trial in turn with each job-wait
trial: a `tsp -w` trial, and the watcher's durable write of `result` timed
alone, as the watcher does it (atomic.replace, in a job directory of the
same crew), so the figure is shown beside the price of "durable before
heard": job-wait minus the durable write (the difference of the medians)
against tsp -w, which keeps its outcomes in memory.
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
    from crewfile.background import jobs, jobwatch
    from crewfile.core import locks
    from crewfile.core.paths import Crew
    crew_dir = os.path.join(b.tmp, "crew")
    env = dict(b.env, CREWFILE_DIR=crew_dir)
    env.pop("CREWFILE_SESSION", None)
    crew = Crew(crew_dir)

    pybase = [b.python, "-c", "pass"]
    t, base = b.wall_pair(b.cmd("job-exec") + ["--", "true"], pybase, n=30, env=env)
    b.figure("job-exec wall time (returns once the watcher is forked)", t, base,
             base_label="python -c pass")
    subprocess.run(b.cmd("job-sweep") + ["--older-than", "0s", "--unheard-older-than", "0s"],
                   env=env, stdout=subprocess.DEVNULL)
    empty_env = dict(env, CREWFILE_DIR=os.path.join(b.tmp, "empty"))
    t, base = b.wall_pair(b.cmd("job-ls"), pybase, n=30, env=empty_env)
    b.figure("job-ls start-up (no jobs)", t, base, base_label="python -c pass")
    many_env = dict(env, CREWFILE_DIR=_many_jobs(b, 1000))
    t_many, t_empty = _wall_pair_envs(b, b.cmd("job-ls"), many_env, empty_env)
    b.figure("job-ls, 1,000 ended jobs", t_many, t_empty, budget=3, base_label="job-ls, no jobs")

    # job end -> job-wait returning, against `tsp -w` and against the durable
    # write alone, trial by trial in turn (a load that drifts weighs on all).
    tsp = shutil.which("tsp")         # Debian names task-spooler's ts(1) tsp
    load_before = os.getloadavg()[0]  # on 2 cores, waking 3 processes in a row costs ms at load 15
    if not tsp:
        b.note("task-spooler is not installed (apt-get install -y task-spooler): no tsp -w figure")
    tenv = dict(env, TS_SOCKET=os.path.join(b.tmp, "ts.sock"), TMPDIR=b.tmp, TS_MAXFINISHED="1000")
    durable_dir = jobs.Job(crew, jobwatch.start(crew, ["true"])).dir    # a job directory, as the watcher's
    lat, tsp_lat, durable = [], [], []
    try:
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
            # The watcher's durable write of `result`, alone, as it does it
            # (the same bytes, the same filesystem).
            durable.append(_durable_write(durable_dir))
            if tsp:
                fifo, stamp = _fifos(b.tmp, f"t{i}")
                jid = subprocess.run([tsp] + _job_argv(fifo, stamp), env=tenv, stdout=subprocess.PIPE,
                                     text=True, check=True).stdout.strip()
                waiter = subprocess.Popen([tsp, "-w", jid], env=tenv, stdout=subprocess.DEVNULL)
                time.sleep(0.02)       # tsp shows no registration to await; give it time to connect
                _release(fifo)
                waiter.wait()
                tsp_lat.append(time.time() - _stamp(stamp))
    finally:
        if tsp:
            subprocess.run([tsp, "-K"], env=tenv, capture_output=True)
    jw, dw = statistics.median(lat), statistics.median(durable)
    b.note(f"job-wait: median {jw * 1000:.2f} ms, p90 {sorted(lat)[int(TRIALS * 0.9)] * 1000:.2f} ms"
           f" (load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after)")

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
    if not tsp:
        return
    tw = statistics.median(tsp_lat)
    b.figure(f"job end -> job-wait returns (median of {TRIALS})", jw, tw, budget=4,
             base_label="tsp -w")
    # The price of "durable before heard": `result` is on disk before any
    # wait can report it. tsp keeps its outcomes in memory and pays nothing.
    b.figure("  of which the durable `result` alone (write, fsync, rename, fsync dir; "
             "same filesystem, same trials)", dw, jw, base_label="job-wait")
    b.figure("  job-wait minus the durable write", jw - dw, tw, base_label="tsp -w")
    floor = _exit_seen(b)
    b.note(f"  the job's exit seen by its parent (waitpid; both pay it): {floor * 1000:.2f} ms; beyond it, "
           f"job-wait {(jw - floor) * 1000:.2f} ms against tsp -w {(tw - floor) * 1000:.2f} ms")
    py_exit = _exit_alone([b.python, "-S", "-c", "import os, sys; os.write(int(sys.argv[1]), b'x'); os._exit(0)"])
    sh_exit = _exit_alone(["sh", "-c", 'printf x >&"$1"', "sh"])
    b.note(f"  a process's own exit (its last write -> its parent woken): python {py_exit * 1000:.2f} ms,"
           f" sh {sh_exit * 1000:.2f} ms; job-wait pays the first, tsp -w's small C client about the second")


def _exit_seen(b, n=60):
    """The floor under both figures: from the same job's last statement to
    its parent, blocked in waitpid(2), waking (median of *n*)."""
    lat = []
    for i in range(n):
        fifo, stamp = _fifos(b.tmp, f"e{i}")
        child = subprocess.Popen(_job_argv(fifo, stamp))
        _release(fifo)
        child.wait()
        lat.append(time.time() - _stamp(stamp))
    return statistics.median(lat)


def _exit_alone(argv, n=60):
    """From *argv*'s last write (one byte to a pipe, its fd as its last
    argument) to its parent, blocked in waitpid(2), waking; median of *n*."""
    lat = []
    for _ in range(n):
        r, w = os.pipe()
        child = subprocess.Popen(argv + [str(w)], pass_fds=(w,))
        os.close(w)
        os.read(r, 1)
        t0 = time.perf_counter()
        child.wait()
        lat.append(time.perf_counter() - t0)
        os.close(r)
    return statistics.median(lat)


def _durable_write(d):
    """One durable write of a `result`-sized file into *d*, as the watcher
    writes `result` (atomic.replace); seconds. Each a new name, as
    `result` is."""
    from crewfile.core.atomic import replace
    path = os.path.join(d, "result-alone")
    t0 = time.perf_counter()
    replace(path, _RESULT)
    took = time.perf_counter() - t0
    os.unlink(path)
    return took


_RESULT = ('{"code": 0, "ended": "2026-11-30T22:45:40.480Z", "exit": 0, "seconds": 0.012, '
           '"signal": null, "started": "2026-11-30T22:45:40.468Z"}\n')


def _many_jobs(b, n):
    """A crew directory with *n* ended jobs: a third heard by a notice, a third
    by a wait, a third nobody heard (no session), each a copy of a real one."""
    import json
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
    from crewfile.background import jobs, jobwatch
    from crewfile.session import sessions
    from crewfile.core.paths import Crew
    crew = Crew(os.path.join(b.tmp, "many"))
    sessions.register(crew, "w1", pid=os.getpid())
    made = [jobwatch.start(crew, ["sh", "-c", f"echo {i}; exit {i}"], session=s, label="bench")
            for i, s in ((1, "w1"), (2, None), (3, None))]
    for h in made:
        job = jobs.Job(crew, h)
        while job.result() is None or job.watcher_alive():
            time.sleep(0.001)
    jobwait_env = dict(b.env, CREWFILE_DIR=crew.root)
    subprocess.run(b.cmd("job-wait") + [made[1]], env=jobwait_env, stdout=subprocess.DEVNULL)
    root = crew.sub("jobs")
    for i in range(n):
        src = jobs.Job(crew, made[i % 3])
        dst = os.path.join(root, f"j-b{i:05x}")
        shutil.copytree(src.dir, dst)
        with open(os.path.join(dst, "spec")) as f:
            spec = json.load(f)
        spec["handle"] = os.path.basename(dst)
        with open(os.path.join(dst, "spec"), "w") as f:
            json.dump(spec, f)
    for h in made:
        shutil.rmtree(jobs.Job(crew, h).dir)
    return crew.root


def _wall_pair_envs(b, argv, env_a, env_b, n=30):
    """b.wall_pair for one command in two environments (alternately)."""
    times = ([], [])
    for i in range(n + 3):
        for env, out in ((env_a, times[0]), (env_b, times[1])):
            t0 = time.perf_counter()
            subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            if i >= 3:
                out.append(time.perf_counter() - t0)
    return statistics.median(times[0]), statistics.median(times[1])
