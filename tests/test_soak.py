"""The soak's 2-minute day (make soak, docs/soak.md), so that a change which
breaks the day is caught by `make test`: a primary and two workers, each the
real Claude Code against the stand-in model, with every disturbance of the
long day (a stage, an agent and the tmux server killed, an aside concluded
by the captain, crew-up restarted); the run exits 0 only when every
invariant held, and its report says so.

Without the CLI (make claude-code) this test is skipped loudly.
"""
import os
import subprocess
import sys

from claude_harness import REPO, require_real_claude

SOAK = os.path.join(REPO, "tests", "soak", "soak.py")
sys.path.insert(0, os.path.dirname(SOAK))
import day  # noqa: E402  (tests/soak/day.py)


def test_a_two_minute_day_keeps_every_promise(tmp_path):
    require_real_claude()
    root = tmp_path / "soak"
    r = subprocess.run([sys.executable, SOAK, "--duration", "2m", "--workers", "2",
                        "--seed", "7", "--root", str(root)],
                       capture_output=True, text=True, timeout=1200)
    report = (root / "report.txt").read_text()
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert f"soak: report: {root / 'report.txt'}\n" in r.stdout
    assert "\nViolations: 0\n" in report
    for figure in ("wakes shown to the model", "primary's share of the crew's tokens",
                   "primary turns per worker task", "event -> model latency", "nudges",
                   "peak RSS per command", "per session-hour", "timeline"):
        assert f"  {figure}" in report or figure in report, figure
    assert (root / "timeline.svg").read_text().startswith("<svg")
    # the same seed, the same day: the report names the day by its script
    turns = max(40, int(120 / 60 * 30))
    digest = day.digest({n: day.script(7, n, turns) for n in ("w1", "w2")})
    assert f"(day {digest})" in report.splitlines()[0]


def test_the_same_seed_draws_the_same_day_and_another_seed_another():
    assert day.script(1, "w1", 200) == day.script(1, "w1", 200)
    assert day.script(1, "w1", 200) != day.script(2, "w1", 200)
    assert day.script(1, "w1", 200) != day.script(1, "w2", 200)
    kinds = {line.split(":", 1)[0] for line in day.script(1, "w1", 200)}
    assert kinds == {"RUN", "SLOW", "SAY"}
