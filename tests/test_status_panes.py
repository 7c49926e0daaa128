"""crew-status --panes: the pane list a tmux status line hands in, so that
crew-status (run by tmux every few seconds) need not ask tmux.

The list is used only for a session whose records name the very server it
comes from (socket and identity); for any other session, or a list that is
not exactly what tmux expands, tmux is asked as before. The verdicts are
compared with the ones tmux's own answer gives, on real private servers.
"""
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import BIN, REPO, TmuxServer, cmd, wait_for
from crewfile.views import glance
from crewfile.session import tmux as tmuxmod
from crewfile.core.paths import Crew
from crewfile.session.sessions import Session, register
from crewfile.session.tmux import LISTED_FORMAT, Server
from crewfile.session.verdict import Look
from crewfile.core.locks import is_held


def listed_text(server):
    """LISTED_FORMAT as *server* expands it (display-message: the same
    expansion as a status line's #(); the status line itself is tested below)."""
    return server("display-message", "-p", LISTED_FORMAT).rstrip("\n")


def verdicts(crew, look):
    """{name: (word, live, why code)}: what the views show of each session."""
    return {r.name: (r.word, r.state["live"] if r.state else None,
                     r.state["why"] if r.state else None) for r in glance.rows(crew, look)}


def agent(crew, server, name, records=("turn-started",), pid=None):
    """Session NAME in a new pane on *server*, its agent the pane's process
    (or *pid*: a process elsewhere, which outlives the pane)."""
    pane = server.new_window("sleep 600", name=name)
    sess = register(crew, name, tmux=pane, pid=pid or server.pane_pid(pane),
                    env={"CREWFILE_TMUX": server.sock})
    for kind in records:
        sess.append(kind)
    return sess, pane


@pytest.fixture
def outsider():
    """A live process in no pane: the recorded agent of a session whose
    pane is gone, dead, or holds something else, so that only the pane
    facts (tmux's, or the list's) make it lost."""
    proc = subprocess.Popen(["sleep", "600"])
    yield proc.pid
    proc.kill()
    proc.wait()


def kill_pane(server, pane, keep_dead=False):
    if keep_dead:
        server("set-option", "-p", "-t", pane, "remain-on-exit", "on")
        server("respawn-pane", "-k", "-t", pane, "exit 0")
        wait_for(lambda: server("display-message", "-p", "-t", pane,
                                "#{pane_dead}").strip() == "1", what="the dead pane")
    else:
        server("kill-pane", "-t", pane)


@pytest.fixture
def every_state(crew, tmux, second_server, outsider):
    """A crew with a session in each liveness state the pane list decides,
    on the crew's server (tmux), one on another server, one with no pane."""
    agent(crew, tmux, "live")
    agent(crew, tmux, "idle", records=("turn-started", "turn-ended"))
    kill_pane(tmux, agent(crew, tmux, "gone", pid=outsider)[1])
    kill_pane(tmux, agent(crew, tmux, "dead", pid=outsider)[1], keep_dead=True)
    agent(crew, tmux, "not-in-pane", pid=outsider)
    pane = tmux.new_window("sleep 600", name="no-agent")
    register(crew, "no-agent", tmux=pane, env={"CREWFILE_TMUX": tmux.sock}).append("idle")
    sess, _ = agent(crew, tmux, "restarted")
    sess.update_meta(tmux_server="1@1")              # recorded on an earlier server
    agent(crew, second_server, "other-server")
    register(crew, "no-pane").append("turn-started")
    return crew


EXPECTED = {
    "dead": ("lost", "no", "pane-gone"),
    "gone": ("lost", "no", "pane-gone"),
    "idle": ("idle", "yes", None),
    "live": ("working", "yes", None),
    "no-agent": ("idle", "unknown", "agent-unknown"),
    "no-pane": ("working", "unknown", "no-pane-or-process"),
    "not-in-pane": ("lost", "no", "agent-not-in-pane"),
    "other-server": ("working", "yes", None),
    "restarted": ("lost", "no", "server-restarted"),
}

