"""The test suite's own promises: a run fails naming any process a test
left alive; pytest's cache works (`--lf`); a harness's failing command
shows its stderr (issue 31.5)."""
import configparser
import os
import subprocess
import sys

import pytest

from conftest import REPO, wait_for
from claude_harness import CommandFailed, run_checked


def inner_pytest(tmp_path, test_text, *args):
    """Run pytest on one test file with this suite's conftest and settings."""
    test = tmp_path / "test_inner.py"
    test.write_text(test_text)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-c", os.path.join(REPO, "setup.cfg"),
         "--rootdir", REPO, "-p", "conftest", "-o", f"cache_dir={tmp_path / 'cache'}",
         "--basetemp", str(tmp_path / "inner"), *args, str(test)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)


def test_a_process_left_alive_fails_the_run_named_then_stopped(tmp_path):
    pidfile = tmp_path / "pid"
    r = inner_pytest(tmp_path, f"""
import subprocess
def test_leaves_one_behind():
    p = subprocess.Popen(["sleep", "3600"], start_new_session=True)
    open({str(pidfile)!r}, "w").write(str(p.pid))
""")
    pid = int(pidfile.read_text())
    assert r.returncode == 1, r.stdout + r.stderr
    assert "1 passed" in r.stdout
    assert "1 PROCESSES LEFT ALIVE BY THE TESTS" in r.stdout
    assert f"pid {pid}: sleep 3600" in r.stdout
    wait_for(lambda: not os.path.exists(f"/proc/{pid}") or
             open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z",
             what="the process left behind, stopped")


def test_a_clean_run_passes(tmp_path):
    r = inner_pytest(tmp_path, """
import subprocess
def test_waits_for_its_child():
    subprocess.run(["true"], check=True)
""")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "LEFT ALIVE" not in r.stdout


def test_last_failed_reruns_only_the_failures(tmp_path):
    """setup.cfg once disabled the cache: `--lf` silently ran everything."""
    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(REPO, "setup.cfg"))
    assert cfg["tool:pytest"]["cache_dir"] == ".cache/pytest"
    assert "cacheprovider" not in cfg["tool:pytest"].get("addopts", "")
    text = "def test_good():\n    pass\n\ndef test_bad():\n    assert False\n"
    first = inner_pytest(tmp_path, text)
    assert first.returncode == 1 and "1 failed, 1 passed" in first.stdout, first.stdout
    again = inner_pytest(tmp_path, text, "--lf")
    assert "1 failed, 1 deselected" in again.stdout, again.stdout


def test_a_harness_command_that_fails_shows_its_stderr(tmp_path):
    with pytest.raises(CommandFailed) as e:
        run_checked(["tmux", "-S", str(tmp_path / "nosock"), "-f", "/dev/null",
                     "send-keys", "-t", "%99", "x"])
    lines = str(e.value).splitlines()
    assert lines[0] == (f"tmux -S {tmp_path / 'nosock'} -f /dev/null send-keys -t %99 x: exit 1")
    assert lines[1].startswith("stderr: ") and ("no server running" in lines[1]
                                                or "error connecting" in lines[1]), lines
