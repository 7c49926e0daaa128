"""make soak: a day in the life of a crew (issue 34).

    python tests/soak/soak.py [--duration 20m] [--seed 1] [--workers 6] [--codex N]
                              [--gemini N] [--root DIR]

A primary and WORKERS workers, each the real Claude Code in a private tmux
server (each worker in its own git worktree through crew-spawn), driven
offline by the stand-in model (tests/model_server.py --soak): each worker
follows a seeded day (tests/soak/day.py), the primary's model answers every
wake with a scripted action (model_server.SoakPrimary), and crew-up runs the
supervision. Meanwhile the day is disturbed (tests/soak/disturb.py), the
invariants are checked and the figures taken (tests/soak/checks.py). At the
end a report is written (its path printed); the exit status is 0 only with
no violation.

With --codex N, the last N workers are the real Codex CLI instead
(tests/soak/codexrig.py), following the same day through the Responses
stand-in (tests/responses_server.py --soak); with --gemini N, the last N
after those are the real Gemini CLI (tests/soak/geminirig.py, through
tests/gemini_server.py --soak).
"""
import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [HERE, os.path.join(REPO, "tests"), os.path.join(REPO, "lib")]

import checks  # noqa: E402  (beside this file)
import codexrig  # noqa: E402
import day  # noqa: E402
import disturb  # noqa: E402
import geminirig  # noqa: E402
from claude_harness import BIN, ClaudeRig, find_claude, hook_command, install_hooks, run_checked  # noqa: E402
from crewfile.core.durations import parse_duration  # noqa: E402
from crewfile.core.paths import Crew  # noqa: E402
from crewfile.crew import crewup  # noqa: E402
from crewfile.session.sessions import Session, register  # noqa: E402
from terminal import Tmux  # noqa: E402

PRIMARY = "firstmate"
MARK = "CREWFILE_SOAK_RUN"      # in every process the soak starts (checks.left_behind)
TURNS_PER_MINUTE = 30           # script lines per worker per minute: more than a day uses
SAMPLE_EVERY = 1.0              # seconds between samples of crew-up and of the processes
CHECK_EVERY = 30.0              # seconds between runs of the checks that can run during the day


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"soak: timed out after {timeout:g}s waiting for {what}")
        time.sleep(0.1)


