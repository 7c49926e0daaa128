"""Model-based test of nudge-tick (hypothesis stateful testing).

The real tick logic runs over real schedule files, real session metadata,
real status logs and real locks; only the world it looks at (liveness, turn
state, the screen's answer, the clocks, delivery itself) is a model, so
random sequences of session states, trees, clock moves, reboots, ticks and
failed deliveries can be explored quickly. test_nudge.py covers the same
path against real tmux.
"""
import os
import shutil
import tempfile

from hypothesis import settings, strategies as st
from hypothesis.stateful import (RuleBasedStateMachine, initialize, invariant,
                                 rule)

from crewfile.nudges import nudge, schedules
from crewfile.session import verdict
from crewfile.session.verdict import Answer
from crewfile.core.paths import Crew
from crewfile.session.sessions import register

# gone: the pane and agent gone; agent-gone: the agent process died, its pane
# lives on (a shell took it back); stopped: SIGSTOP/Ctrl-Z; background: the
# agent runs but another process holds its pane's terminal.
STATES = ["gone", "agent-gone", "idle", "generating", "unknown", "dialog", "captain",
          "stopped", "background"]
NOT_LIVE = {"gone", "agent-gone"}
BUSY = {"generating": Answer("generating", "a turn is running"),
        "unknown": Answer("state-unknown", "no record"),
        "dialog": Answer("permission-dialog", "up"), "captain": Answer("captain-typing", "keys 1s ago"),
        "stopped": Answer("stopped", "SIGSTOP"), "background": Answer("not-foreground", "a shell")}
# cwd choices (relative to the machine's root) and the tree each lies in, by hand:
# repo/ is a git repository; plain/ and plain/inner are not; None is unknown.
CWDS = ["repo", "repo/a", "repo/b", "plain", "plain/inner", "other", None]
TREE = {"repo": "repo", "repo/a": "repo", "repo/b": "repo", "plain": "plain",
        "plain/inner": "plain/inner", "other": "other", None: None}
NAMES = ["s0", "s1", "s2"]
USER = "cap"


def conflict(a, b):
    """Model of question 3 for two cwd choices."""
    ta, tb = TREE[a], TREE[b]
    if ta is None or tb is None:
        return True
    return ta == tb or ta.startswith(tb + "/") or tb.startswith(ta + "/")


class ModelWorld(nudge.World):
    def __init__(self, crew, model):
        super().__init__(crew)
        self.m = model

    def now(self):
        return self.m.clock()

    def live(self, name):
        return verdict.NOT_LIVE if self.m.state[name] in NOT_LIVE else verdict.LIVE

    def live_why(self, name):
        return "agent-gone: model"

    def busy(self, name, screen):
        return BUSY.get(self.m.state[name])

    def deliver(self, name, text):
        m = self.m
        # The invariant: nothing is ever typed unless the recorded agent is
        # live and in the foreground of its pane (delivery asks the verdict).
        m.typed_while[m.state[name]] = m.typed_while.get(m.state[name], 0) + 1
        if m.state[name] != "idle":          # delivery's own re-check
            why = (Answer("not-live", "gone") if m.state[name] in NOT_LIVE
                   else BUSY[m.state[name]])
            return False, why
        # The invariants, at the moment of delivery:
        for other in m.cwd:
            assert other == name or m.state[other] in NOT_LIVE or not conflict(m.cwd[name], m.cwd[other]), \
                f"delivered to {name} with {other} live in an overlapping tree"
        if m.fail_next:
            m.fail_next = False
            return False, Answer("failed", "injected delivery failure")
        sched = m.sched[name]
        m.deliveries.append((name, sched["gen"], sched["every"], m.clock(), m.true))
        return True, Answer("delivered")


class NudgeMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.root = tempfile.mkdtemp(prefix="cf-model-")
        self.crew = Crew(os.path.join(self.root, "crew"))
        for d in ("repo/.git", "repo/a", "repo/b", "plain/inner", "other"):
            os.makedirs(os.path.join(self.root, "trees", d))
        self.state, self.cwd = {}, {}
        self.true, self.offset, self.boot, self.boot_start = 1000.0, 1.8e9, 0, 0.0
        self.fail_next = False
        self.deliveries = []
        self.typed_while = {}   # model state -> deliveries attempted in it
        self.sched = {}         # name -> model of its schedule: every, max, base, armed, attempts

    def teardown(self):
        shutil.rmtree(self.root, ignore_errors=True)

    def clock(self):
        return {"wall": self.true + self.offset, "mono": self.true - self.boot_start,
                "boot": f"boot{self.boot}"}

    @initialize(cwds=st.lists(st.sampled_from(CWDS), min_size=len(NAMES), max_size=len(NAMES)),
                states=st.lists(st.sampled_from(["idle", "gone", "agent-gone", "generating",
                                                 "stopped"]),
                                min_size=len(NAMES), max_size=len(NAMES)))
    def sessions(self, cwds, states):
        for i, (name, cwd, state) in enumerate(zip(NAMES, cwds, states)):
            path = os.path.join(self.root, "trees", cwd) if cwd else None
            register(self.crew, name, tmux=f"%{900 + i}", cwd=path,
                     session_key=f"key-{name}", agent_session_id=f"agent-{name}")
            self.state[name], self.cwd[name] = state, cwd

    # -- the world moves ------------------------------------------------------
    @rule(name=st.sampled_from(NAMES), state=st.sampled_from(STATES))
    def set_state(self, name, state):
        self.state[name] = state

    @rule(dt=st.sampled_from([1, 5, 30, 59, 60, 61, 300, 3600]))
    def time_passes(self, dt):
        self.true += dt

    @rule(delta=st.sampled_from([-86400, -3600, -30, 30, 3600, 86400]))
    def wall_clock_set(self, delta):
        self.offset += delta

    @rule(dt=st.sampled_from([20, 120, 4000]))
    def reboot(self, dt):
        self.true += dt
        self.boot += 1
        self.boot_start = self.true

    @rule()
    def next_delivery_fails(self):
        self.fail_next = True

    # -- the captain ----------------------------------------------------------
    @rule(name=st.sampled_from(NAMES), every=st.sampled_from([1, 60, 300]),
          max_attempts=st.sampled_from([1, 2, 5]), by=st.sampled_from(["name", "key", "agent"]))
    def add(self, name, every, max_attempts, by):
        ident = {"name": {"session": name}, "key": {"session_key": f"key-{name}"},
                 "agent": {"agent_session_id": f"agent-{name}"}}[by]
        schedules.add(self.crew, every, f"continue {name}", max_attempts=max_attempts, user=USER,
                  replace_existing=True, now=self.clock(), **ident)
        gen = self.sched.get(name, {}).get("gen", 0) + 1      # --replace: a new schedule
        self.sched[name] = {"every": every, "max": max_attempts, "base": self.clock(),
                            "armed": True, "attempts": 0, "gen": gen}

    # -- the tick -------------------------------------------------------------
    def _model_elapsed(self, base):
        now = self.clock()
        if base["boot"] == now["boot"]:
            return now["mono"] - base["mono"]
        return now["wall"] - base["wall"]

    @rule()
    def tick(self):
        expect_delivery, expect_disarm = set(), set()
        before = {}
        for name, s in self.sched.items():
            if not s["armed"]:
                continue
            e = self._model_elapsed(s["base"])
            if e < 0:
                s["base"] = self.clock()          # the clock went back across a reboot
                continue
            if e < s["every"]:
                continue
            before[name] = s
            if self.state[name] in NOT_LIVE:
                expect_disarm.add(name)
            elif self.state[name] == "idle" and not any(
                    o != name and self.state[o] not in NOT_LIVE and conflict(self.cwd[name], self.cwd[o])
                    for o in NAMES):
                expect_delivery.add(name)
        n = len(self.deliveries)
        failing = self.fail_next
        lock = nudge.tick_lock(self.crew)
        assert lock is not None
        with lock:
            nudge.tick(self.crew, ModelWorld(self.crew, self))
        delivered = {d[0] for d in self.deliveries[n:]}
        stored = {s["session"]: s for s in nudge.load_all(self.crew)}
        for name in expect_disarm:
            assert not stored[name]["armed"], f"{name} not live but its schedule is armed"
        attempted = {name for name in before
                     if stored[name]["attempts"] > before[name]["attempts"]}
        # Held back only by a busy target: out at the first tick after the turn ends.
        for name in expect_delivery:
            assert name in attempted, f"{name} was due, idle and alone, but not nudged"
        assert delivered <= attempted
        if not failing:
            assert delivered == attempted
        assert attempted <= expect_delivery, f"attempted {attempted - expect_delivery} unexpectedly"
        for name in attempted:
            s = self.sched[name]
            s["attempts"] += 1
            s["base"] = self.clock()
            if s["attempts"] >= s["max"]:
                s["armed"] = False
        for name in expect_disarm:
            self.sched[name]["armed"] = False
        for name, s in self.sched.items():
            assert stored[name]["armed"] == s["armed"], name
            assert stored[name]["attempts"] == s["attempts"], name

    # -- always -----------------------------------------------------------------
    @invariant()
    def nothing_typed_unless_live_and_in_front(self):
        assert set(self.typed_while) <= {"idle"}, self.typed_while

    @invariant()
    def attempts_never_exceed_max(self):
        for s in nudge.load_all(self.crew):
            assert s["attempts"] <= s["max"]
            if s["attempts"] == s["max"]:
                assert not s["armed"]

    @invariant()
    def one_delivery_per_floor(self):
        last = {}
        for name, gen, every, clock, true in self.deliveries:
            if (name, gen) in last:
                pclock, ptrue = last[(name, gen)]
                if pclock["boot"] == clock["boot"]:
                    assert clock["mono"] - pclock["mono"] >= every
                else:
                    assert clock["wall"] - pclock["wall"] >= every or true - ptrue >= every
            last[(name, gen)] = (clock, true)

    @invariant()
    def one_schedule_per_user_and_session(self):
        seen = [s["session"] for s in nudge.load_all(self.crew)]
        assert len(seen) == len(set(seen))


NudgeMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=50,
                                          deadline=None)
TestNudgeModel = NudgeMachine.TestCase
