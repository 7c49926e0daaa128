"""The small frictions a user met (issue 31, item 6), one test each: the
command run as the user ran it, its exit code and exact words, then the
state read back."""
import json
import os
import re
import subprocess
import sys

from conftest import cmd
from crewfile.core import logfile
from crewfile.core.records import timestamp
from crewfile.nudges import schedules
from crewfile.session.sessions import Session


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


def test_every_offers_only_examples_it_accepts(crew):
    cmd("session-add", "w", check=True)
    r = cmd("nudge-add", "--session", "w", "--every", "soon", "--message", "go")
    assert (r.returncode, r.stderr) == (2, "nudge-add: bad --every 'soon': a whole number of"
                                           " seconds as a duration such as 90, 90s, 30m, 1h30m"
                                           " or 2d (at most 366d)\n")
    r = cmd("nudge-add", "--session", "w", "--every", "1.5s", "--message", "go")
    assert (r.returncode, r.stderr) == (2, "nudge-add: bad --every '1.5s': a whole number of"
                                           " seconds\n")
    r = cmd("job-wait", "nope", "--timeout", "soon")      # a fraction is fine there
    assert "such as 90, 90s, 1.5s, 30m" in r.stderr
    assert schedules.load_all(crew) == []


def test_nudge_add_names_the_one_option_missing(crew):
    cmd("session-add", "builder", check=True)
    for given, missing in ((["--every", "30m"], "--message is required"),
                           (["--message", "go on"], "--every is required"),
                           ([], "--every and --message are required")):
        r = cmd("nudge-add", "--session", "builder", *given)
        assert (r.returncode, r.stderr) == (
            2, f"nudge-add: {missing}\nTry 'nudge-add --help'.\n"), given
    assert schedules.load_all(crew) == []


def test_nudge_add_replace_keeps_the_max_and_until_not_given_again(crew):
    cmd("session-add", "builder", check=True)
    sid = cmd("nudge-add", "--session", "builder", "--every", "30m", "--message", "go on",
              "--max", "20", "--until", "3h", check=True).stdout.strip()
    until = schedules.get(crew, sid)["until"]
    r = cmd("nudge-add", "--session", "builder", "--every", "1h", "--message", "carry on",
            "--replace")
    assert (r.returncode, r.stdout) == (0, f"{sid}\n")
    sched = schedules.get(crew, sid)
    assert (sched["max"], sched["until"], sched["attempts"], sched["every"],
            sched["message"]) == (20, until, 0, 3600, "carry on")
    row = cmd("nudge-ls", check=True).stdout.splitlines()[1].split()
    assert row[4] == "0/20"
    cmd("nudge-add", "--session", "builder", "--every", "1h", "--message", "m", "--max", "5",
        "--replace", check=True)
    assert schedules.get(crew, sid)["max"] == 5
    assert "--max and --until kept" in cmd("nudge-add", "--help", check=True).stdout


def test_nudge_add_says_when_its_session_is_not_live(crew, tmux):
    cmd("session-add", "builder", check=True)
    r = cmd("nudge-add", "--session", "builder", "--every", "30m", "--message", "go on")
    assert r.returncode == 0 and r.stdout.strip().startswith("n")
    assert r.stderr == ("nudge-add: note: builder is not live (no tmux pane is registered for"
                        " the session): when the nudge is due, a tick disarms the schedule"
                        " unless the session is live again by then\n")
    assert schedules.get(crew, r.stdout.strip())["armed"] is True      # kept, as said
    pane = tmux.new_window("sleep 600", name="live")
    pid = tmux("display-message", "-p", "-t", pane, "#{pane_pid}").strip()
    cmd("session-add", "live", "--tmux", pane, "--pid", pid, check=True,
        env={"CREWFILE_TMUX": tmux.sock})
    r = cmd("nudge-add", "--session", "live", "--every", "30m", "--message", "go on")
    assert (r.returncode, r.stderr) == (0, "")


def test_nudge_ls_shows_until(crew):
    cmd("session-add", "builder", check=True)
    cmd("session-add", "tester", check=True)
    sid = cmd("nudge-add", "--session", "builder", "--every", "30m", "--message", "go",
              "--until", "2h", check=True).stdout.strip()
    other = cmd("nudge-add", "--session", "tester", "--every", "30m", "--message", "go",
                check=True).stdout.strip()
    r = cmd("nudge-ls")
    assert (r.returncode, r.stderr) == (0, "")
    header, *rows = r.stdout.splitlines()
    assert header.split() == ["ID", "USER", "SESSION", "EVERY", "ATTEMPTS", "ARMED", "LAST",
                              "OUTCOME", "UNTIL", "OWN", "REASON"]
    rows = {row.split()[0]: row.split() for row in rows}
    assert rows[sid][8] == timestamp(schedules.get(crew, sid)["until"])
    assert rows[other][8] == "-"


def test_a_retired_sessions_schedules_are_disarmed_at_once(crew):
    for name in ("builder", "tester"):
        cmd("session-add", name, check=True)
    sid = cmd("nudge-add", "--session", "builder", "--every", "30m", "--message", "go",
              check=True).stdout.strip()
    other = cmd("nudge-add", "--session", "tester", "--every", "30m", "--message", "go",
                check=True).stdout.strip()
    r = cmd("crew-retire", "builder")
    assert r.returncode == 0, r.stderr
    assert r.stdout == (f"scrollback: -\nworktree: -\nbranch: -\nnudges: disarmed {sid}\n")
    sched = schedules.get(crew, sid)
    assert (sched["armed"], sched["last_outcome"], sched["last_code"], sched["last_reason"]) == (
        False, "disarmed", "retired", "disarmed: crew-retire ended the session")
    assert schedules.get(crew, other)["armed"] is True
    assert Session(crew, "builder").ended()
    r = cmd("crew-retire", "builder")                  # a rerun: nothing left to disarm
    assert (r.returncode, r.stdout) == (0, "scrollback: -\nworktree: -\nbranch: -\n")


