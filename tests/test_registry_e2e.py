"""The real Claude Code (offline, against tests/model_server.py): sessions
registered from its own registry ($HOME/.claude/sessions/PID.json), kept
across `claude --resume`, held when the registry disagrees, and its
background sessions (`claude --bg`) adopted and reported `lost` when killed.

No crewfile hook is installed here: the registry alone tells crewfile who
the agent is (the rig's own Stop hook only counts turns).
"""
import json
import os
import shlex
import signal
import subprocess
import sys

import pytest

from claude_harness import BIN, ClaudeRig, find_claude, make_rig, records, require_real_claude
from conftest import REPO, cmd, make_due, wait_for
from crewfile.session import verdict
from crewfile.session.sessions import Session

pytestmark = pytest.mark.skipif(not find_claude(REPO), reason="checked in require_real_claude")


@pytest.fixture
def rig(tmp_path, tmux, crew):
    require_real_claude()
    r = ClaudeRig(tmp_path / "claude", tmux.sock, {}, script=[])
    r.prepare()
    yield r
    r.stop_model()


def entries(rig):
    """The registry's entries that read whole now: Claude Code rewrites a
    file in place (2.1.197 was caught with one empty)."""
    found = {}
    for p in (rig.home / ".claude" / "sessions").glob("*.json"):
        try:
            found[int(p.stem)] = json.loads(p.read_text())
        except (ValueError, FileNotFoundError):
            continue
    return found


def registry(rig):
    return str(rig.home / ".claude" / "sessions")


def claude_in_shell(rig, tmux, pane, *args):
    """Start claude from the pane's shell (it stays when claude exits), as a
    user types it; wait for its prompt and its registry entry."""
    before = set(entries(rig))
    line = rig.command().replace(" && exec env ", " && env ") + "".join(
        " " + shlex.quote(a) for a in args)
    tmux("send-keys", "-t", pane, "-l", line)
    tmux("send-keys", "-t", pane, "Enter")
    rig.attach(pane)
    pid = wait_for(lambda: next(iter(set(entries(rig)) - before), None), timeout=30,
                   what="claude's registry entry")
    return pid, entries(rig)[pid]


def shell_back(tmux, pane):
    wait_for(lambda: tmux("display-message", "-p", "-t", pane,
                          "#{pane_current_command}").strip() == "bash", timeout=30,
             what="the pane's shell back in front")


def live(crew, name):
    return verdict.of(Session(crew, name))


def test_a_registration_from_the_registry_survives_claude_resume(rig, tmux, crew, tmp_path):
    pane = tmux.new_window("bash --norc --noprofile", name="w1")
    pid, entry = claude_in_shell(rig, tmux, pane)
    sid = entry["sessionId"]
    p = cmd("session-add", "w1", "--from-registry", "--tmux", pane, "--registry", registry(rig))
    assert p.returncode == 0, p.stderr
    if entry.get("tmux"):                    # 2.1.332 names its pane (2.1.197 does not)
        assert entry["tmux"].endswith("." + pane)
    assert p.stdout == f"w1: registered: agent process {pid}, conversation {sid}, pane {pane}\n"
    assert live(crew, "w1").live == verdict.LIVE
    rig.turn("hello")

    rig.send("/exit")                        # no crewfile hook: nothing records the end
    shell_back(tmux, pane)
    wait_for(lambda: pid not in entries(rig), what="the entry removed at exit")
    assert live(crew, "w1").why.code == verdict.AGENT_GONE
    cursor = str(tmp_path / "cursor")
    watch = cmd("crew-watch", "--once", "--cursor", cursor).stdout
    assert watch.count(" w1 lost: ") == 1 and f"agent process {pid} is gone" in watch, watch

    new, entry = claude_in_shell(rig, tmux, pane, "--resume", sid)
    assert (new != pid, entry["sessionId"]) == (True, sid)   # a new process, the same conversation
    p = cmd("session-add", "w1", "--from-registry", "--tmux", pane, "--registry", registry(rig))
    assert p.returncode == 0, p.stderr
    assert p.stdout == f"w1: repaired: agent process {new}, conversation {sid}, pane {pane}\n"
    v = live(crew, "w1")
    assert (v.live, v.pane, v.conversation) == (verdict.LIVE, pane, sid)
    assert records(crew, "w1")[-1] == ("registered", f"from the agent registry: agent process"
                                                     f" {new}, conversation {sid}")
    assert [k for k, _ in records(crew, "w1")].count("registered") == 2   # one row, its log kept
    assert "lost" not in cmd("crew-watch", "--once", "--cursor", cursor).stdout
    rig.turn("again")                        # the resumed conversation goes on
    rig.send("/exit")
    shell_back(tmux, pane)