class Soak:
    wait_for = staticmethod(wait_for)

    def __init__(self, root, seed, workers, duration, codex=0, gemini=0):
        self.root, self.seed, self.duration = root, seed, duration
        self.names = [f"w{i + 1}" for i in range(workers)]
        claude = workers - codex - gemini
        self.codex = set(self.names[claude:claude + codex])
        self.gemini = set(self.names[claude + codex:])
        self.crew = Crew(os.path.join(root, "crew"))
        self.sock = os.path.join(root, "tmux.sock")
        self.tmux = Tmux(self.sock)
        self.repo = os.path.join(root, "src", "app")
        self.rigs = {}
        self.scripts = {}
        self.crewup = None
        self.events = []            # (time, what): the day's disturbances, for the report
        self.samples = checks.Samples()
        self.violations = []
        self.people = []            # AttachedClients (the captain's terminals)

    # ------------------------------------------------------------------ set-up
    def environment(self):
        self.mark = f"{MARK}={os.getpid()}-{uuid.uuid4().hex[:8]}"
        os.environ.update({
            "CREWFILE_DIR": self.crew.root, "CREWFILE_TMUX": self.sock,
            MARK: self.mark.split("=", 1)[1],
            "PATH": f"{os.path.dirname(sys.executable)}:{BIN}:{os.environ['PATH']}",
            "GIT_AUTHOR_NAME": "Soak", "GIT_AUTHOR_EMAIL": "soak@localhost",
            "GIT_COMMITTER_NAME": "Soak", "GIT_COMMITTER_EMAIL": "soak@localhost"})
        os.environ.pop("TMUX", None)
        os.makedirs(self.crew.root, mode=0o700)
        os.makedirs(self.repo)
        for argv in (["git", "init", "-q", "-b", "main"], ["sh", "-c", "echo app > README"],
                     ["git", "add", "README"], ["git", "commit", "-q", "-m", "init"]):
            run_checked(argv, cwd=self.repo)

    def tree(self, name):
        return os.path.join(os.path.dirname(self.repo), "app.crew", name)

    def start_primary(self):
        register(self.crew, PRIMARY, kind="primary")
        rig = ClaudeRig(os.path.join(self.root, PRIMARY), self.sock, {}, script=[],
                        env={"PATH": os.environ["PATH"], "CREWFILE_SESSION": PRIMARY,
                             "CREWFILE_DIR": self.crew.root},
                        server_args=["--soak-primary", PRIMARY])
        os.makedirs(rig.project, exist_ok=True)
        install_hooks(rig.project)
        self.rigs[PRIMARY] = rig
        rig.start(ready_timeout=120)
        wait_for(lambda: Session(self.crew, PRIMARY).reread().meta.get("tmux"), 60,
                 "the primary's pane in its meta (its SessionStart hook)")

    def worker_rig(self, name):
        """A rig (HOME, stand-in model) for worker NAME, crew-hook installed in
        its HOME, its tree trusted; returns the agent's command for crew-spawn.
        A Codex worker's rig is codexrig's, a Gemini worker's geminirig's."""
        other = (codexrig.CodexRig if name in self.codex
                 else geminirig.GeminiRig if name in self.gemini else None)
        if other:
            rig = self.rigs[name] = other(self.root, name, self.sock, self.scripts[name],
                                          self.repo, self.tree(name))
            return rig.prepare()
        rig = ClaudeRig(os.path.join(self.root, name), self.sock, {}, script=self.scripts[name],
                        env={"PATH": os.environ["PATH"]}, project=self.repo,
                        server_args=["--soak"])
        rig.prepare()
        run_checked([sys.executable, os.path.join(BIN, "crew-hook"), "--install",
                     str(rig.home / ".claude"), "--command", hook_command()])
        state = json.loads((rig.home / ".claude.json").read_text())
        trust = state["projects"][self.repo]
        state["projects"] = {self.tree(name): dict(trust)}
        (rig.home / ".claude.json").write_text(json.dumps(state))
        self.rigs[name] = rig
        argv = [rig.binary, "--permission-mode", "default", "--allowedTools", "Bash"]
        return ("exec env " + " ".join(shlex.quote(f"{k}={v}") for k, v in rig.claude_env().items())
                + " " + " ".join(map(shlex.quote, argv)))

    def spawn(self, name):
        agent = self.worker_rig(name)
        other = getattr(self.rigs[name], "agent", None)
        r = subprocess.run([sys.executable, os.path.join(BIN, "crew-spawn"), name,
                            *(["--agent", other] if other else []),
                            "--cmd", agent,
                            "--tmux-session", "crew", "--prompt", f"SOAK-START {name}: your day",
                            "--wait", "120s"],
                           cwd=self.repo, capture_output=True, text=True, timeout=300)
        with open(os.path.join(self.root, name, "crew-spawn.out"), "w") as f:
            f.write(r.stdout + r.stderr)      # what it said, for a look afterwards
        if r.returncode != 0:
            raise RuntimeError(f"soak: crew-spawn {name}: exit {r.returncode}: {r.stderr.strip()}")
        self.rigs[name].pane = Session(self.crew, name).reread().meta["tmux"]

    def start_crewup(self):
        out = open(os.path.join(self.root, "crew-up.out"), "ab")
        self.crewup = subprocess.Popen([sys.executable, os.path.join(BIN, "crew-up"), PRIMARY,
                                        "--backoff-max", "1s"], stdout=out, stderr=out)
        out.close()
        wait_for(self.crewup_running, 60, "crew-up's stages running")

    def crewup_running(self):
        st = crewup.read_state(self.crew)
        stages = st.get("stages") or {}
        return (self.crewup is not None and self.crewup.poll() is None
                and st.get("pid") == self.crewup.pid
                and all(stages.get(s, {}).get("running") for s in ("wake", "nudge")))

    def stop_crewup(self):
        if self.crewup and self.crewup.poll() is None:
            self.crewup.send_signal(signal.SIGTERM)
            try:
                self.crewup.wait(60)
            except subprocess.TimeoutExpired:
                self.violations.append(("crew-up", f"pid {self.crewup.pid} did not stop in 60 s"
                                                   " after SIGTERM"))
                self.crewup.kill()
                self.crewup.wait()

    # ------------------------------------------------------------------ the day
    def say(self, what):
        at = time.time() - getattr(self, "t0", time.time())
        self.events.append((at, what))
        print(f"soak: {at:7.1f}s {what}", flush=True)

    def run(self):
        self.environment()
        turns = max(40, int(self.duration / 60 * TURNS_PER_MINUTE))
        self.scripts = {n: day.script(self.seed, n, turns) for n in self.names}
        self.digest = day.digest(self.scripts)
        self.t0 = time.time()
        self.say(f"seed {self.seed}, {len(self.names)} workers, {self.duration:g} s,"
                 f" day {self.digest}")
        if self.codex:
            self.say(f"Codex workers: {', '.join(sorted(self.codex))}")
        if self.gemini:
            self.say(f"Gemini workers: {', '.join(sorted(self.gemini))}")
        self.start_crewup()          # first: no record is written before its cursor
        self.start_primary()
        self.say("primary up")
        for name in self.names:
            self.spawn(name)
            self.say(f"{name} spawned")
        self.t0_day = time.time()
        plan = disturb.plan(self, self.duration)
        end = self.t0_day + self.duration
        checked = time.monotonic()
        while time.time() < end:
            self.samples.take(self)
            if time.monotonic() - checked >= CHECK_EVERY:
                checks.during(self)
                self.panes()
                checked = time.monotonic()
            if plan and time.time() >= self.t0_day + plan[0][0]:
                at, act = plan.pop(0)
                act()
            time.sleep(SAMPLE_EVERY)
        for _, act in plan:          # a disturbance not reached in a short day still happens
            act()
        self.samples.take(self)
        self.say("the day is over: crew-up stops")
        self.t_end = time.time()
        self.stop_crewup()

    def panes(self):
        """The tmux server's panes (id, pid, dead, window), appended to
        panes.log: what a pane-gone or a lost worker is read against."""
        out = self.tmux("list-panes", "-a", "-F", "#{pane_id} #{pane_pid} #{pane_dead}"
                        " #{session_name}:#{window_index} #{window_name}", check=False)
        with open(os.path.join(self.root, "panes.log"), "a") as f:
            f.write(f"{time.time() - self.t0:7.1f}s {' | '.join(out.splitlines())}\n")

    def teardown(self):
        for person in self.people:
            person.close()
        self.stop_crewup()
        subprocess.run(["tmux", "-S", self.sock, "kill-server"], capture_output=True)
        for rig in self.rigs.values():
            rig.stop_model()