def test_session_add_pid_records_the_agent_of_a_live_registration(crew, tmux):
    pane = tmux.new_window("sleep 600", name="builder")
    pid = tmux("display-message", "-p", "-t", pane, "#{pane_pid}").strip()
    env = {"CREWFILE_TMUX": tmux.sock}
    cmd("session-add", "builder", "--tmux", pane, check=True, env=env)
    st = json.loads(cmd("status-show", "builder", "--json", check=True).stdout)
    assert (st["live"], st["why"]) == ("unknown", "agent-unknown")
    assert st["why_detail"].endswith("its next crew-hook event does, or session-add NAME --pid PID")
    r = cmd("session-add", "builder", "--pid", pid, env=env)
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")
    assert Session(crew, "builder").meta["pid"] == int(pid)
    assert json.loads(cmd("status-show", "builder", "--json", check=True).stdout)["live"] == "yes"
    r = cmd("session-add", "builder", "--pid", pid, env=env)
    assert (r.returncode, r.stderr) == (
        1, f"session-add: session 'builder' already has its agent recorded (pid {pid})\n")
    r = cmd("session-add", "builder", "--pid", pid, "--cwd", "/", env=env)
    assert (r.returncode, r.stderr) == (
        1, "session-add: session 'builder' is already registered and not ended\n")
    assert [r.kind for r in Session(crew, "builder").last_records(10, logfile.TailStats())] == [
        "registered"]


def test_session_add_pid_refuses_an_ended_registration(crew):
    cmd("session-add", "builder", check=True)
    cmd("crew-retire", "builder", check=True)
    r = cmd("session-add", "builder", "--pid", str(os.getpid()))
    assert (r.returncode, r.stderr) == (
        1, "session-add: session 'builder' has ended: register it again\n")
    assert "pid" not in Session(crew, "builder").meta


def test_session_add_refuses_a_cwd_that_does_not_exist(crew, tmp_path):
    r = cmd("session-add", "builder", "--cwd", str(tmp_path / "src" / "app"))
    assert (r.returncode, r.stdout, r.stderr) == (
        2, "", f"session-add: bad --cwd '{tmp_path}/src/app': no such directory\n")
    assert not Session(crew, "builder").exists()
    (tmp_path / "src" / "app").mkdir(parents=True)
    cmd("session-add", "builder", "--cwd", str(tmp_path / "src" / "app"), check=True)
    assert Session(crew, "builder").meta["cwd"] == os.path.realpath(tmp_path / "src" / "app")


def test_a_mistyped_session_name_is_offered_the_registered_one(crew):
    for name in ("builder", "tester", "docs"):
        cmd("session-add", name, check=True)
    for typo, offered in (("buidler", "'builder'"), ("biulder", "'builder'"),
                          ("tster", "'tester'"), ("testers", "'tester'"), ("dogs", "'docs'")):
        r = cmd("status-show", typo)
        assert (r.returncode, r.stdout, r.stderr) == (
            3, "", f"status-show: no session {typo!r} (did you mean {offered}?)\n")
    r = cmd("status-append", "reviewer", "turn-started")
    assert (r.returncode, r.stderr) == (
        3, "status-append: no session 'reviewer' (register it with session-add)\n")
    cmd("session-add", "tester2", check=True)
    r = cmd("nudge-add", "--session", "testr", "--every", "1h", "--message", "go")
    assert r.stderr == "nudge-add: no session 'testr' (did you mean 'tester'?)\n"
    r = cmd("status-show", "tester3")
    assert r.stderr == "status-show: no session 'tester3' (did you mean 'tester' or 'tester2'?)\n"
    assert not Session(crew, "buidler").exists()


def test_aside_reconcile_synopsis_puts_duration_under_wait(crew):
    r = cmd("aside-reconcile", "--help")
    assert r.returncode == 0
    assert r.stdout.splitlines()[0] == "aside-reconcile NAME [--wait [DURATION]]"
    assert "  --wait [DURATION]     wait at most DURATION (default: 10m," in r.stdout
    r = cmd("aside-reconcile", "design", "15m")          # the synopsis is also the parser's spec
    assert (r.returncode, r.stderr) == (
        2, "aside-reconcile: a DURATION needs --wait\nTry 'aside-reconcile --help'.\n")


def test_the_demo_counts_the_wakes_it_delivered_and_runs_the_readmes_pipeline():
    demo = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "demo")
    r = subprocess.run([sys.executable, os.path.join(demo, "demo.py"), "scene_10", "scene_20"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(r"\$ crew-watch --resume (\S+) \| wake-filter \| wake-send firstmate"
                     r" --cursor \1 ", r.stdout), r.stdout
    said = re.search(r"Of (\d+) events while the pipeline ran, (\d+) passed wake-filter; the"
                     r" primary's inbox got (\d+) wakes", r.stdout)
    assert said and said[2] == said[3] == "3", r.stdout
    assert "wake-send: announced 3 wake(s)" in r.stdout
    with open(os.path.join(demo, "scene_40_nudge.py")) as f:
        assert "user's document" not in f.read()
    with open(os.path.join(demo, "scene_60_crewup.py")) as f:   # done, then the turn's end
        assert "status-append builder done 'shipped v2'; status-append builder turn-ended" in f.read()
