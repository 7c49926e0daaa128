"""The pinned interpreter: `make install` puts the commands in a venv of their
own, linked into ~/.local/bin (HOME is a temp dir here), and whatever crewfile
writes for cron or Claude Code names that venv's Python, never `python3`."""
import os
import shlex
import shutil
import subprocess
import sys

from conftest import REPO, cmd


def make(home, target):
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_DATA_HOME", "MAKEFLAGS")}
    env["HOME"] = str(home)
    return subprocess.run(["make", "-s", "-C", REPO, target, f"PYTHON={sys.executable}"],
                          env=env, capture_output=True, text=True, timeout=600)


def test_make_install_links_commands_that_run_from_anywhere(tmp_path):
    home = tmp_path / "home"
    (home / ".local" / "bin").mkdir(parents=True)
    (home / ".local" / "bin" / "mine").write_text("#!/bin/sh\n")    # the user's own
    p = make(home, "install")
    assert p.returncode == 0, p.stdout + p.stderr
    venv = home / ".local" / "share" / "crewfile" / "venv"
    links = home / ".local" / "bin"
    assert sorted(os.listdir(links)) == sorted(os.listdir(os.path.join(REPO, "bin")) + ["mine"])
    for name in os.listdir(os.path.join(REPO, "bin")):
        assert os.readlink(links / name) == str(venv / "bin" / name)
        with open(links / name) as f:
            assert f.readline() == f"#!{venv}/bin/python\n"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {"HOME": str(home), "PATH": f"{links}:/usr/bin:/bin", "CREWFILE_DIR": str(tmp_path / "crew")}
    run = lambda *a: subprocess.run(a, cwd=elsewhere, env=env, capture_output=True, text=True)
    assert run("session-add", "w1").returncode == 0
    p = run("session-ls")
    assert p.returncode == 0 and p.stdout.splitlines()[1].startswith("w1 ")
    # crew-status: from its link (pip's #! line: the venv's python, with site),
    # as the README's status-right runs it (python -S: site-packages found
    # beside it), and a copy with no crewfile beside it (-S: site is run)
    p = run("crew-status")
    assert (p.returncode, p.stdout, p.stderr) == (0, "1 idle\n", ""), p.stderr
    python = str(venv / "bin" / "python")
    assert run(python, "-S", str(links / "crew-status")).stdout == "1 idle\n"
    (tmp_path / "other" / "bin").mkdir(parents=True)
    shutil.copy(links / "crew-status", tmp_path / "other" / "bin")
    p = run(python, "-S", str(tmp_path / "other" / "bin" / "crew-status"))
    assert (p.returncode, p.stdout, p.stderr) == (0, "1 idle\n", ""), p.stderr
    p = run("crew-hook", "--settings")
    command = shlex.split(p.stdout.split('"command": "')[1].split('"')[0])
    assert command == [str(venv / "bin" / "python"), str(links / "crew-hook")]
    p = run("nudge-tick", "--crontab")
    assert f" {venv}/bin/python {links}/nudge-tick --quiet" in p.stdout
    for agent, shipped in (("claude", "commands/aside-done.md"),       # package data
                           ("codex", "skills/aside-done/agents/openai.yaml"),
                           ("gemini", "commands/aside-done.toml")):
        p = run("crew-hook", "--install", str(tmp_path / agent), "--agent", agent)
        assert p.returncode == 0 and (tmp_path / agent / shipped).is_file(), p.stderr
    p = subprocess.run([str(venv / "bin" / "python"), "-c", "import inotify_simple, crewfile"])
    assert p.returncode == 0

    p = make(home, "uninstall")
    assert p.returncode == 0, p.stdout + p.stderr
    assert os.listdir(links) == ["mine"] and not (home / ".local" / "share" / "crewfile").exists()


def test_crontab_line_runs_with_cron_s_bare_environment(crew, tmp_path):
    p = cmd("nudge-tick", "--crontab", env={"CREWFILE_TMUX": "", "TMUX": "/tmp/t-0/default,1,0"})
    assert p.returncode == 0, p.stderr
    line = p.stdout
    assert line.endswith("\n") and line.count("\n") == 1
    assert line.startswith(f"* * * * * CREWFILE_DIR={crew.root} ")
    assert "CREWFILE_TMUX" not in line           # each pane is reached on its own server
    assert line.endswith(f" {shlex.quote(sys.executable)} {os.path.join(REPO, 'bin', 'nudge-tick')} --quiet\n")
    # what cron does: sh -c with next to nothing in the environment
    p = subprocess.run(["/bin/sh", "-c", line.split(" ", 5)[5]], env={"PATH": "/nonexistent"},
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    p = cmd("nudge-tick", "--crontab", "--dir", str(tmp_path / "50%"), env={"CREWFILE_TMUX": "mine"})
    assert "CREWFILE_DIR=" + str(tmp_path / "50\\%") in p.stdout and "CREWFILE_TMUX" not in p.stdout