def test_a_conversation_changed_under_crewfile_is_unknown_and_no_nudge_is_typed(
        rig, tmux, crew, tmp_path):
    """/clear starts a new conversation in the same process; without the hook
    crewfile's row still names the old one. The registry says so: unknown,
    and the nudge meant for the old conversation is refused, kept."""
    pane = tmux.new_window("bash --norc --noprofile", name="w1")
    pid, entry = claude_in_shell(rig, tmux, pane)
    old = entry["sessionId"]
    p = cmd("session-add", "w1", "--from-registry", "--tmux", pane, "--registry", registry(rig))
    assert p.returncode == 0, p.stderr
    sentinel = tmp_path / "SENTINEL"
    p = cmd("nudge-add", "--session", "w1", "--every", "600", "--message",
            f"RUN: touch {sentinel}")
    assert p.returncode == 0, p.stderr
    nid = p.stdout.split()[0]
    rig.send("/clear")
    new = wait_for(lambda: entries(rig).get(pid, {}).get("sessionId") not in (None, old)
                   and entries(rig)[pid]["sessionId"], timeout=30, what="a new conversation")
    why = f"the agent registry says process {pid} holds conversation {new}, not {old}"
    v = live(crew, "w1")
    assert (v.live, v.why) == (verdict.UNKNOWN,
                               verdict.Answer(verdict.REGISTRY_DISAGREES, why))
    rig.wait_ready()
    make_due(crew, nid)
    out = cmd("nudge-tick").stdout
    assert f"{nid} w1 refused: live-unknown: {verdict.REGISTRY_DISAGREES}: {why}" in out, out
    assert not sentinel.exists() and len(rig.main_requests()) == 0
    p = cmd("session-add", "w1", "--from-registry", "--tmux", pane, "--registry", registry(rig))
    assert p.stdout == f"w1: repaired: agent process {pid}, conversation {new}, pane {pane}\n"
    assert live(crew, "w1").live == verdict.LIVE


def test_a_killed_background_session_is_reported_lost_once(rig, crew, tmp_path):
    env = dict(os.environ, **rig.claude_env())
    daemon = []

    def claude(*args, timeout=60):
        return subprocess.run([rig.binary, *args], cwd=rig.project, env=env, timeout=timeout,
                              capture_output=True, text=True)
    try:
        out = claude("--bg", "hello")
        if out.returncode != 0:
            pytest.fail(f"claude --bg: exit {out.returncode}: {out.stderr}{out.stdout}")
        daemon.append(True)
        job = out.stdout.split("backgrounded \u00b7 ", 1)[1].split()[0]
        listed = wait_for(lambda: [a for a in json.loads(claude("agents", "--json").stdout)
                                   if a["id"] == job and a.get("pid")], timeout=60,
                          what="the background session listed with its pid")[0]
        pid = listed["pid"]
        wait_for(lambda: pid in entries(rig), what="its registry entry")
        assert entries(rig)[pid]["kind"] == "bg" and entries(rig)[pid]["jobId"] == job
        p = cmd("session-add", "b1", "--adopt", job, "--registry", registry(rig))
        assert p.returncode == 0, p.stderr
        assert p.stdout == (f"b1: registered: agent process {pid},"
                            f" conversation {listed['sessionId']}\n")
        assert live(crew, "b1").live == verdict.LIVE
        cursor = str(tmp_path / "cursor")
        assert "lost" not in cmd("crew-watch", "--once", "--cursor", cursor).stdout

        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: live(crew, "b1").live == verdict.NOT_LIVE, what="b1 not live")
        watch = cmd("crew-watch", "--once", "--cursor", cursor).stdout
        assert watch.count(" b1 lost: ") == 1, watch
        assert f"b1 lost: agent process {pid} is gone" in watch
        assert " lost" not in cmd("crew-watch", "--once", "--cursor", cursor).stdout

        # Its daemon usually starts it again under a new pid (seen within seconds
        # with 2.1.332; once not within 90 s with 2.1.197 on a loaded machine):
        # `session-add b1 --adopt JOB` then moves the row (tests/test_adopt.py).
    finally:
        if daemon:
            claude("daemon", "stop", "--any")


