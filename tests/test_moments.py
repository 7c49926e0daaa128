"""The one grammar of moments (moments.py), as a table: what each text
means, or that it is refused (issue 30.9: wrong meanings with exit 0)."""
import calendar
import json
import time

import pytest

from conftest import cmd
from crewfile.core.errors import BadInput
from crewfile.core.moments import EXAMPLES, parse_moment

NOW = calendar.timegm((2026, 12, 1, 20, 0, 0))       # Tuesday 2026-12-01 20:00 UTC


def utc(*fields):
    return calendar.timegm(fields + (0,) * (6 - len(fields)))


@pytest.fixture(autouse=True)
def local_is_utc(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


READ = [
    # text, future (--until), what it means
    ("2h", False, NOW - 7200),
    ("2h", True, NOW + 7200),
    ("1h30m", False, NOW - 5400),
    ("-5m", False, NOW - 300),
    ("-5m", True, NOW - 300),                      # ago, for every flag
    ("2026-12-01", False, utc(2026, 12, 1)),
    ("2026-12-01 08:00", False, utc(2026, 12, 1, 8)),
    ("2026-12-01T08:00:30", True, utc(2026, 12, 1, 8, 0, 30)),
    ("2026-12-01T08:00Z", False, utc(2026, 12, 1, 8)),
    ("2026-12-01T08:00:00.5+01:00", False, utc(2026, 12, 1, 7) + 0.5),
    ("2026-12-01 08:00 UTC", False, utc(2026, 12, 1, 8)),
    ("Dec 1", False, utc(2026, 12, 1)),
    ("Dec 1 8am", False, utc(2026, 12, 1, 8)),
    ("December 1, 2025 20:30", False, utc(2025, 12, 1, 20, 30)),
    ("dec 31 11:59pm", False, utc(2026, 12, 31, 23, 59)),
    ("08:00", False, utc(2026, 12, 1, 8)),
    ("08:00", True, utc(2026, 12, 2, 8)),          # already past today: tomorrow
    ("21:00", True, utc(2026, 12, 1, 21)),
    ("8:30pm", False, utc(2026, 12, 1, 20, 30)),
    ("12am", False, utc(2026, 12, 1, 0)),
    ("10:00 -0800", False, utc(2026, 12, 1, 18)),
]

REFUSED = [
    "-1", "-5", "5-", "5", "0", "+5m", "Dec 32", "Feb 30", "2026-13-01", "2026-12-01 25:00",
    "10:00 PST", "10:00 EST5EDT", "08:00 Mars", "99999-01-01", "tomorrow", "yesterday-ish",
    "8", "13pm", "Decx 1", "1 Dec", "2026/12/01", "", " ", "x" * 200, "--5m", "-2026-12-01",
]


@pytest.mark.parametrize("text,future,expected", READ)
def test_a_moment_has_one_meaning(text, future, expected):
    assert parse_moment(text, "--since", future, now=NOW) == expected


@pytest.mark.parametrize("text", REFUSED)
def test_anything_else_is_refused_with_the_examples(text):
    for future in (False, True):
        with pytest.raises(BadInput) as e:
            parse_moment(text, "--until", future, now=NOW)
        assert str(e.value) == f"bad --until '{text[:100]}': {EXAMPLES}"


@pytest.mark.parametrize("command", [
    ("status-show", "w1", "--since"),
    ("crew-timeline", "--svg", "-", "--until"),
    ("nudge-add", "--session", "w1", "--every", "60", "--message", "go", "--until"),
    ("crew-watch", "--once", "--since"),
])
@pytest.mark.parametrize("text", ["-1", "Dec 32", "10:00 PST", "5-"])
def test_every_command_refuses_in_one_line_and_writes_nothing(crew, command, text):
    cmd("session-add", "w1", check=True)
    r = cmd(*command, text)
    flag = command[-1]
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == f"{command[0]}: bad {flag} '{text}': {EXAMPLES}\nTry '{command[0]} --help'.\n" \
        or r.stderr == f"{command[0]}: bad {flag} '{text}': {EXAMPLES}\n"


def test_minus_five_minutes_is_ago_for_status_show(crew):
    """`status-show --since -5m` read 00:05 today; it is five minutes ago."""
    cmd("session-add", "w1", check=True)
    with open(f"{crew.root}/sessions/w1/status", "a") as f:
        f.write("2026-01-01T00:10:00.000Z note: long ago\n")
    cmd("status-append", "w1", "note", "just now", check=True)
    r = cmd("status-show", "w1", "--since", "-5m")
    assert r.returncode == 0 and "just now" in r.stdout and "long ago" not in r.stdout


def test_last_zero_with_since_prints_no_record(crew):
    """docs/commands/status-show.md: with --since and --last N, at most N records."""
    cmd("session-add", "w1", check=True)
    cmd("status-append", "w1", "note", "just now", check=True)
    r = cmd("status-show", "w1", "--json", "--since", "-5m", "--last", "0")
    assert r.returncode == 0 and json.loads(r.stdout)["records"] == []
