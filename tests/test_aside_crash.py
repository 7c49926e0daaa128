"""kill -9 of aside-conclude and aside-reconcile at every step, then a rerun:
no lost report, no duplicate report, no window killed before its scrollback
is saved. The crash is a real SIGKILL of the real command, sent by itself at
the step CREWFILE_CRASH_AT names (crewfile.asides.aside.checkpoint)."""
import os
import signal
import subprocess
import sys

import pytest

from conftest import BIN, REPO, captain_runs, captain_types
from crewfile.asides import captain, reports
from crewfile.core import paths
from crewfile.core.logfile import TailStats
from crewfile.session.sessions import Session

AGENT = f"{sys.executable} {os.path.join(REPO, 'tests', 'fake-agent')}"


def records(crew, name, kind):
    return [r.text for r in Session(crew, name).last_records(1000, TailStats()) if r.kind == kind]


def box(crew, which):
    d = crew.sub(paths.REPORTS, which)
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def killed(proc):
    return proc.returncode == -signal.SIGKILL


@pytest.mark.parametrize("step", ["conclude:written", "conclude:delivered"])
def test_conclude_killed_then_rerun_delivers_exactly_one_report(crew, run, tmp_path, step,
                                                               aside_window):
    aside_window("a1")
    captain_types(crew, "a1", "/aside-done")
    first = tmp_path / "first"
    first.write_text("the first run's report\n")
    second = tmp_path / "second"
    second.write_text("the rerun's report\n")

    r = run("aside-conclude", "a1", "--report", first, env={"CREWFILE_CRASH_AT": step})
    assert killed(r), (r.returncode, r.stderr)
    assert records(crew, "a1", "concluded") == []
    if step == "conclude:written":
        assert box(crew, "new") == [] and len(box(crew, "tmp")) == 1
    else:
        assert len(box(crew, "new")) == 1 and box(crew, "tmp") == []

    r = run("aside-conclude", "a1", "--report", second)
    assert r.returncode == 0, r.stderr
    path = r.stdout.strip()
    assert box(crew, "new") == [os.path.basename(path)]          # one report, never two
    assert records(crew, "a1", "concluded") == [path]
    if step == "conclude:delivered":         # the published report was adopted, not doubled
        assert open(path).read() == "the first run's report\n"
        assert "adopted" in r.stderr
    else:                                    # the stray tmp file is no report; age cleans it
        assert open(path).read() == "the rerun's report\n"
        assert len(reports.listing(crew)) == 1
    assert records(crew, "a1", "problem") == []


def test_an_orphan_of_a_voided_conclusion_is_not_adopted(crew, run, tmp_path, aside_window):
    aside_window("a1")
    captain_types(crew, "a1", "/aside-done")
    old = tmp_path / "old"
    old.write_text("old\n")
    r = run("aside-conclude", "a1", "--report", old, env={"CREWFILE_CRASH_AT": "conclude:delivered"})
    assert killed(r)
    captain.record_captain_input(crew, "a1", "not done yet")        # the captain reopens
    captain_types(crew, "a1", "/aside-done")
    new = tmp_path / "new"
    new.write_text("new\n")
    path = run("aside-conclude", "a1", "--report", new, check=True).stdout.strip()
    assert open(path).read() == "new\n"
    assert len(box(crew, "new")) == 2          # the old one is kept (never lost), not adopted


STEPS = ["reconcile:moved", "reconcile:scrollback", "reconcile:closed"]


@pytest.mark.parametrize("step", STEPS)
def test_reconcile_killed_at_each_step_then_rerun(crew, tmux, run, step, concluded):
    pane, cur = concluded
    new = cur.replace("/reports/cur/", "/reports/new/")
    panes = lambda: tmux("list-panes", "-a", "-F", "#{pane_id}").split()

    r = run("aside-reconcile", "a1", env={"CREWFILE_CRASH_AT": step})
    assert killed(r), (r.returncode, r.stderr)
    # After the crash: the window is still there, and so is the report (somewhere).
    assert pane in panes()
    assert os.path.exists(new) != os.path.exists(cur)
    assert os.path.exists(cur)                 # every step is after the move
    sb_saved = os.path.exists(cur + ".scrollback")
    assert sb_saved == (step != "reconcile:moved")
    assert records(crew, "a1", "closed") == ([cur] if step == "reconcile:closed" else [])

    r = run("aside-reconcile", "a1")
    assert r.returncode == 0, r.stderr
    assert r.stdout == (f"report: {cur}\nscrollback: {cur}.scrollback\n"
                        f"transcript: {cur}.transcript\n")
    assert pane not in panes()
    assert box(crew, "new") == [] and open(cur).read() == "report\n"
    assert "the words that must survive" in open(cur + ".scrollback").read()
    assert records(crew, "a1", "closed") == [cur]          # exactly once
    assert len(reports.listing(crew)) == 1


def test_the_window_is_never_gone_before_the_scrollback_is_saved(crew, tmux, run, tmp_path):
    """Watch from outside while reconcile runs: whenever the pane is gone,
    the report and scrollback are already in cur/."""
    tmux("new-session", "-d", "-s", "crew", "-x", "120", "-y", "30")
    run("aside-open", "a1", "--cmd", AGENT, "--tmux-session", "crew", check=True)
    pane = Session(crew, "a1").meta["tmux"]
    tmux.wait_screen(pane, "ready>")
    assert captain_runs(tmux, "aside-done", "a1") == (0, "")
    report = tmp_path / "r"
    report.write_text("report\n")
    cur = run("aside-conclude", "a1", "--report", report, check=True).stdout.strip().replace(
        "/new/", "/cur/")
    proc = subprocess.Popen([sys.executable, os.path.join(BIN, "aside-reconcile"), "a1"],
                            stdout=subprocess.DEVNULL)
    panes = lambda: tmux("list-panes", "-a", "-F", "#{pane_id}").split()
    while proc.poll() is None:
        if pane not in panes():
            assert os.path.exists(cur) and os.path.exists(cur + ".scrollback")
            assert records(crew, "a1", "closed") == [cur]
    assert proc.wait() == 0
    assert pane not in panes()