def test_a_background_session_stopped_on_purpose_has_ended_not_lost(tmp_path, tmux, crew):
    """With crew-hook installed, the adopted row gets the session's own
    records (its hooks find it by its conversation id), and `claude stop`
    ends it: `ended`, no `lost`."""
    require_real_claude()
    rig = make_rig(tmp_path / "claude", tmux, env={"CREWFILE_DIR": crew.root})
    rig.prepare()
    env = dict(os.environ, **rig.claude_env())
    started = False

    def claude(*args, timeout=60):
        return subprocess.run([rig.binary, *args], cwd=rig.project, env=env, timeout=timeout,
                              capture_output=True, text=True)
    try:
        out = claude("--bg", "hello")
        assert out.returncode == 0, out.stderr + out.stdout
        started = True
        job = out.stdout.split("backgrounded \u00b7 ", 1)[1].split()[0]
        pid = wait_for(lambda: next((p for p, e in entries(rig).items()
                                     if e.get("jobId") == job), None), timeout=60,
                       what=lambda: f"its registry entry (job {job}; entries: {entries(rig)})")
        p = cmd("session-add", "b1", "--adopt", job, "--registry", registry(rig))
        assert p.returncode == 0, p.stderr
        cursor = str(tmp_path / "cursor")
        cmd("crew-watch", "--once", "--cursor", cursor)
        out = claude("stop", job)
        assert out.returncode == 0, out.stderr + out.stdout
        wait_for(lambda: "ended" in [k for k, _ in records(crew, "b1")], timeout=30,
                 what="b1's ended record")
        wait_for(lambda: live(crew, "b1").why.code == verdict.ENDED, timeout=30,
                 what="b1 ended, its process gone")      # the hook runs before it exits
        watch = cmd("crew-watch", "--once", "--cursor", cursor).stdout
        assert " b1 ended" in watch and " lost" not in watch, watch
    finally:
        if started:
            claude("daemon", "stop", "--any")
        rig.stop_model()


def test_the_agent_registers_itself_from_its_own_shell(tmp_path, tmux, crew):
    """session-add --from-registry run by the agent's Bash tool: the agent is
    the nearest ancestor with an entry, its registry the one of its HOME,
    its pane $TMUX_PANE."""
    require_real_claude()
    path = f"{os.path.dirname(sys.executable)}:{BIN}:{os.environ['PATH']}"
    rig = ClaudeRig(tmp_path / "claude", tmux.sock, {}, script=[],
                    env={"PATH": path, "CREWFILE_DIR": crew.root})
    rig.prepare()
    try:
        pane = tmux.new_window("bash --norc --noprofile", name="w1")
        pid, entry = claude_in_shell(rig, tmux, pane)
        rig.turn("RUN: session-add w1 --from-registry > added.txt 2>&1")
        said = (rig.project / "added.txt").read_text()
        assert said == (f"w1: registered: agent process {pid}, conversation"
                        f" {entry['sessionId']}, pane {pane}\n")
        meta = Session(crew, "w1").meta
        assert (meta["agent_registry"], meta["cwd"]) == (registry(rig), str(rig.project))
        assert live(crew, "w1").live == verdict.LIVE
        rig.send("/exit")
        shell_back(tmux, pane)
    finally:
        rig.stop_model()
