"""Adopting a background session (`claude --bg`) from the agent CLI's
registry: a crew row without a pane, watched through its process, `lost`
and one wake when it dies without ending. A plain `sleep` stands for the
session's process here, its entry written as Claude Code writes one
(tests/test_registry_e2e.py runs the real daemon)."""
import subprocess

import pytest

from conftest import cmd
from crewfile.session import delivery, verdict
from crewfile.session.sessions import Session
from test_registry import SID, write_entry


@pytest.fixture
def where(tmp_path):
    return str(tmp_path / "claude" / "sessions")


def add(*args):
    return cmd("session-add", *args)


def test_adopting_a_background_session_watches_its_process(crew, where, tmp_path):
    bg = subprocess.Popen(["sleep", "3600"])
    try:
        write_entry(where, bg.pid, kind="bg", jobId="ab12cd34", cwd=str(tmp_path))
        p = add("b1", "--adopt", "ab12cd34", "--registry", where)
        assert p.returncode == 0, p.stderr
        assert p.stdout == f"b1: registered: agent process {bg.pid}, conversation {SID}\n"
        meta = Session(crew, "b1").meta
        assert (meta["agent_job"], meta["pid"], "tmux" in meta) == ("ab12cd34", bg.pid, False)
        assert verdict.of(Session(crew, "b1")).live == verdict.LIVE
        answer, _ = delivery.check(Session(crew, "b1"))      # read-only: nothing is typed
        assert answer == verdict.Answer(delivery.NOT_LIVE,
                                        "no tmux pane is registered for the session")
        cursor = str(tmp_path / "cursor")
        assert "lost" not in cmd("crew-watch", "--once", "--cursor", cursor).stdout
        bg.kill()
        bg.wait()
        watch = cmd("crew-watch", "--once", "--cursor", cursor).stdout
        assert watch.count(" b1 lost: ") == 1, watch
        assert f"b1 lost: agent process {bg.pid} is gone" in watch
        wakes = cmd("wake-filter", input=watch).stdout.splitlines()
        assert [w.split(" ", 2)[1:] for w in wakes] == [
            ["b1", f"lost: agent process {bg.pid} is gone"]], wakes     # one wake
        assert " lost" not in cmd("crew-watch", "--once", "--cursor", cursor).stdout
        p = add("b2", "--adopt", "ab12cd34", "--registry", where)
        assert (p.returncode, p.stderr) == (3, "session-add: no running background session"
                                               f" ab12cd34 in the agent registry {where} (its"
                                               " entry is stale: the process is gone)\n")
    finally:
        bg.kill()
        bg.wait()


def test_a_respawned_background_session_is_adopted_again_by_its_job(crew, where, tmp_path):
    """The daemon starts a killed background session again: a new process, the
    same job id, its entry naming the conversation a moment late."""
    first = subprocess.Popen(["sleep", "3600"])
    again = None
    try:
        write_entry(where, first.pid, kind="bg", jobId="ab12cd34")
        assert add("b1", "--adopt", "ab12cd34", "--registry", where).returncode == 0
        first.kill()
        first.wait()
        again = subprocess.Popen(["sleep", "3600"])
        write_entry(where, again.pid, kind="bg", jobId="ab12cd34", sessionId="not-yet-its-own")
        p = add("b1", "--adopt", "ab12cd34", "--registry", where)
        assert p.returncode == 0, p.stderr
        assert p.stdout == (f"b1: repaired: agent process {again.pid},"
                            " conversation not-yet-its-own\n")
        v = verdict.of(Session(crew, "b1"))
        assert v.live == verdict.LIVE
        write_entry(where, again.pid, kind="bg", jobId="ab12cd34")     # now named: it differs
        v = verdict.of(Session(crew, "b1"))
        assert (v.live, v.why.code) == (verdict.UNKNOWN, verdict.REGISTRY_DISAGREES)
        p = add("b1", "--adopt", "ab12cd34", "--registry", where)       # adopted again: agrees
        assert p.stdout == f"b1: repaired: agent process {again.pid}, conversation {SID}\n"
        assert verdict.of(Session(crew, "b1")).live == verdict.LIVE
    finally:
        for proc in (first, again):
            if proc is not None:
                proc.kill()
                proc.wait()