def test_tmux_expands_the_list_as_it_lists_its_panes(tmux):
    """The loop #{S:#{W:#{P:...}}} covers every pane of every session (a
    window linked into two sessions too), dead ones marked, as list-panes -a."""
    tmux.new_window("sleep 600", session="crew")
    tmux.new_window("sleep 600", session="crew")
    tmux.new_window("sleep 600", session="other")
    dead = tmux.new_window("sleep 600", session="other")
    tmux("set-option", "-p", "-t", dead, "remain-on-exit", "on")
    tmux("respawn-pane", "-k", "-t", dead, "exit 0")
    wait_for(lambda: tmux("display-message", "-p", "-t", dead, "#{pane_dead}").strip() == "1",
             what="the dead pane")
    tmux("link-window", "-s", "crew:0", "-t", "other:")
    listed, asked = Server.listed(listed_text(tmux)), Server(tmux.sock)
    assert listed is not None
    assert (listed.socket, listed.identity, listed.state) == (tmux.sock, asked.identity, Server.UP)
    assert ({p.id: (p.dead, p.pid) for p in listed.panes.values()}
            == {p.id: (p.dead, p.pid) for p in asked.panes.values()})
    assert listed.panes[dead].dead and len(listed.panes) == 4


def test_verdicts_from_the_list_are_tmux_s_own(every_state, tmux, monkeypatch):
    crew = every_state
    asked = verdicts(crew, Look())
    assert asked == EXPECTED
    text = listed_text(tmux)
    asked_for = []
    real_run = tmuxmod._run

    def run(args, env, socket):
        asked_for.append(socket)
        return real_run(args, env, socket)
    monkeypatch.setattr(tmuxmod, "_run", run)
    assert verdicts(crew, Look(Server.listed(text))) == EXPECTED
    # tmux was asked only about the session on the other server, whose
    # records name another socket than the list's
    # tmux was asked only for the session on the other server and for the
    # one whose records name an earlier server on the list's socket
    assert asked_for == [Session(crew, "other-server").meta["tmux_socket"], tmux.sock]


def test_a_foreign_server_s_list_is_not_trusted(every_state, tmux, second_server):
    """Another server's list (its own socket), or one claiming the crew's
    socket with another server's identity: the crew's sessions are asked
    about, so their verdicts stay tmux's own. The other server numbers its
    panes from %0 too, with other processes: trusted, it would make the
    crew's live sessions look lost."""
    crew = every_state
    for _ in range(12):
        second_server.new_window("sleep 600", session="more")
    foreign = listed_text(second_server)
    sock, identity, panes = foreign.split(" ", 2)
    assert {w.split("=")[0] for w in panes.split()} >= {"%0", "%1", "%2", "%3"}
    forged = f"{tmux.sock} {identity} {panes}"
    wrong_pid = f"{tmux.sock} {identity.split('@')[0]}1@{identity.split('@')[1]} {panes}"
    for text in (foreign, forged, wrong_pid):
        assert Server.listed(text) is not None
        assert verdicts(crew, Look(Server.listed(text))) == EXPECTED, text


def test_crew_status_with_the_list_needs_no_tmux(every_state, tmux, tmp_path):
    """With tmux gone from PATH, crew-status --panes still sees which of the
    crew server's sessions are lost; without the list, or with one that is
    not tmux's, it cannot ask and says nothing of them (their records' word)."""
    no_tmux = {"PATH": str(tmp_path)}
    r = cmd("crew-status")
    assert (r.returncode, r.stdout, r.stderr) == (0, "3 working 2 idle 4 lost\n", "")
    r = cmd("crew-status", "--panes", listed_text(tmux), env=no_tmux)
    # restarted and other-server need tmux asked: unknown without it, their records' word
    assert (r.returncode, r.stdout, r.stderr) == (0, "4 working 2 idle 3 lost\n", "")
    r = cmd("crew-status", env=no_tmux)
    assert (r.returncode, r.stdout) == (0, "7 working 2 idle\n")
    r = cmd("crew-status", "--panes", "%0=1=0", env=no_tmux)
    assert (r.returncode, r.stdout) == (0, "7 working 2 idle\n")
    assert r.stderr == ("crew-status: --panes is not a pane list as tmux expands it"
                        " (see --help): asking tmux\n")


