"""The verdict: what a session is now, from real processes on real tmux servers.

The agent (tests/fake-agent) is started from an interactive shell in the
pane, as a user starts one, with the shell's prompt `❯ ` or `> ` (prompt
markers themselves): when the agent dies the pane falls back to that
shell, and anything typed there would run. Every message here would create
a sentinel file if a shell ran it.
"""
import os
import shlex
import signal
import subprocess
import sys

import pytest

from conftest import BIN, REPO, cmd, wait_for
from crewfile.session import delivery, verdict
from crewfile.session.prompt import DRAFT, captain_at
from crewfile.nudges import nudge, schedules
from crewfile.core.logfile import TailStats
from crewfile.session.sessions import pane_fields, register
from crewfile.wake import inbox
from crewfile.core.liveness import descends_from

FAKE = os.path.join(REPO, "tests", "fake-agent")


def kinds(sess):
    return [r.kind for r in sess.last_records(50, TailStats())]


def captain_lines(sess):
    return [r.text for r in sess.last_records(50, TailStats()) if r.kind == "captain"]


def shell_pane(crew, tmux, name, prompt="\u276f ", env=None):
    """An interactive bash in a new window, prompt *prompt*, set up to start the fake agent."""
    env = dict(env or {}, CREWFILE_SESSION=name, CREWFILE_DIR=crew.root,
               PATH=os.environ["PATH"], LANG="C.UTF-8")
    rc = os.path.join(crew.root, f".bashrc-{name}")
    os.makedirs(crew.root, exist_ok=True)
    with open(rc, "w", encoding="utf-8") as f:
        f.write(f"PS1={shlex.quote(prompt)}\nunset PROMPT_COMMAND\n")
    pane = tmux.new_window(f"bash --rcfile {shlex.quote(rc)} -i", name=name, env=env)
    tmux.wait_screen(pane, lambda s: s.rstrip().endswith(prompt.rstrip()))
    return pane


def start_agent(tmux, sess, pane, env=""):
    """Type the agent's command into the shell; wait until it recorded itself."""
    tmux("send-keys", "-t", pane, "-l", f"{env}{shlex.quote(sys.executable)} {shlex.quote(FAKE)}")
    tmux("send-keys", "-t", pane, "Enter")
    tmux.wait_screen(pane, "ready>")
    wait_for(lambda: sess_meta(sess).get("pid"), what="the agent's pid in meta")
    wait_for(lambda: "started" in kinds(sess), what="started")
    return sess_meta(sess)["pid"]


def sess_meta(sess):
    sess._meta = None
    return sess.meta


def tick(**env):
    p = cmd("nudge-tick", env=env)
    assert p.returncode == 0, p.stderr
    return p.stdout


def make_due(crew, sid):
    s = schedules.get(crew, sid)
    s["base"] = dict(s["base"], wall=s["base"]["wall"] - 10 ** 6, mono=s["base"]["mono"] - 10 ** 6)
    schedules.store(crew, s)


def add_nudge(name, message):
    p = cmd("nudge-add", "--session", name, "--every", "600", "--message", message)
    assert p.returncode == 0, p.stderr
    return p.stdout.split()[0]


@pytest.fixture(params=["\u276f ", "> "])
def crashed_setup(request, crew, tmux, tmp_path):
    sess = register(crew, "w1", tmux=None, cwd=str(tmp_path))
    pane = shell_pane(crew, tmux, "w1", prompt=request.param)
    sess.update_meta(**pane_fields(pane))
    pid = start_agent(tmux, sess, pane)
    return sess, pane, pid, request.param


# -- the verdict itself ---------------------------------------------------------

