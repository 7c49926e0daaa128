"""The day's disturbances, each at its share of the day (so a 2-minute day
and a 2-hour one see the same things in the same order):

  - a crew-up stage SIGKILLed (crew-up restarts it);
  - a worker's agent SIGKILLed; its dead pane is given a recorder (a raw
    terminal that writes every byte it receives to a file: nothing may be
    typed there), and later crew-respawn brings the worker back;
  - an aside opened, its agent's attempt to conclude itself refused, then
    concluded by the captain: keys typed in the aside's window and the key
    binding pressed at an attached terminal, as a person does;
  - the tmux server killed and started again: the primary resumed in its
    conversation, the workers by crew-respawn; crew-up goes on;
  - crew-up itself stopped and started again; crew-watch SIGKILLed.
"""
import json
import os
import signal
import subprocess
import sys
import time

from claude_harness import BIN
from conftest import captain_runs
from crewfile.crew import crewup
from crewfile.session.sessions import Session
from terminal import AttachedClient

ASIDE = "aside1"


def plan(soak, duration):
    """[(seconds into the day, act)], in order."""
    d = Disturb(soak)
    return [(0.15 * duration, lambda: d.kill_stage("wake-send")),
            (0.25 * duration, d.kill_worker),
            (0.35 * duration, d.respawn_worker),
            (0.45 * duration, d.open_aside),
            (0.55 * duration, d.conclude_aside),
            (0.65 * duration, d.restart_tmux),
            (0.80 * duration, d.restart_crewup),
            (0.90 * duration, lambda: d.kill_stage("crew-watch"))]


def run(argv, **kw):
    return subprocess.run([sys.executable, os.path.join(BIN, argv[0]), *argv[1:]],
                          capture_output=True, text=True, timeout=120, **kw)


BUSY = "a delivery or respawn is in progress"


def respawn(*names):
    """crew-respawn NAMES; the ones it leaves because a delivery holds them
    (busy is an ordinary answer: a person runs it again) again, for up to
    60 s. Returns ({name: action}, the last run's stderr)."""
    done, todo, deadline = {}, list(names), time.monotonic() + 60
    while True:
        r = run(["crew-respawn", "--json", *todo])
        try:
            done.update({x["name"]: x["action"] for x in json.loads(r.stdout or "[]")})
        except ValueError:
            pass
        todo = [n for n in todo if done.get(n) != "respawned"]
        if not todo or BUSY not in r.stderr or time.monotonic() > deadline:
            return done, r.stderr.strip()
        time.sleep(0.5)