def test_the_readme_line_in_a_real_status_line(crew, tmux, second_server, tmp_path, outsider):
    """The tmux.conf line of the README, set on the crew's server, drawn for
    a client attached from another server (the captain's terminal): tmux
    runs crew-status with the list, whose verdicts hold with no tmux on the
    job's PATH (so none was asked)."""
    line = readme_status_line()
    line = line.replace("/home/you/.local/share/crewfile/venv/bin/python", sys.executable)
    line = line.replace("/home/you/.local/bin/crew-status", os.path.join(BIN, "crew-status"))
    agent(crew, tmux, "live")
    kill_pane(tmux, agent(crew, tmux, "gone", pid=outsider)[1])
    agent(crew, tmux, "asking", records=("turn-started", "waiting"))
    tmux("set-environment", "-g", "PATH", str(tmp_path))
    tmux("set-environment", "-g", "CREWFILE_DIR", crew.root)
    tmux("set-option", "-g", "status-right-length", "200")
    tmux("set-option", "-g", "status-interval", "1")
    tmux("source-file", write(tmp_path / "tmux.conf", line + "\n"))
    captain = second_server.new_window(f"env -u TMUX tmux -S {tmux.sock} attach -t crew",
                                       name="captain")
    second_server.wait_screen(captain, "1 working 1 dialog 1 lost", timeout=30)


def write(path, text):
    path.write_text(text)
    return str(path)


def readme_status_line():
    lines = [ln.strip() for ln in open(os.path.join(REPO, "README.md"))
             if ln.strip().startswith("set -g status-right")]
    assert len(lines) == 1, lines
    assert LISTED_FORMAT in lines[0]
    return lines[0]


def test_the_format_is_written_once_in_each_place():
    """crew-status's page spells tmux.py's format out, and so its --help
    (rendered from the page); the README's line carries the same."""
    assert LISTED_FORMAT in open(os.path.join(REPO, "docs", "commands", "crew-status.md")).read()
    assert LISTED_FORMAT in cmd("crew-status", "--help").stdout


# -- the parser: only tmux's exact form, never an exception ---------------------------

GOOD = "/tmp/tmux-0/default 812@1796089393 %0=813=0 %1=816=0 %12=9001=1 %0=813=0 "


def test_the_exact_form_and_nothing_else():
    s = Server.listed(GOOD)
    assert (s.socket, s.identity, s.state) == ("/tmp/tmux-0/default", "812@1796089393", Server.UP)
    assert {p.id: (p.dead, p.pid) for p in s.panes.values()} == {
        "%0": (False, 813), "%1": (False, 816), "%12": (True, 9001)}
    for bad in ["", " ", "x", "/s", "/s 1@2x", "/s 1@ ", "/s @2 ", "s 1@2 ", "/s 01@2 ",
                "/s 1@2 %0=5=0 %0=6=0 ", "/s 1@2 %07=5=0 ", "/s 1@2 %7=05=0 ", "/s 1@2 %7=5=2 ",
                "/s 1@2 %7=5 ", "/s 1@2 7=5=0 ", "/s 1@2 %-7=5=0 ", "/s 1@2 %+7=5=0 ",
                "/s 1@2 %7=+5=0 ", "/s 1@2 %7=5=0  ", "/s  1@2 %7=5=0 ", "/s 1@2 %\u0667=5=0 ",
                "/s 1@2 %7=\u00b2=0 ", "/s\x1b 1@2 %7=5=0 ", "/s 1@2 %7=5=0\n",
                "/s 1@2 %7=5=0=1 ", "/s 1@2 %=5=0 ", "/s 1@2 %7==0 "]:
        assert Server.listed(bad) is None, bad
    assert Server.listed("/s 1@2") is not None      # a server with no pane at all
    assert Server.listed("/s 1@2 %7=5=0") is not None   # the last space left off


def canonical(server):
    """The text tmux would have expanded for *server*."""
    return " ".join([server.socket, server.identity]
                    + [f"{p.id}={p.pid}={int(p.dead)}" for p in server.panes.values()]) + " "


TOKENS = ["/tmp/tmux-0/default", "/s", "812@1796089393", "1@2", "%0=813=0", "%1=816=0",
          "%12=9001=1", "%0=813=1", "%07=1=0", "%1=01=0", " ", "  ", "=", "@", "%", "\t",
          "\n", "\x00", "\u0663", "\u00b2", "-1", "+1"]