def test_live_agent_in_its_shell_pane(crew, tmux, tmp_path):
    os.mkdir(tmp_path / ".git")          # a tree of its own, whatever lies above /tmp
    sess = register(crew, "w1", cwd=str(tmp_path))
    pane = shell_pane(crew, tmux, "w1")
    sess.update_meta(**pane_fields(pane))
    assert verdict.of(sess).why.code == verdict.AGENT_UNKNOWN      # before the agent starts
    pid = start_agent(tmux, sess, pane)
    v = verdict.of(sess)
    assert (v.live, v.pane, v.socket) == (verdict.LIVE, pane, tmux.sock)
    assert (v.stopped, v.foreground, v.generating) == (verdict.NO, verdict.YES, verdict.NO)
    assert v.tree == os.path.realpath(str(tmp_path))
    assert sess_meta(sess)["pid"] == pid


def test_captain_at(crew, tmux):
    sess = register(crew, "w1")
    pane = shell_pane(crew, tmux, "w1")
    sess.update_meta(**pane_fields(pane))
    start_agent(tmux, sess, pane)
    assert captain_at(pane, tmux.sock, within=5) == (verdict.NO, None)
    tmux("send-keys", "-t", pane, "-l", "half a thought")
    tmux.wait_screen(pane, "ready> half a thought")
    who, why = captain_at(pane, tmux.sock, within=5)
    assert who == verdict.YES and why.code == DRAFT
    gone = captain_at("%999", tmux.sock, within=5)
    assert gone[0] == verdict.UNKNOWN


def test_recycled_pid_is_not_the_agent(crew, tmux):
    sess = register(crew, "w1")
    pane = shell_pane(crew, tmux, "w1")
    sess.update_meta(**pane_fields(pane))
    start_agent(tmux, sess, pane)
    # A new process with the agent's pid would carry another start time.
    sess.update_meta(pid_start=sess_meta(sess)["pid_start"] + 1)
    v = verdict.of(sess)
    assert (v.live, v.why.code) == (verdict.NOT_LIVE, verdict.AGENT_GONE)
    ok, why = delivery.deliver(sess, "touch never", quiet=0)
    assert not ok and why.code == delivery.NOT_LIVE


def test_a_pane_that_does_not_hold_the_agent_is_not_live(crew, tmux):
    sess = register(crew, "w1")
    pane = shell_pane(crew, tmux, "w1")
    other = tmux.new_window("sleep 600", name="other")
    sess.update_meta(**pane_fields(other))
    start_agent(tmux, sess, pane)        # records its pid: it runs in `pane`, not `other`
    assert verdict.of(sess).why.code == verdict.NOT_IN_PANE


# -- crashes: nothing typed, the schedule disarmed, the watcher told ---------------

def shell_ran_nothing(tmux, pane, sentinel):
    """Whatever was typed into the shell before now has run once this marker's output shows."""
    tmux("send-keys", "-t", pane, "-l", "echo MARK$((40+2))")
    tmux("send-keys", "-t", pane, "Enter")
    tmux.wait_screen(pane, lambda s: "MARK42" in s.replace("MARK$((40+2))", ""))
    assert not os.path.exists(sentinel), "a shell ran the typed message"


def shell_back(tmux, pane, prompt):
    tmux.wait_screen(pane, lambda s: s.rstrip().endswith(prompt.rstrip()) and "ready>" not in
                     s.rstrip().splitlines()[-1])


def test_agent_killed_nothing_typed_schedule_disarmed_watch_says_lost(crashed_setup, crew, tmux,
                                                                        tmp_path):
    sess, pane, pid, prompt = crashed_setup
    sentinel = str(tmp_path / "SENTINEL")
    sid = add_nudge("w1", f"touch {sentinel}")
    make_due(crew, sid)
    os.kill(pid, signal.SIGKILL)                 # no SessionEnd: no `ended` record
    shell_back(tmux, pane, prompt)
    out = tick()
    assert f"{sid} w1 disarmed: refused and disarmed: not-live: agent-gone" in out, out
    assert schedules.get(crew, sid)["armed"] is False
    shell_ran_nothing(tmux, pane, sentinel)
    watch = cmd("crew-watch", "--once")
    assert f"w1 lost: agent process {pid} is gone" in watch.stdout, watch.stdout
    ls = cmd("session-ls")
    assert ls.stdout.splitlines()[1].split()[3] == "no"


