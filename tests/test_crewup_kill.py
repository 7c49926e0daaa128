"""The random-kill test: while records are appended, one stage (crew-watch,
wake-filter, wake-send, or crew-up itself) is killed with SIGKILL at a random
moment, TRIALS times; crew-up restarts the pipe (a new crew-up is started when
crew-up itself was the victim), and the primary's hook sometimes drains the
inbox meanwhile. Afterwards every wake that `crew-watch --from-start --once |
wake-filter` lists is in the primary's inbox (pending or drained) exactly once,
and nothing else is."""
import collections
import json
import os
import random
import signal
import subprocess
import sys
import time

from conftest import BIN, REPO, wait_for
from crewfile.crew import crewup
from crewfile.wake import inbox
from crewfile.session.sessions import register
from crewfile.core.logfile import rotated

TRIALS = int(os.environ.get("CREWFILE_KILL_TRIALS", "200"))
VICTIMS = ("crew-watch", "wake-filter", "wake-send", "crew-up")
KINDS = ["done", "blocked", "turn-started", "turn-ended", "idle", "paused", "error", "note",
         "waiting", "problem", "blocked"]

WRITER = """
import random, sys, time
sys.path.insert(0, {lib!r})
from crewfile.core.paths import Crew
from crewfile.session.sessions import Session
crew = Crew({root!r})
names, kinds = {names!r}, {kinds!r}
rng = random.Random({seed})
i = 0
while True:
    try:
        open({stop!r}).close()
        break
    except FileNotFoundError:
        pass
    Session(crew, rng.choice(names)).append(rng.choice(kinds), "r%06d" % i)
    i += 1
    time.sleep(rng.uniform(0, 0.01))
print(i)
"""


def start_up(crew, env, err):
    """A crew-up for the boss, its stdout and stderr appended to *err*."""
    with open(err, "ab") as f:
        return subprocess.Popen([sys.executable, os.path.join(BIN, "crew-up"), "boss",
                                 "--backoff-max", "0.2s", "--sweep", "1h"],
                                env=env, stdout=f, stderr=subprocess.STDOUT)


