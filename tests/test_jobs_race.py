"""Every outcome heard exactly once, over 500 racing trials (up to 2,000 on a
machine so loaded that no wait takes a notice over in the first 500).

Jobs (real processes under real watchers) end at random moments in the same
few tens of milliseconds in which waiters count themselves in, time out,
count themselves out and come back. Waiters run in threads of this process
through the library (jobwait.wait: the same locks as job-wait; flock
locks belong to each open file, so threads exclude each other as processes
do). Meanwhile a drainer hands the session's notices to "the model" at
random moments (inbox.drain, as the hook does), so a wait that comes back
after the announcement races the drain for the pending notice: it takes it
over (withdrawn) or says the model has it. For each job: the waits that say
they heard it, plus the notices drained, plus those still pending, must add
up to exactly one.
"""
import collections
import os
import random
import subprocess
import sys
import threading

from crewfile.wake import inbox
from crewfile.background import jobs, jobwait, jobwatch
from crewfile.core import locks
from crewfile.session import sessions
from test_jobs import settled
from conftest import BIN

TRIALS = 500
MAX_TRIALS = 2000
BATCH = 25


def test_every_outcome_heard_exactly_once(crew):
    sessions.register(crew, "w1", pid=os.getpid())
    rng = random.Random(0x6A0B)
    heard_by_wait = collections.Counter()
    outcomes = collections.Counter()
    problems = []
    lock = threading.Lock()
    handles = []

    def waiter(handle, seed):
        r = random.Random(seed)
        try:
            while True:
                threading.Event().wait(r.uniform(0, 0.03))
                timeout = r.choice([0, 0.001, 0.005, r.uniform(0, 0.03)])
                out = jobwait.wait(crew, handle, timeout=timeout)
                with lock:
                    outcomes[out.state] += 1
                    if out.heard_here:
                        heard_by_wait[handle] += 1
                if out.state != "timeout":
                    if out.state not in ("done", "heard"):
                        problems.append((handle, out.state))
                    return
        except Exception as e:          # noqa: BLE001 - reported below
            problems.append((handle, repr(e)))

    drained = collections.Counter()
    stop = threading.Event()

    def drainer(seed):
        r = random.Random(seed)
        while not stop.is_set():
            threading.Event().wait(r.uniform(0, 0.02))
            for n in inbox.drain(crew, "w1")[0]:
                if n.kind == "job":
                    drained[n.text.split()[1]] += 1

    barrier = os.path.join(crew.ensure().root, "barrier")

    def took_over():
        """Has a wait taken a pending notice back yet (its `heard` says withdrawn)?"""
        return any("withdrawn" in (jobs.Job(crew, h).heard() or {}) for h in handles)

    # TRIALS jobs; then, on a machine so loaded that the drainer always won,
    # more batches until a wait has taken a notice over (MAX_TRIALS at most):
    # the rarest side of the race, which the last assertion asks for.
    while len(handles) < TRIALS or (not took_over() and len(handles) < MAX_TRIALS):
        # The batch's jobs start, then block on a shared flock(1) of the
        # barrier until the waiters are under way; each then ends at its own
        # moment. Fork only while no waiter thread runs (watchers are forked
        # from this process).
        gate = locks.acquire(barrier)
        batch = [jobwatch.start(crew, ["sh", "-c", 'flock -s "$1" true; sleep "$2"', "sh", barrier,
                                   f"{rng.uniform(0, 0.04):.4f}"], session="w1")
                 for _ in range(BATCH)]
        threads = []
        for h in batch:
            for _ in range(rng.choice([0, 1, 1, 2])):
                threads.append(threading.Thread(target=waiter, args=(h, rng.random())))
        threads.append(threading.Thread(target=drainer, args=(rng.random(),)))
        stop.clear()
        for t in threads:
            t.start()
        threading.Event().wait(rng.uniform(0, 0.02))
        gate.release()
        for t in threads[:-1]:
            t.join(60)
        stop.set()
        threads[-1].join(60)
        for h in batch:
            settled(crew, h)
        handles += batch

    assert problems == []
    pending = collections.Counter(n.text.split()[1] for n in inbox.pending(crew, "w1")
                                  if n.kind == "job")
    notices = drained + pending
    wrong = {h: (heard_by_wait[h], drained[h], pending[h]) for h in handles
             if heard_by_wait[h] + notices[h] != 1}
    assert wrong == {}
    withdrawn = 0
    for h in handles:
        heard = jobs.Job(crew, h).heard()
        assert heard["by"] == ("notice" if notices[h] else "wait")
        withdrawn += "withdrawn" in heard
    # The race was really run: both ways of hearing, waiters that timed out,
    # notices taken back by a wait and notices the wait found delivered.
    n_wait, n_notice = sum(heard_by_wait.values()), sum(notices.values())
    print(f"\n{len(handles)} jobs: heard by wait {n_wait} ({withdrawn} taken over from a pending "
          f"notice), by notice {n_notice} ({sum(drained.values())} drained); "
          f"wait calls: {dict(outcomes)}")
    assert TRIALS <= len(handles) <= MAX_TRIALS and n_wait + n_notice == len(handles)
    assert n_wait > TRIALS // 10 and n_notice > TRIALS // 10
    assert outcomes["timeout"] > TRIALS // 10
    assert withdrawn > 0 and outcomes["heard"] > 0