def test_agent_stopped_refused_kept_then_delivered(crashed_setup, crew, tmux):
    """SIGSTOP from outside: refused, kept. The shell takes the terminal back;
    SIGCONT alone leaves the agent a background job (still refused: typed
    text would go to the shell); `fg` (the shell's SIGCONT) brings it back
    and the nudge goes out. (A pane's own process cannot stay stopped: tmux
    continues it at once.)"""
    sess, pane, pid, prompt = crashed_setup
    sid = add_nudge("w1", "carry on")
    make_due(crew, sid)
    os.kill(pid, signal.SIGSTOP)
    try:
        wait_for(lambda: verdict.of(sess).stopped == verdict.YES, what="the agent stopped")
        assert f"{sid} w1 refused: stopped" in tick()
        assert schedules.get(crew, sid)["armed"] is True and schedules.get(crew, sid)["attempts"] == 0
        assert cmd("session-ls").stdout.splitlines()[1].split()[3] == "stopped"
    finally:
        os.kill(pid, signal.SIGCONT)
    wait_for(lambda: verdict.of(sess).foreground == verdict.NO, what="the shell in front")
    assert "delivered" not in tick()
    assert schedules.get(crew, sid)["attempts"] == 0
    tmux("send-keys", "-t", pane, "-l", "fg")
    tmux("send-keys", "-t", pane, "Enter")
    wait_for(lambda: verdict.of(sess).foreground == verdict.YES, what="the agent in front again")
    out = []
    try:
        wait_for(lambda: out.append(tick()) or "delivered: attempt 1/100: delivered" in out[-1],
                 what="the nudge after fg")
    except AssertionError:
        raise AssertionError((out[-3:], tmux.screen(pane)))


def test_ctrl_z_puts_the_shell_in_front_nothing_typed(crashed_setup, crew, tmux, tmp_path):
    sess, pane, pid, prompt = crashed_setup
    sentinel = str(tmp_path / "SENTINEL")
    sid = add_nudge("w1", f"touch {sentinel}")
    make_due(crew, sid)
    tmux("send-keys", "-t", pane, "C-z")
    wait_for(lambda: verdict.of(sess).foreground == verdict.NO, what="the shell in front")
    out = tick()
    assert f"{sid} w1 refused: stopped" in out or f"{sid} w1 refused: not-foreground" in out, out
    assert schedules.get(crew, sid)["armed"] is True
    shell_ran_nothing(tmux, pane, sentinel)
    tmux("send-keys", "-t", pane, "-l", "fg")
    tmux("send-keys", "-t", pane, "Enter")
    wait_for(lambda: verdict.of(sess).foreground == verdict.YES, what="the agent in front again")
    wait_for(lambda: "delivered" in tick(), what="the nudge delivered after fg")
    wait_for(lambda: captain_lines(sess) == [f"touch {sentinel}"], what="the agent took it")
    assert not os.path.exists(sentinel)           # the agent records it; it runs nothing


def test_server_restarted_on_the_same_socket_nothing_typed_into_its_new_pane(crew, tmux, tmp_path):
    sess = register(crew, "w1", cwd=str(tmp_path))
    pane = shell_pane(crew, tmux, "w1")
    sess.update_meta(**pane_fields(pane))
    start_agent(tmux, sess, pane)
    assert pane == "%0"
    sentinel = str(tmp_path / "typed-here")
    sid = add_nudge("w1", f"touch {sentinel}")
    make_due(crew, sid)
    tmux.kill()                                   # a reboot, a server crash
    wait_for(lambda: verdict.of(sess).live == verdict.NOT_LIVE, what="the old server gone")
    other = shell_pane(crew, tmux, "other")       # a new server on the same socket
    assert other == "%0"                          # ... whose first pane has the old id
    out = tick()
    assert f"{sid} w1 disarmed: refused and disarmed: not-live:" in out, out
    shell_ran_nothing(tmux, other, sentinel)


