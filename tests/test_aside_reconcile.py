"""An aside is never torn down while the captain is in the middle of a reply:
aside-reconcile asks the one captain check (prompt.captain_at) first, and
--wait reconciles once the window is quiet, or stops when the captain sends
the draft. Real tmux; the fake agent with Claude Code's `❯` prompt; the
captain concluding at a real client attached through a pseudo-terminal,
typing drafts with send-keys or at such a client."""
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import BIN, REPO, AttachedClient, captain_keys, wait_for
from crewfile.core import paths
from crewfile.core.logfile import TailStats
from crewfile.session.sessions import Session

AGENT = f"env CREWFILE_FAKE_PROMPT='\u276f ' {sys.executable} {os.path.join(REPO, 'tests', 'fake-agent')}"
DRAFT = "wait, one more thing about pagination"


def kinds(crew):
    return [r.kind for r in Session(crew, "design").last_records(1000, TailStats())]


def box(crew, which):
    d = crew.sub(paths.REPORTS, which)
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def disk(crew):
    """Everything reconcile could change: the log, the report boxes."""
    with open(crew.session_file("design", paths.STATUS), "rb") as f:
        return f.read(), box(crew, "new"), box(crew, "cur")


@pytest.fixture
def concluded(crew, tmux, run, tmp_path):
    """Aside `design` open with the fake agent, concluded by the captain (typing
    at a terminal, then detached), the report handed over. typed(): the
    captain's later keys, sent with send-keys."""
    tmux("new-session", "-d", "-s", "crew", "-n", "captain", "-x", "120", "-y", "30")
    r = run("aside-open", "design", "--cmd", AGENT, "--tmux-session", "crew")
    assert r.returncode == 0, r.stderr
    sess = Session(crew, "design")
    pane = sess.meta["tmux"]
    tmux.wait_screen(pane, "\u276f")

    def typed(text, enter=True, person=None):
        n = kinds(crew).count("turn-ended")
        if person:
            captain_keys(sess, text + "\r", person)
        else:
            tmux("send-keys", "-t", pane, "-l", "--", text)
            if enter:
                tmux("send-keys", "-t", pane, "Enter")
        if enter:
            wait_for(lambda: kinds(crew).count("turn-ended") > n, what=f"the turn of {text!r}")
            tmux.wait_prompt(pane)
        else:
            tmux.wait_screen(pane, text)

    person = AttachedClient(tmux, pane)
    try:
        typed("the pagination design", person=person)
        typed("/aside-done ship it", person=person)
    finally:
        person.close()
    report = tmp_path / "r.md"
    report.write_text("cursor pagination\n")
    r = run("aside-conclude", "design", "--report", report, env={"CREWFILE_SESSION": "design"})
    assert r.returncode == 0, r.stderr
    return pane, typed


def panes(tmux):
    return tmux("list-panes", "-a", "-F", "#{pane_id}").split()


def test_a_draft_on_the_prompt_line_holds_the_teardown(crew, tmux, run, concluded):
    pane, typed = concluded
    typed(DRAFT, enter=False)
    before = disk(crew)
    r = run("aside-reconcile", "design")
    assert r.returncode == 7, r.stderr
    assert r.stderr == (f"aside-reconcile: the captain may be about to reopen 'design' (draft: the"
                        f" prompt line holds {DRAFT!r}): nothing changed; aside-reconcile --wait"
                        " does it once the window is quiet\n")
    assert r.stdout == ""
    assert disk(crew) == before and box(crew, "cur") == []
    assert pane in panes(tmux) and DRAFT in tmux.screen(pane)