KILL_TRIALS = 100


def test_a_job_wait_killed_at_any_moment_never_leaves_an_outcome_heard_twice_or_never(crew):
    """The real job-wait, counted in and waiting, killed with SIGKILL at a
    random moment around its job's end, or left alone. Each outcome is heard exactly once: by the wait (then no notice) or by
    one notice. A job-wait left alone reports it on stdout with the job's
    code; one killed before the job ended never heard it."""
    sessions.register(crew, "w1", pid=os.getpid())
    rng = random.Random(0x4B11)
    env = dict(os.environ, CREWFILE_DIR=crew.root)
    seen = collections.Counter()
    for i in range(KILL_TRIALS):
        fifo = os.path.join(crew.root, f"go{i}")
        os.mkfifo(fifo)
        h = jobwatch.start(crew, ["sh", "-c", 'read x < "$1"; echo out; exit 3', "sh", fifo],
                           session="w1")
        job = jobs.Job(crew, h)
        waiter = subprocess.Popen([sys.executable, os.path.join(BIN, "job-wait"), h], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        while not locks.is_held(job.waiters_path) and waiter.poll() is None:
            threading.Event().wait(0.0005)
        how = rng.choice(["before", "around", "alone"])

        def release(delay):
            threading.Event().wait(delay)
            with open(fifo, "w") as f:
                f.write("x\n")
        if how == "before":                 # killed, and gone, before the job ends
            waiter.kill()
            waiter.wait()
            release(0)
        else:
            t = threading.Thread(target=release, args=(rng.uniform(0, 0.004),))
            t.start()
            if how == "around":
                threading.Event().wait(rng.uniform(0, 0.006))
                waiter.kill()
            t.join()
        out, _ = waiter.communicate()
        settled(crew, h)
        heard = job.heard()
        mine = [n for n in inbox.pending(crew, "w1") if n.kind == "job" and h in n.text]
        assert heard is not None and len(mine) == (1 if heard["by"] == "notice" else 0), (how, heard, mine)
        if how == "before":
            assert heard["by"] == "notice"
        if how == "alone":
            assert waiter.returncode == 3 and heard["by"] == "wait"
            assert out.decode().split("\n", 1)[1] == "out\n"
        seen[how, heard["by"]] += 1
    print(f"\n{KILL_TRIALS} job-waits: {dict(seen)}")
    assert seen["around", "wait"] + seen["around", "notice"] > KILL_TRIALS // 10