def test_server_restarted_the_identity_decides_even_with_a_live_agent_elsewhere(crew, tmux):
    """Without the agent to go by (none recorded), a restarted server is still not the pane's."""
    pane = tmux.new_window("sleep 600", name="w1")
    sess = register(crew, "w1", tmux=pane)
    tmux.kill()
    tmux.new_window("sleep 600", name="again")
    v = verdict.of(sess)
    assert (v.live, v.why.code) == (verdict.NOT_LIVE, verdict.SERVER_RESTARTED)


def test_two_servers_a_tick_naming_the_other_types_nothing_there(crew, tmux, second_server,
                                                                tmp_path, monkeypatch):
    # The agent on server B, registered there; server A has an unrelated shell at %0.
    monkeypatch.setenv("CREWFILE_TMUX", second_server.sock)
    sess = register(crew, "w1", cwd=str(tmp_path))
    pane_b = shell_pane(crew, second_server, "w1")
    sess.update_meta(**pane_fields(pane_b))
    start_agent(second_server, sess, pane_b)
    monkeypatch.setenv("CREWFILE_TMUX", tmux.sock)
    pane_a = shell_pane(crew, tmux, "bystander")
    assert pane_a == pane_b == "%0"
    sentinel = str(tmp_path / "SENTINEL")
    sid = add_nudge("w1", f"touch {sentinel}")
    make_due(crew, sid)
    out = tick(CREWFILE_TMUX=tmux.sock)           # a cron line naming the wrong server
    assert f"{sid} w1 delivered: attempt 1/100: delivered" in out, out
    wait_for(lambda: captain_lines(sess) == [f"touch {sentinel}"], what="B's agent got it")
    shell_ran_nothing(tmux, pane_a, sentinel)
    # ... and with no CREWFILE_TMUX at all (cron's environment)
    make_due(crew, sid)
    env = {k: v for k, v in os.environ.items() if k not in ("CREWFILE_TMUX", "TMUX")}
    p = subprocess.run([sys.executable, os.path.join(BIN, "nudge-tick")], env=env,
                       capture_output=True, text=True)
    assert "delivered: attempt 2/100: delivered" in p.stdout, (p.stdout, p.stderr)
    wait_for(lambda: len(captain_lines(sess)) == 2, what="the second nudge")


