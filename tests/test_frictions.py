"""The small frictions a user met (issue 31, item 6), one test each: the
command run as the user ran it, its exit code and exact words, then the
state read back."""
import json
import os

from conftest import cmd
from crewfile import schedules
from crewfile.sessions import Session


def test_status_show_names_the_turn_record_that_keeps_a_paused_session_generating(crew):
    cmd("session-add", "builder", check=True)
    cmd("status-append", "builder", "turn-started", check=True)
    cmd("status-append", "builder", "paused", "awaiting", "captain", check=True)
    r = cmd("status-show", "builder")
    assert (r.returncode, r.stderr) == (0, "")
    lines = r.stdout.splitlines()
    assert lines[3].endswith(" paused: awaiting captain")
    at = lines.index("generating: yes")
    assert lines[at + 1].startswith("turn: turn-started ") and lines[at + 1].endswith(" ago")
    cmd("status-append", "builder", "turn-ended", check=True)
    lines = cmd("status-show", "builder", check=True).stdout.splitlines()
    assert "generating: no" in lines and lines[at + 1].startswith("turn: turn-ended ")
    assert "paused" in cmd("status-show", "--help", check=True).stdout