@settings(max_examples=4000, deadline=None)
@given(st.text() | st.lists(st.sampled_from(TOKENS) | st.text(max_size=4)).map(" ".join))
def test_fuzz_the_parser_is_exact_or_none(text):
    """Any text: None, or a server whose every number tmux would print the
    same, and which parses back from tmux's form of it to itself."""
    s = Server.listed(text)
    if s is None:
        return
    assert s.socket.startswith("/") and s.socket.isprintable()
    pid, _, start = s.identity.partition("@")
    assert str(int(pid)) == pid and str(int(start)) == start
    for key, p in s.panes.items():
        assert key == p.id and p.id == f"%{int(p.id[1:])}" and p.pid >= 0
    again = Server.listed(canonical(s))
    assert canonical(again) == canonical(s)
    assert text.rstrip(" ").split(" ")[:2] == [s.socket, s.identity]


@pytest.fixture(scope="module")
def live_crew(tmp_path_factory):
    """For the fuzz below (one server for all its examples): a crew whose
    sessions are live, lost and of another server."""
    d = tempfile.mkdtemp(prefix="cf-tmux-fuzz-")
    server, other = TmuxServer(os.path.join(d, "sock")), TmuxServer(os.path.join(d, "sock2"))
    crew = Crew(str(tmp_path_factory.mktemp("fuzz") / "crew"))
    proc = subprocess.Popen(["sleep", "600"])
    try:
        agent(crew, server, "a")
        agent(crew, server, "b", records=("idle",))
        kill_pane(server, agent(crew, server, "c", pid=proc.pid)[1])
        agent(crew, server, "e", pid=proc.pid)
        agent(crew, other, "d")
        yield crew, server
    finally:
        proc.kill()
        proc.wait()
        server.kill()
        other.kill()
        shutil.rmtree(d, ignore_errors=True)


def _edit(text, data):
    ops = data.draw(st.lists(st.tuples(st.integers(0, len(text)), st.integers(0, 3),
                                       st.sampled_from(TOKENS[:12]) | st.text(max_size=3)),
                             min_size=1, max_size=3))
    for at, cut, put in ops:
        at = min(at, len(text))
        text = text[:at] + put + text[at + cut:]
    return text


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fuzz_a_damaged_list_never_changes_a_verdict(live_crew, data):
    """tmux's list, edited at random: unless the edit left it naming the
    crew's server with its very panes (then it is tmux's answer), either it
    is refused or it names another server, and every verdict is tmux's own."""
    crew, server = live_crew
    genuine = listed_text(server)
    want = verdicts(crew, Look())
    text = _edit(genuine, data)
    listed = Server.listed(text)
    truth = Server.listed(genuine)
    if listed is not None and (listed.socket, listed.identity) == (truth.socket, truth.identity):
        if canonical(listed) != canonical(truth):
            return          # the server's own claim about itself: trusted (see the module doc)
    assert verdicts(crew, Look(listed)) == want, text


def test_a_descriptor_of_ours_never_reaches_a_tmux_server_we_start(tmp_path):
    """A server tmux starts for us lives on after us: a descriptor we hold
    (a shell's `exec 9>LOCK` for flock(1), inherited) must not reach it, or
    it would hold that lock for as long as it runs."""
    short = tempfile.mkdtemp(prefix="cf-tmux-fd-")      # socket paths stay under ~107 bytes
    sock = os.path.join(short, "sock")
    lock = str(tmp_path / "lock")
    fd = os.open(lock, os.O_RDWR | os.O_CREAT)
    try:
        os.set_inheritable(fd, True)
        fcntl.flock(fd, fcntl.LOCK_EX)
        tmuxmod.run("-f", "/dev/null", "new-session", "-d", "sleep 600", socket=sock)
        os.close(fd)
        fd = None
        assert tmuxmod.run("has-session", check=False, socket=sock)[0] == 0
        assert not is_held(lock)
    finally:
        if fd is not None:
            os.close(fd)
        subprocess.run(["tmux", "-S", sock, "kill-server"], capture_output=True)
        wait_for(lambda: subprocess.run(["tmux", "-S", sock, "list-sessions"],
                                        capture_output=True).returncode != 0,
                 what="the tmux server to be gone")
        shutil.rmtree(short, ignore_errors=True)