def test_crew_watch_says_lost_within_its_probe(crashed_setup, crew, tmux):
    sess, pane, pid, prompt = crashed_setup
    watch = subprocess.Popen([sys.executable, os.path.join(BIN, "crew-watch"), "--probe", "0.2s"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        os.kill(pid, signal.SIGKILL)
        for line in watch.stdout:
            if " w1 lost: " in line:
                assert f"agent process {pid} is gone" in line
                break
    finally:
        watch.kill()
        watch.wait()


def test_wake_send_holds_for_a_dead_primary_and_says_so_once(crew, tmux, tmp_path):
    sess = register(crew, "boss", kind="primary", cwd=str(tmp_path))
    pane = shell_pane(crew, tmux, "boss")
    sess.update_meta(**pane_fields(pane))
    pid = start_agent(tmux, sess, pane)
    os.kill(pid, signal.SIGKILL)
    shell_back(tmux, pane, "\u276f ")
    sentinel = str(tmp_path / "SENTINEL")
    line = f"2026-11-30T20:00:00.000Z w1 blocked: $(touch {sentinel})\n"
    send = subprocess.Popen([sys.executable, os.path.join(BIN, "wake-send"), "boss", "--window",
                             "0.05s", "--retry", "0.05s", "--say", f"touch {sentinel}"],
                            stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    send.stdin.write(line)
    send.stdin.flush()
    # Held (retried every 0.05 s while input stays open, said once); at the
    # end of input one last try, held again, and it exits.
    wait_for(lambda: inbox_texts(crew, "boss"), what="the wake in the inbox")
    send.stdin.close()
    err = send.stderr.read()
    assert send.wait(timeout=30) == 0
    assert err.count("holding the announcement") == 1, err
    assert "not-live: agent-gone" in err
    assert inbox_texts(crew, "boss") == [line.strip()]
    shell_ran_nothing(tmux, pane, sentinel)


def inbox_texts(crew, name):
    return [n.text for n in inbox.pending(crew, name)]


# -- delivered means taken --------------------------------------------------------

def test_an_enter_swallowed_once_is_pressed_again_and_the_nudge_is_taken(crew, tmux):
    sess, pane = tmux.agent_window(crew, "w1", f"FAKE_ENTER=swallow-first {shlex.quote(FAKE)}")
    tmux.wait_screen(pane, "ready>")
    wait_for(lambda: sess_meta(sess).get("pid") and "started" in kinds(sess), what="started")
    ok, why = delivery.deliver(sess, "keep going", quiet=0)
    assert ok and why.code == delivery.DELIVERED, why
    notes = [r.text for r in sess.last_records(50, TailStats()) if r.kind == "note"]
    assert len(notes) == 1 and notes[0].startswith("swallowed an Enter"), notes
    wait_for(lambda: captain_lines(sess) == ["keep going"], what="the text taken once")


def test_an_agent_that_never_takes_the_text_is_not_delivered(crew, tmux):
    sess, pane = tmux.agent_window(crew, "w1", f"FAKE_ENTER=never {shlex.quote(FAKE)}")
    tmux.wait_screen(pane, "ready>")
    wait_for(lambda: sess_meta(sess).get("pid") and "started" in kinds(sess), what="started")
    sid = add_nudge("w1", "keep going")
    make_due(crew, sid)
    out = tick()
    assert f"{sid} w1 failed: attempt 1/100: not-submitted: Enter pressed twice" in out, out
    assert "ready> keep going" in tmux.screen(pane)        # left visible, never `delivered`
    assert captain_lines(sess) == []
    kinds_now = [r.kind for r in sess.last_records(50, TailStats())]
    assert "nudge-failed" in kinds_now and "nudge" not in kinds_now
    make_due(crew, sid)                                    # the draft holds the next one
    assert f"{sid} w1 refused: draft" in tick()
    ok, why = delivery.deliver(sess, "more", quiet=0)
    assert not ok and why.code == delivery.DRAFT


def test_a_prompt_line_cleared_without_a_record_is_unconfirmed_never_delivered(crew, tmux,
                                                                               monkeypatch):
    """Issue 18: an agent that records its prompts is believed by its record,
    not its screen. This one clears its prompt line at Enter and never takes
    the text (a TUI mid-redraw dropping it): the nudge is `unconfirmed`,
    recorded so, typed once and never again (the screen rule said delivered)."""
    monkeypatch.setattr(delivery, "RECORD_SECONDS", 4.0)
    sess, pane = tmux.agent_window(crew, "w1", f"FAKE_ENTER=vanish {shlex.quote(FAKE)}")
    tmux.wait_screen(pane, "ready>")
    wait_for(lambda: sess_meta(sess).get("pid") and "started" in kinds(sess), what="started")
    assert delivery.records_prompts(sess)
    sid = add_nudge("w1", "keep going")
    make_due(crew, sid)
    with nudge.tick_lock(crew):
        [out] = nudge.tick(crew)
    assert out.outcome == nudge.UNCONFIRMED and out.why.code == delivery.UNCONFIRMED, out.reason
    recs = sess.last_records(50, TailStats())
    assert [r.text for r in recs if r.kind == "note"] == ["vanished: keep going"]
    assert [r.kind for r in recs if r.kind.startswith("nudge")] == ["nudge-unconfirmed"]
    assert captain_lines(sess) == [] and "turn-started" not in kinds(sess)
    assert schedules.get(crew, sid)["last_outcome"] == nudge.UNCONFIRMED
    assert "keep going" not in tmux.screen(pane)


def test_a_slow_prompt_hook_is_waited_for(crew, tmux):
    """The prompt line is empty at once, the record comes seconds later (a hook
    slow on a loaded machine): delivered, once, when the record came."""
    sess, pane = tmux.agent_window(crew, "w1", f"FAKE_HOOK_DELAY=3 {shlex.quote(FAKE)}")
    tmux.wait_screen(pane, "ready>")
    wait_for(lambda: sess_meta(sess).get("pid") and "started" in kinds(sess), what="started")
    ok, why = delivery.deliver(sess, "keep going", quiet=0)
    assert ok and why.code == delivery.DELIVERED, why
    assert "turn-started" in kinds(sess)
    wait_for(lambda: kinds(sess)[-1] == "turn-ended", what="the turn")
    assert captain_lines(sess) == ["keep going"]


@pytest.mark.parametrize("agent,lines,recorded", [
    (None, ["registered"], False),                          # no hook has run yet
    (None, ["registered", "started"], True),                # crew-hook's SessionStart
    ("codex", ["registered", "turn-ended"], False),         # Codex through notify only
    ("codex", ["registered", "started", "turn-started", "turn-ended"], True),
    ("gemini", ["started", "registered", "respawned"], False),   # an earlier life's hook
    ("gemini", ["registered", "respawned", "started"], True),
])
def test_which_sessions_record_their_prompts(crew, agent, lines, recorded):
    """Known from meta `agent` and the session's records, never the screen."""
    sess = register(crew, "w1", extra={"agent": agent} if agent else None)
    with open(sess.status_path, "w") as f:
        f.writelines(f"2026-11-30T10:00:0{i}.000Z {kind}\n" for i, kind in enumerate(lines))
    assert delivery.records_prompts(sess) is recorded


def test_crew_hook_finds_the_agent_among_its_ancestors_and_repairs_it(crew, tmux, tmp_path):
    """crew-hook run by the agent (through a shell, as Claude Code runs hooks)
    records the agent, not the shell or itself, with its pane's server from
    $TMUX even when CREWFILE_TMUX names another server; a later event
    repairs a wrong record."""
    sess = register(crew, "w1", cwd=str(tmp_path))
    pane = shell_pane(crew, tmux, "w1", env={"CREWFILE_TMUX": "/nonexistent/other-server"})
    tmux("send-keys", "-t", pane, "-l", f"FAKE_NO_RECORD=1 {shlex.quote(sys.executable)} "
                                        f"{shlex.quote(FAKE)}")
    tmux("send-keys", "-t", pane, "Enter")
    tmux.wait_screen(pane, "ready>")
    wait_for(lambda: "started" in kinds(sess), what="started")
    assert "pid" not in sess_meta(sess)
    hook = f"{shlex.quote(sys.executable)} {shlex.quote(os.path.join(BIN, 'crew-hook'))}"

    def event(name):
        payload = '{"hook_event_name": "%s", "session_id": "c1", "source": "startup", "prompt": "x"}'
        tmux("send-keys", "-t", pane, "-l", f"RUN: echo '{payload % name}' | {hook}")
        tmux("send-keys", "-t", pane, "Enter")
    n = kinds(sess).count("turn-ended")
    event("SessionStart")
    wait_for(lambda: kinds(sess).count("turn-ended") > n, what="the hook's turn")
    meta = sess_meta(sess)
    shell = tmux.pane_pid(pane)
    agent = [p for p in os.listdir("/proc") if p.isdigit() and cmdline(p)[1:2] == [FAKE.encode()]
             and descends_from(int(p), shell)]
    assert [str(meta.get("pid"))] == agent, (meta, agent)
    assert (meta["tmux"], meta["tmux_socket"]) == (pane, tmux.sock)
    assert verdict.of(sess).live == verdict.LIVE
    sess.update_meta(pid=1, pid_start=0)                 # a wrong record ...
    n = kinds(sess).count("turn-ended")
    event("UserPromptSubmit")                            # ... repaired at the next prompt
    wait_for(lambda: kinds(sess).count("turn-ended") > n, what="the hook's turn")
    assert str(sess_meta(sess)["pid"]) == agent[0]


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []
