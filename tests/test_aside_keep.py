"""Nothing of a conversation is lost when its window is torn down: beside the
scrollback, aside-reconcile and crew-retire keep a copy of the agent's own
transcript (meta `transcript_path`), under the same ordering rule (kept
before `closed` and before the kill, redone after a crash), and every window
crewfile opens starts Claude Code with the classic renderer, whose
conversation tmux keeps as scrollback. The fake agent writes its transcript
and records its path as Claude Code's SessionStart hook does."""
import os
import signal
import sys

import pytest

from conftest import REPO, wait_for
from crewfile.core.logfile import TailStats
from crewfile.session.sessions import Session

AGENT = f"{sys.executable} {os.path.join(REPO, 'tests', 'fake-agent')}"


def closed(crew, name):
    return [r.text for r in Session(crew, name).last_records(1000, TailStats())
            if r.kind == "closed"]


def panes(tmux):
    return tmux("list-panes", "-a", "-F", "#{pane_id}").split()


def test_reconcile_keeps_the_transcript_beside_the_report(crew, tmux, run, concluded):
    pane, cur = concluded
    source = Session(crew, "a1").meta["transcript_path"]
    r = run("aside-reconcile", "a1")
    assert (r.returncode, r.stderr) == (0, "")
    assert r.stdout == (f"report: {cur}\nscrollback: {cur}.scrollback\n"
                        f"transcript: {cur}.transcript\n")
    kept = open(f"{cur}.transcript").read()
    assert "the words that must survive" in kept and kept == open(source).read()
    assert os.stat(f"{cur}.transcript").st_mode & 0o777 == 0o600
    assert pane not in panes(tmux) and closed(crew, "a1") == [cur]
    # The kept copy is no report: report-ls lists the one report.
    assert len(run("report-ls").stdout.splitlines()) == 2
    assert run("aside-reconcile", "a1").stdout == r.stdout          # again: nothing doubled


@pytest.mark.parametrize("step", ["reconcile:scrollback", "reconcile:transcript"])
def test_reconcile_killed_before_closed_keeps_the_transcript_on_rerun(crew, tmux, run,
                                                                      concluded, step):
    pane, cur = concluded
    r = run("aside-reconcile", "a1", env={"CREWFILE_CRASH_AT": step})
    assert r.returncode == -signal.SIGKILL, (r.returncode, r.stderr)
    assert pane in panes(tmux) and closed(crew, "a1") == []
    assert os.path.exists(f"{cur}.transcript") == (step == "reconcile:transcript")
    r = run("aside-reconcile", "a1")
    assert (r.returncode, r.stderr) == (0, "")
    assert r.stdout.endswith(f"transcript: {cur}.transcript\n")
    assert "the words that must survive" in open(f"{cur}.transcript").read()
    assert pane not in panes(tmux) and closed(crew, "a1") == [cur]


def test_a_transcript_gone_is_said_and_stops_nothing(crew, tmux, run, concluded):
    pane, cur = concluded
    source = Session(crew, "a1").meta["transcript_path"]
    os.unlink(source)
    r = run("aside-reconcile", "a1")
    assert r.returncode == 0
    assert r.stderr == f"aside-reconcile: a1: its transcript {source} is gone: not kept\n"
    assert r.stdout == f"report: {cur}\nscrollback: {cur}.scrollback\n"
    assert pane not in panes(tmux) and closed(crew, "a1") == [cur]


def test_a_transcript_that_is_a_fifo_is_not_read(crew, tmux, run, concluded, tmp_path):
    pane, cur = concluded
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    Session(crew, "a1").update_meta(transcript_path=fifo)     # no writer: a read would hang
    r = run("aside-reconcile", "a1")
    assert r.returncode == 0
    assert r.stderr == (f"aside-reconcile: a1: its transcript was not kept:"
                        f" {fifo}: not a regular file\n")
    assert not os.path.lexists(f"{cur}.transcript") and closed(crew, "a1") == [cur]


def test_every_window_starts_claude_code_with_the_classic_renderer(crew, tmux, run, tmp_path):
    """The alternate screen (Claude Code 2.1.332's default) leaves tmux no history."""
    seen = tmp_path / "seen"
    tmux("new-session", "-d", "-s", "crew")
    run("aside-open", "a2", "--tmux-session", "crew", "--cmd",
        f"printf '%s\\n' \"$CLAUDE_CODE_DISABLE_ALTERNATE_SCREEN\" > {seen}; exec cat",
        check=True)
    wait_for(lambda: seen.exists() and seen.read_text().endswith("\n"), what="the window's env")
    assert seen.read_text() == "1\n"


def test_crew_retire_keeps_the_transcript_beside_the_scrollback(crew, tmux, run, tmp_path,
                                                               monkeypatch):
    monkeypatch.chdir(tmp_path)
    tmux("new-session", "-d", "-s", "crew")
    run("crew-spawn", "w1", "--no-worktree", "--tmux-session", "crew", "--cmd",
        f"{AGENT} --conversation", "--prompt", "the words that must survive", check=True)
    wait_for(lambda: "turn-ended" in [r.kind for r in
                                      Session(crew, "w1").last_records(100, TailStats())],
             what="w1's turn")
    source = Session(crew, "w1").meta["transcript_path"]
    r = run("crew-retire", "w1")
    assert (r.returncode, r.stderr) == (0, "")
    out = r.stdout.splitlines()
    scrollback, transcript = out[0].split(": ")[1], out[1].split(": ")[1]
    assert out[0] == f"scrollback: {scrollback}" and out[2:] == ["worktree: -", "branch: -"]
    where, _, stamp = scrollback.rpartition("/scrollback.")
    assert where == Session(crew, "w1").dir and transcript == f"{where}/transcript.{stamp}"
    assert open(transcript).read() == open(source).read()
    assert "the words that must survive" in open(transcript).read()
    # Again, its window gone: the transcript is not kept twice.
    r = run("crew-retire", "w1")
    assert r.returncode == 0 and "transcript:" not in r.stdout
    assert [f for f in os.listdir(Session(crew, "w1").dir) if f.startswith("transcript.")] == [
        os.path.basename(transcript)]