def test_wait_reconciles_once_the_draft_is_cleared_and_the_window_quiet(crew, tmux, concluded):
    pane, typed = concluded
    typed(DRAFT, enter=False)
    before = disk(crew)
    proc = subprocess.Popen([sys.executable, os.path.join(BIN, "aside-reconcile"), "design",
                             "--wait", "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=dict(os.environ, CREWFILE_CAPTAIN_QUIET="1"))
    try:
        line = proc.stderr.readline()
        assert line.startswith("aside-reconcile: design: waiting: the captain may be about to"
                               " reopen 'design' (draft:"), line
        assert proc.poll() is None and disk(crew) == before and pane in panes(tmux)
        tmux("send-keys", "-t", pane, "C-u")             # the captain clears the draft
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert out.startswith("report: ") and box(crew, "new") == [] and len(box(crew, "cur")) == 3
    assert pane not in panes(tmux)
    assert kinds(crew)[-1] in ("closed", "ended")


def test_wait_stops_when_the_captain_sends_the_draft(crew, tmux, concluded):
    pane, typed = concluded
    typed(DRAFT, enter=False)
    news = box(crew, "new")
    proc = subprocess.Popen([sys.executable, os.path.join(BIN, "aside-reconcile"), "design",
                             "--wait", "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        assert "waiting:" in proc.stderr.readline()
        tmux("send-keys", "-t", pane, "Enter")               # the captain sends it
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err
    assert err.endswith("aside-reconcile: 'design' was reopened: the captain sent input after"
                        " the conclusion, which is void; nothing moved or killed\n"), err
    assert out == ""
    assert box(crew, "new") == news and box(crew, "cur") == []
    assert "closed" not in kinds(crew) and pane in panes(tmux)


def test_keys_pressed_in_the_window_since_the_conclusion_hold_it(crew, tmux, run, concluded):
    """A real client: the captain pressed a key there (then erased it): no draft,
    but not quiet. --wait reconciles after a quiet spell."""
    pane, typed = concluded
    act = [r for r in Session(crew, "design").last_records(100, TailStats())
           if r.kind == "captain-done"][-1]
    # tmux counts key times in whole seconds: a key in the act's own second
    # cannot be told from the act's Enter. Press in a later one.
    wait_for(lambda: time.time() >= int(act.time) + 1, what="the next second")
    client = AttachedClient(tmux, "crew:design")
    try:
        client.press("x")
        tmux.wait_screen(pane, "\u276f x")
        client.press("\x7f")                                  # erased: the line is empty again
        wait_for(lambda: "\u276f x" not in tmux.screen(pane), what="the key erased")
        r = run("aside-reconcile", "design")
        assert r.returncode == 7 and "captain-typing: a key was pressed" in r.stderr, r.stderr
        assert box(crew, "cur") == [] and pane in panes(tmux)
        r = run("aside-reconcile", "design", "--wait", "60", env={"CREWFILE_CAPTAIN_QUIET": "1"})
        assert r.returncode == 0, r.stderr
        assert "waiting: " in r.stderr and box(crew, "new") == [] and pane not in panes(tmux)
    finally:
        client.close()


def test_wait_gives_up_after_its_duration_changing_nothing(crew, tmux, run, concluded):
    pane, typed = concluded
    typed(DRAFT, enter=False)
    before = disk(crew)
    r = run("aside-reconcile", "design", "--wait", "2")
    assert r.returncode == 7 and r.stderr.count("waiting: ") == 1, r.stderr
    assert disk(crew) == before and pane in panes(tmux)


def test_a_duration_needs_wait(crew, run):
    r = run("aside-reconcile", "design", "5m")
    assert r.returncode == 2 and r.stderr.startswith("aside-reconcile: a DURATION needs --wait")
    r = run("aside-reconcile", "design", "--wait", "soon")
    assert r.returncode == 2 and "bad DURATION" in r.stderr


def test_a_wait_killed_while_waiting_leaves_everything_as_it_was(crew, tmux, run, concluded):
    """kill -9 of aside-reconcile --wait: it held no lock while waiting and
    changed nothing; the next reconcile does the whole job."""
    pane, typed = concluded
    typed(DRAFT, enter=False)
    before = disk(crew)
    proc = subprocess.Popen([sys.executable, os.path.join(BIN, "aside-reconcile"), "design",
                             "--wait", "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    assert "waiting: " in proc.stderr.readline()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    assert disk(crew) == before and pane in panes(tmux)
    tmux("send-keys", "-t", pane, "C-u")
    tmux.wait_prompt(pane)
    r = run("aside-reconcile", "design")
    assert r.returncode == 0, r.stderr
    assert box(crew, "new") == [] and len(box(crew, "cur")) == 3 and pane not in panes(tmux)