class Stopped(BaseException):
    """SIGTERM or SIGINT: the day ends where it is, torn down as at its end.
    Not an Exception: the day's own `except Exception` must not swallow it."""


STOPPING = (signal.SIGTERM, signal.SIGINT)


def stop_on_signals():
    def stop(signum, frame):
        hold_signals()          # a second signal must not cut the teardown short
        raise Stopped(signum)
    for s in STOPPING:
        signal.signal(s, stop)


def hold_signals():
    for s in STOPPING:
        signal.signal(s, signal.SIG_IGN)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--duration", default="20m", help="the day's length (default 20m; 2m, 2h)")
    p.add_argument("--seed", type=int, default=1, help="the day's seed (default 1)")
    p.add_argument("--workers", type=int, default=6, help="how many workers (default 6)")
    p.add_argument("--root", help="the soak's directory (default: a new one in $TMPDIR)")
    p.add_argument("--codex", type=int, default=0, metavar="N",
                   help="how many of the workers are Codex (default 0)")
    p.add_argument("--gemini", type=int, default=0, metavar="N",
                   help="how many of the workers are Gemini, after the Codex ones (default 0)")
    a = p.parse_args(argv)
    if not 0 <= a.codex <= a.workers:
        print(f"soak: --codex {a.codex}: between 0 and --workers ({a.workers})", file=sys.stderr)
        return 2
    if not 0 <= a.gemini <= a.workers - a.codex:
        print(f"soak: --gemini {a.gemini}: between 0 and --workers less --codex"
              f" ({a.workers - a.codex})", file=sys.stderr)
        return 2
    if not find_claude(REPO):
        print("soak: the real Claude Code is not installed (make claude-code)", file=sys.stderr)
        return 3
    if a.codex and not codexrig.find_codex():
        print("soak: the real Codex CLI is not installed (make codex)", file=sys.stderr)
        return 3
    if a.gemini and not geminirig.find_gemini():
        print("soak: the real Gemini CLI is not installed (make gemini)", file=sys.stderr)
        return 3
    root = os.path.abspath(a.root) if a.root else tempfile.mkdtemp(prefix="crewfile-soak-")
    os.makedirs(root, exist_ok=True)
    soak = Soak(root, a.seed, a.workers, parse_duration(a.duration, "--duration"), a.codex,
                a.gemini)
    stopped = None
    stop_on_signals()
    try:
        soak.run()
    except Stopped as e:             # what ran is still torn down, checked and reported
        stopped = e.args[0]
        soak.say(f"stopped by {signal.Signals(stopped).name}: the day ends here")
    except Exception as e:           # a day that could not run is one violation, named
        soak.violations.append(("harness", f"{type(e).__name__}: {e}"))
        traceback.print_exc()
    finally:
        hold_signals()               # from here on a signal waits: the teardown runs whole
        soak.teardown()
    report = checks.report(soak)
    for rig in soak.rigs.values():
        getattr(rig, "forget", lambda: None)()
    print(f"soak: report: {report}")
    with open(report) as f:
        sys.stdout.write(f.read())
    if stopped:
        return 128 + stopped
    return 0 if not soak.violations else 1


if __name__ == "__main__":
    sys.exit(main())