class Disturb:
    def __init__(self, soak):
        self.soak = soak
        self.victim = soak.names[0]
        soak.recorders = []

    def fail(self, what):
        self.soak.violations.append(("disturbance", what))
        self.soak.say(f"FAILED: {what}")

    def kill_stage(self, stage):
        st = crewup.read_state(self.soak.crew).get("stages") or {}
        pids = {n: p for s in st.values() for n, p in (s.get("pids") or {}).items()}
        if stage not in pids:
            return self.fail(f"no {stage} to kill: crew-up's state {json.dumps(st)}")
        os.kill(pids[stage], signal.SIGKILL)
        self.soak.say(f"{stage} pid {pids[stage]} SIGKILLed")

    def kill_worker(self):
        soak, name = self.soak, self.victim
        meta = Session(soak.crew, name).reread().meta
        os.killpg(meta["pid"], signal.SIGKILL)
        soak.say(f"{name}'s agent (pid {meta['pid']}) SIGKILLed")
        pane = meta["tmux"]
        try:
            soak.wait_for(lambda: soak.tmux("display-message", "-p", "-t", pane, "#{pane_dead}",
                                            check=False).strip() == "1", 60, f"{name}'s dead pane")
        except TimeoutError as e:
            return self.fail(str(e))
        record = os.path.join(soak.root, f"recorder-{name}-{len(soak.recorders)}.bin")
        open(record, "wb").close()
        # the shell a crashed agent leaves: here it records what it is sent
        soak.tmux("respawn-pane", "-t", pane, f"stty raw -echo; exec cat > {record}")
        soak.recorders.append((name, pane, record))
        soak.say(f"{name}'s dead pane {pane} now records what it receives")

    def respawn_worker(self):
        done, err = respawn(self.victim)
        if done.get(self.victim) != "respawned":
            return self.fail(f"crew-respawn {self.victim}: {done.get(self.victim)}: {err}")
        self.soak.say(f"crew-respawn {self.victim}: respawned")

    def open_aside(self):
        soak = self.soak
        r = run(["aside-open", ASIDE, "--topic", "the design", "--cmd", "cat >/dev/null",
                 "--tmux-session", "crew"])
        if r.returncode != 0:
            return self.fail(f"aside-open: exit {r.returncode}: {r.stderr.strip()}")
        pane = Session(soak.crew, ASIDE).reread().meta["tmux"]
        person = AttachedClient(soak.tmux, pane)
        soak.people.append(person)
        person.look_at(pane)
        person.type_after(0, b"let us talk about the design\r")
        soak.say(f"{ASIDE} opened; the captain types in it")

    def conclude_aside(self):
        soak = self.soak
        report = os.path.join(soak.root, "aside-report.md")
        with open(report, "w") as f:
            f.write("# the design\nsettled: the plain way\n")
        r = run(["aside-conclude", ASIDE, "--report", report])
        if r.returncode != 1:
            return self.fail(f"the aside concluded itself: aside-conclude exit {r.returncode}"
                             f" ({r.stderr.strip()})")
        soak.say(f"{ASIDE}'s own conclusion refused: {r.stderr.strip()}")
        code, out = captain_runs(soak.tmux, "aside-done", ASIDE, "--note", "settled")
        if code != 0:
            return self.fail(f"the captain's aside-done: exit {code}: {out.strip()}")
        r = run(["aside-conclude", ASIDE, "--report", report])
        if r.returncode != 0:
            return self.fail(f"aside-conclude after the captain's act: exit {r.returncode}:"
                             f" {r.stderr.strip()}")
        soak.say(f"{ASIDE} concluded by the captain (C-b Y at an attached terminal)")

    def restart_tmux(self):
        soak = self.soak
        for person in soak.people:
            person.close()
        soak.people.clear()
        primary = soak.rigs["firstmate"]
        sid = Session(soak.crew, "firstmate").reread().meta.get("agent_session_id")
        # Gone means its process gone: a server told to exit still accepts a
        # client while it tears down, and a new-session sent to it then ends
        # with "server exited unexpectedly" (seen in a soak day, seed 43).
        server = int(soak.tmux("display-message", "-p", "#{pid}").strip())
        subprocess.run(["tmux", "-S", soak.sock, "kill-server"], capture_output=True)
        soak.wait_for(lambda: not os.path.exists(f"/proc/{server}"), 30,
                      "the tmux server's process to be gone")
        soak.say("tmux server killed")
        primary.extra_args = ["--resume", sid]
        w, h = primary.size
        pane = soak.tmux("new-session", "-d", "-P", "-F", "#{pane_id}", "-x", str(w), "-y",
                         str(h), "-c", str(primary.project), primary.command()).strip()
        soak.tmux("set-option", "-w", "-t", pane, "remain-on-exit", "on", check=False)
        try:
            primary.attach(pane, ready_timeout=120)
            soak.wait_for(lambda: Session(soak.crew, "firstmate").reread().meta.get("tmux") == pane,
                          60, "the primary's new pane in its meta")
        except TimeoutError as e:
            return self.fail(f"the primary did not come back: {e}")
        soak.say(f"primary resumed ({sid}) in {pane}")
        done, err = respawn(*soak.names)
        soak.say(f"crew-respawn: {done}")
        soak.panes()
        for name in soak.names:
            if done.get(name) != "respawned":
                self.fail(f"{name} was not respawned after the tmux restart:"
                          f" {done.get(name)} ({err})")

    def restart_crewup(self):
        soak = self.soak
        soak.stop_crewup()
        down = time.monotonic()
        soak.say("crew-up stopped (SIGTERM)")
        soak.start_crewup()
        soak.samples.down_for(time.monotonic() - down, "crew-up restarted")
        soak.say("crew-up started again")
