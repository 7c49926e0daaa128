"""The views over the crew: crew-status, crew-top --once, crew-timeline."""
import json
import os
import subprocess
import sys

import pytest

from conftest import cmd
from crewfile import inbox
from crewfile.sessions import register


def dead_pid():
    """The pid of a process that has exited and been reaped."""
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def set_meta(crew, name, **fields):
    path = os.path.join(crew.session_dir(name), "meta")
    meta = json.load(open(path))
    meta.update(fields)
    with open(path, "w") as f:
        json.dump(meta, f)


def session(crew, name, *kinds, kind="crew"):
    sess = register(crew, name, kind=kind)
    for k in kinds:
        k, _, text = k.partition(":")
        sess.append(k, text.strip())
    return sess


def status(*args):
    return cmd("crew-status", *args)


def test_empty_crew(crew):
    r = status()
    assert (r.returncode, r.stdout, r.stderr) == (0, "crew: empty\n", "")
    r = status("--tmux")
    assert (r.returncode, r.stdout) == (0, "crew: empty\n")


def test_all_ended(crew):
    session(crew, "w1", "ended: done")
    assert status().stdout == "crew: all ended\n"


@pytest.mark.parametrize("records,word", [
    (("turn-started",), "working"),
    (("turn-started", "turn-ended", "idle"), "idle"),
    (("turn-started", "waiting: permission"), "dialog"),
    (("turn-started", "blocked: no access", "turn-ended", "idle"), "blocked"),
    (("turn-started", "problem: tests fail"), "blocked"),
    (("turn-started", "paused: awaiting captain", "idle"), "paused"),
    (("blocked: x", "turn-started"), "working"),
    (("registered",), "idle"),
])
def test_each_state(crew, records, word):
    session(crew, "w1", *records)
    r = status()
    assert (r.returncode, r.stdout, r.stderr) == (0, f"1 {word}\n", "")


def test_no_turn_record_is_unknown(crew):
    session(crew, "w1")
    path = os.path.join(crew.session_dir("w1"), "status")
    open(path, "w").close()             # the log emptied: no turn record at all
    assert status().stdout == "1 unknown\n"


def test_lost_is_the_verdict_s(crew):
    session(crew, "w1", "turn-started")
    set_meta(crew, "w1", pid=dead_pid(), pid_start=1)
    assert status().stdout == "1 lost\n"


def test_damaged_session_is_counted_not_a_traceback(crew):
    session(crew, "w1", "turn-started")
    session(crew, "w2", "idle")
    with open(os.path.join(crew.session_dir("w2"), "meta"), "w") as f:
        f.write("{not json")
    r = status()
    assert (r.returncode, r.stdout) == (5, "1 working 1 damaged\n")
    assert "Traceback" not in r.stderr


def test_a_whole_crew_with_wakes_and_tmux_colours(crew):
    session(crew, "boss", "idle", kind="primary")
    session(crew, "w1", "turn-started")
    session(crew, "w2", "turn-started")
    session(crew, "w3", "waiting: permission")
    session(crew, "design", "paused: awaiting captain", kind="aside")
    inbox.post(crew, "boss", "wake", "w1 turn-ended")
    inbox.post(crew, "boss", "wake", "w2 blocked")
    inbox.post(crew, "boss", "job", "job 1 done")          # not a wake
    assert status().stdout == "2 working 1 idle 1 dialog 1 paused 2 wakes\n"
    assert status("--tmux").stdout == (
        "#[fg=green]2 working#[default] #[fg=default]1 idle#[default]"
        " #[fg=yellow]1 dialog#[default] #[fg=magenta]1 paused#[default]"
        " #[fg=cyan]2 wakes#[default]\n")