def seen(crew, up, err, what):
    """For a time-out: *what*, then crew-up's state, its process tree, the
    tail of its output and of its log, so the failure tells what was stuck."""
    ps = subprocess.run(["ps", "-o", "pid,ppid,stat,wchan:20,etime,args", "--ppid",
                         str(up.pid), "-p", str(up.pid)],
                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout
    others = subprocess.run(["ps", "-eo", "pid,ppid,stat,wchan:20,args"],
                            stdout=subprocess.PIPE, text=True).stdout.splitlines()
    others = [l for l in others if any(v in l for v in VICTIMS) and "ps -" not in l]

    def tail(path, n=40):
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError as e:
            return f"({e})"
    return (f"{what} (crew-up pid {up.pid}, exit {up.poll()})\n"
            f"state: {json.dumps(crewup.read_state(crew), indent=1)}\n"
            f"crew-up and its children:\n{ps}"
            f"every process of a stage's name:\n" + "\n".join(others) + "\n"
            f"crew-up's output (tail):\n{tail(err)}"
            f"crew-up/log (tail):\n{tail(crewup.files(crew)[crewup.LOG])}")


def said(crew):
    """The lines the stages wrote on stderr, from crew-up/log and its rotations."""
    out = []
    for i in range(9, -1, -1):
        try:
            with open(rotated(crewup.files(crew)[crewup.LOG], i), encoding="utf-8",
                      errors="replace") as f:
                out += [line for line in f if " said: " in line]
        except FileNotFoundError:
            pass
    return out


def pipe_pids(crew, up, err=None):
    """The wake pipe's pids once all three run under this crew-up, else None.
    With *err* (crew-up's output), a crew-up that exited fails at once."""
    if err is not None and up.poll() is not None:
        raise AssertionError(seen(crew, up, err, "crew-up exited"))
    st = crewup.read_state(crew)
    if st.get("pid") != up.pid:
        return None
    wake = (st.get("stages") or {}).get("wake") or {}
    pids = wake.get("pids") or {}
    if not wake.get("running") or set(pids) != set(VICTIMS[:3]):
        return None
    if not all(_alive(p) for p in pids.values()):
        return None
    return pids


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:         # gone between the open and the read, too
        return False


def wake_texts(crew):
    out = []
    d = crew.session_dir("boss")
    for name in sorted(os.listdir(d)):
        if name.startswith("inbox"):
            with open(os.path.join(d, name), encoding="utf-8") as f:
                # a last line without its newline is being written (or a killed
                # writer's fragment, cut by the next append): not a notice yet
                out += [l[:-1].split(" ", 3)[3] for l in f
                        if l.endswith("\n") and " wake: " in l]
    return out


def test_random_kills_lose_and_repeat_no_wake(crew, tmp_path):
    env = {**os.environ, "CREWFILE_DIR": crew.root, "CREWFILE_ROTATE_BYTES": "16384"}
    names = [f"w{i}" for i in range(6)]
    register(crew, "boss", kind="primary")
    for n in names:
        register(crew, n)
    register(crew, "side", kind="aside")
    stop = tmp_path / "stop-writing"
    err = tmp_path / "crew-up.err"
    up = start_up(crew, env, err)
    rng = random.Random(int(os.environ.get("CREWFILE_KILL_SEED", "13")))
    killed = collections.Counter()
    drains = 0
    writer = None
    try:
        wait_for(lambda: pipe_pids(crew, up, err), timeout=60,
                 what=lambda: seen(crew, up, err, "crew-up's pipe running"))
        writer = subprocess.Popen([sys.executable, "-c", WRITER.format(
            lib=os.path.join(REPO, "lib"), root=crew.root, names=names + ["boss", "side"],
            kinds=KINDS, seed=rng.randrange(1 << 30), stop=str(stop))],
            env=env, stdout=subprocess.PIPE, text=True)
        for trial in range(TRIALS):
            pids = wait_for(lambda: pipe_pids(crew, up, err), timeout=60, what=lambda: seen(
                crew, up, err, f"the pipe running again (trial {trial})"))
            victim = rng.choice(VICTIMS)
            time.sleep(rng.uniform(0, 0.25))        # a random moment, not an ordering
            pid = up.pid if victim == "crew-up" else pids[victim]
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            killed[victim] += 1
            if victim == "crew-up":
                up.wait()
                up = start_up(crew, env, err)
            if rng.random() < 0.1:
                inbox.drain(crew, "boss")           # the primary's hook took some
                drains += 1
        stop.touch()
        records = int(writer.communicate(timeout=60)[0])
        expected = subprocess.run(
            f"{sys.executable} {BIN}/crew-watch --from-start --once | {sys.executable} {BIN}/wake-filter",
            shell=True, env=env, stdout=subprocess.PIPE, text=True, check=True).stdout.splitlines()
        wait_for(lambda: len(wake_texts(crew)) >= len(expected), timeout=120,
                 what=lambda: seen(crew, up, err, f"every wake in the inbox ({len(expected)})"))
        # a last moment for anything still in flight to show a doubling
        pipe_pids(crew, up) and wait_for(lambda: pipe_pids(crew, up, err), timeout=60,
                                            what=lambda: seen(crew, up, err, "the pipe"))
        got = collections.Counter(wake_texts(crew))
        want = collections.Counter(expected)
        missing = want - got
        extra = got - want
        print(f"\n{TRIALS} trials, killed {dict(killed)}, {drains} drains, {records} records"
              f" appended, {len(expected)} wakes expected, {sum(got.values())} in the inbox,"
              f" {len(missing)} missing, {len(extra)} extra", file=sys.stderr)
        if missing or extra:
            raise AssertionError(seen(crew, up, err, f"missing {list(missing)[:5]}, extra"
                                 f" {list(extra)[:5]}") + f"\nwhat the stages said:\n"
                                 + "".join(said(crew)[-40:]))
        assert all(c == 1 for c in got.values())
        assert all(killed[v] > TRIALS // 10 for v in VICTIMS)
    finally:
        stop.touch()
        if writer is not None and writer.poll() is None:
            writer.kill()
        if up.poll() is None:
            up.send_signal(signal.SIGTERM)
            up.wait(30)
