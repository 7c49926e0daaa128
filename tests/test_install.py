"""The pinned interpreter: `make install` puts the commands in a venv of their
own, linked into ~/.local/bin (HOME is a temp dir here), and whatever crewfile
writes for cron or Claude Code names that venv's Python, never `python3`."""
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys

from conftest import REPO, cmd, wait_for
from crewfile.core.paths import Crew
from crewfile.crew import crewup
from crewfile.session.sessions import Session, register
from crewfile.wake import inbox
from test_remote import HOSTS, sshd  # noqa: F401 (the fixture: a private sshd on localhost)


def make(home, target, extra_env=None):
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_DATA_HOME", "MAKEFLAGS")}
    env["HOME"] = str(home)
    env.update(extra_env or {})
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
    # each command's options and --help: its page, package data beside the code
    p = run("job-wait", "--help")
    at = p.stdout.splitlines()[-1].removeprefix("The whole page: ")
    assert p.returncode == 0 and at.startswith(str(venv)) and os.path.isfile(at), p.stdout
    assert run("job-wait", "--tail").stderr == "job-wait: --tail needs a value (N)\nTry 'job-wait --help'.\n"
    p = run(python, "-S", str(tmp_path / "other" / "bin" / "crew-status"), "--help")
    assert p.returncode == 0 and p.stdout.startswith("crew-status [--tmux] [--panes LIST]\n"), p.stderr
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


def installed(tmp_path):
    """`make install` into the temporary HOME under *tmp_path*: (home, links, venv)."""
    home = tmp_path / "home"
    home.mkdir()
    p = make(home, "install")
    assert p.returncode == 0, p.stdout + p.stderr
    return home, home / ".local" / "bin", home / ".local" / "share" / "crewfile" / "venv"


def crew_up_account(crew, err):
    """What crew-up said, for a failed wait: its state, its log, its stderr."""
    def tell():
        log = crewup.files(crew)[crewup.LOG]
        tail = open(log, errors="replace").read()[-3000:] if os.path.exists(log) else ""
        return (f"state: {crewup.read_state(crew)}\nlog:\n{tail}\nstderr:\n"
                f"{err.read_text(errors='replace')[-2000:]}")
    return tell


def stop(up):
    if up.poll() is None:
        up.send_signal(signal.SIGTERM)
    assert up.wait(30) == 0


def test_installed_crew_up_delivers_a_wake_end_to_end(crew, tmp_path, request):
    """Issue 31.1: after `make install` crew-up looked for its stages beside
    the package (in site-packages), every stage exited 2 and was restarted
    for ever, and nothing was said on crew-up's terminal."""
    home, links, venv = installed(tmp_path)
    request.addfinalizer(lambda: make(home, "uninstall"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {"HOME": str(home), "PATH": f"{links}:/usr/bin:/bin", "CREWFILE_DIR": crew.root}
    run = lambda *a: subprocess.run(a, cwd=elsewhere, env=env, capture_output=True, text=True)
    assert run("session-add", "boss", "--kind", "primary").returncode == 0
    assert run("session-add", "w1").returncode == 0
    err = tmp_path / "crew-up.err"
    up = subprocess.Popen(["crew-up", "boss", "--sweep", "1h"], cwd=elsewhere, env=env,
                          stdout=subprocess.DEVNULL, stderr=open(err, "wb"))
    request.addfinalizer(lambda: stop(up))

    def running():
        assert up.poll() is None, "crew-up exited"
        stages = crewup.read_state(crew).get("stages") or {}
        return all(stages.get(n, {}).get("running") for n in ("wake", "nudge"))
    wait_for(running, timeout=120, what=crew_up_account(crew, err))
    p = run("status-append", "w1", "blocked", "needs the captain")
    assert p.returncode == 0, p.stderr
    wait_for(lambda: any(n.text.endswith(" w1 blocked: needs the captain")
                         for n in inbox.pending(crew, "boss")),
             timeout=120, what=crew_up_account(crew, err))
    stages = crewup.read_state(crew)["stages"]
    assert [(n, s["restarts"]) for n, s in sorted(stages.items())] == \
        [("nudge", 0), ("sweep", 0), ("wake", 0)]
    stop(up)
    assert err.read_text() == ""
    with open(crewup.files(crew)[crewup.LOG]) as f:
        started = [line.split(" ", 2)[2] for line in f if " stage-started: " in line]
    assert any("crew-watch pid" in line for line in started)


def test_installed_crew_up_reaches_a_remote_crew(crew, sshd, tmp_path, request):
    """--remote through the same path: the far side runs the installed
    crew-watch and wake-filter (here the same machine, over a real sshd)."""
    home, links, venv = installed(tmp_path)
    request.addfinalizer(lambda: make(home, "uninstall"))
    far = Crew(str(tmp_path / "far"))
    register(crew, "boss", kind="primary")
    register(far, "w1")
    err = tmp_path / "crew-up.err"
    env = {"HOME": str(home), "PATH": f"{links}:/usr/bin:/bin", "CREWFILE_DIR": crew.root,
           "CREWFILE_SSH": sshd}
    up = subprocess.Popen(["crew-up", "boss", "--sweep", "1h", f"--remote={HOSTS[0]}:{far.root}"],
                          cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                          stderr=open(err, "wb"))
    request.addfinalizer(lambda: stop(up))

    def running():
        assert up.poll() is None, "crew-up exited"
        stages = crewup.read_state(crew).get("stages") or {}
        return stages.get(f"wake@{HOSTS[0]}", {}).get("running")
    wait_for(running, timeout=240, what=crew_up_account(crew, err), every=0.2)
    # once the far side's crew-watch runs, from the installed venv
    wait_for(lambda: _runs(f"{venv}/bin/crew-watch".encode()), timeout=240,
             what=crew_up_account(crew, err), every=0.2)
    Session(far, "w1").append("blocked", "far away")
    wait_for(lambda: any(n.text.endswith(f" {HOSTS[0]}:w1 blocked: far away")
                         for n in inbox.pending(crew, "boss")),
             timeout=240, what=crew_up_account(crew, err), every=0.2)
    stop(up)
    assert err.read_text() == ""


def _runs(word):
    """Does a process run with *word* on its command line?"""
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if word in f.read().split(b"\0"):
                    return True
        except (OSError, ValueError):
            continue
    return False


def test_a_stage_that_fails_at_once_is_said_on_crew_up_s_stderr(crew, tmp_path, request):
    """A crew-up whose commands cannot be found (here: a copy of bin/crew-up
    alone in a directory, the package beside it) says so once on its own
    stderr, not only in its log, and goes on restarting."""
    os.makedirs(tmp_path / "lonely" / "bin")
    os.symlink(os.path.join(REPO, "lib"), tmp_path / "lonely" / "lib")
    shutil.copy(os.path.join(REPO, "bin", "crew-up"), tmp_path / "lonely" / "bin")
    err = tmp_path / "crew-up.err"
    os.makedirs(crew.root, exist_ok=True)
    up = subprocess.Popen([sys.executable, str(tmp_path / "lonely" / "bin" / "crew-up"), "boss",
                           "--backoff-max", "0.2s", "--sweep", "1h"],
                          env={**os.environ, "CREWFILE_DIR": crew.root},
                          stdout=subprocess.DEVNULL, stderr=open(err, "wb"))
    request.addfinalizer(lambda: stop(up))
    said = lambda: [l for l in err.read_text().splitlines() if " fails at once " in l]
    wait_for(lambda: len(said()) >= 2, timeout=120, what=crew_up_account(crew, err))
    stages = lambda: crewup.read_state(crew)["stages"]
    wait_for(lambda: stages()["wake"]["restarts"] >= 6 and stages()["nudge"]["restarts"] >= 6,
             timeout=120, what=crew_up_account(crew, err))
    lines = said()
    assert sorted(l.split(" ")[2] for l in lines) == ["nudge", "wake"]     # once each
    wake = next(l for l in lines if l.startswith("crew-up: stage wake "))
    assert wake.startswith("crew-up: stage wake fails at once (3 times in a row; ")
    assert f"can't open file '{tmp_path}/lonely/bin/" in wake
    assert wake.endswith(f"still restarting it, see {crewup.files(crew)[crewup.LOG]}")
    assert up.poll() is None
    assert err.read_text().count("\n") == 2       # the sweep failed once: it waits its hour


FAKE_CRONTAB = """#!/bin/sh
# crontab(1) for a test: the user's crontab is the file $HOME/.crontab,
# replaced once all of stdin is read, as crontab does (`crontab -l | ... |
# crontab -` reads it while the new one is written)
case "$1" in
  -l) [ -f "$HOME/.crontab" ] && exec cat "$HOME/.crontab"; echo "no crontab for $USER" >&2; exit 1 ;;
  -) cat > "$HOME/.crontab.new" && exec mv "$HOME/.crontab.new" "$HOME/.crontab" ;;
esac
exit 2
"""


def tree(root):
    """Every path under *root* (relative), with a file's content."""
    out = {}
    for d, dirs, names in os.walk(root):
        for n in dirs + names:
            path = os.path.join(d, n)
            rel = os.path.relpath(path, root)
            out[rel] = None if os.path.isdir(path) and not os.path.islink(path) else \
                os.readlink(path) if os.path.islink(path) else open(path, "rb").read()
    return out


def test_make_uninstall_removes_the_hooks_and_the_cron_line(tmp_path):
    """Issue 31.2: after `make uninstall`, ~/.claude/settings.json,
    ~/.codex/hooks.json and ~/.gemini/settings.json still ran the deleted
    interpreter on every agent event; the cron line every minute."""
    home = tmp_path / "home"
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    (stubs / "crontab").write_text(FAKE_CRONTAB)
    (stubs / "crontab").chmod(0o755)
    # the user's own: a command, hooks of their own in each agent's file, a cron line
    (home / ".local" / "bin").mkdir(parents=True)
    (home / ".local" / "bin" / "mine").write_text("#!/bin/sh\n")
    (home / ".local" / "share" / "other").mkdir(parents=True)
    mine = {"type": "command", "command": "/usr/local/bin/my-linter"}
    users = {
        "claude": (".claude/settings.json", {"model": "opus", "hooks": {
            "Stop": [{"hooks": [mine]}]}}),
        "codex": (".codex/hooks.json", {"hooks": {"Stop": [{"hooks": [mine]}]}}),
        "gemini": (".gemini/settings.json", {"theme": "dark", "hooks": {
            "AfterAgent": [{"hooks": [mine]}]}}),
    }
    for rel, doc in users.values():
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text(json.dumps(doc, indent=2) + "\n")
    (home / ".crontab").write_text("0 5 * * * /usr/local/bin/backup\n")
    before = tree(home)

    # a PATH of the system's own: a toolchain manager's shims (rustup's, run by
    # pip's build) would leave their own files in this HOME; pip's own cache
    # (~/.cache/pip: what it downloaded over HTTP, the wheels it built) is
    # pip's, kept as after any pip install: outside this HOME
    env_make = {"PATH": f"{stubs}:/usr/local/bin:/usr/bin:/bin",
                "PIP_CACHE_DIR": str(tmp_path / "pip-cache")}
    p = make(home, "install", env_make)
    assert p.returncode == 0, p.stdout + p.stderr
    links = home / ".local" / "bin"
    env = {"HOME": str(home), "PATH": f"{links}:{stubs}:/usr/bin:/bin",
           "CREWFILE_DIR": str(tmp_path / "crew")}
    run = lambda *a: subprocess.run(a, cwd=tmp_path, env=env, capture_output=True, text=True)
    for agent, (rel, _) in users.items():
        p = run("crew-hook", "--install", str((home / rel).parent), "--agent", agent)
        assert p.returncode == 0, p.stderr
        assert "crew-hook" in (home / rel).read_text()
    p = run("sh", "-c", "(crontab -l; nudge-tick --crontab) | crontab -")
    assert p.returncode == 0, p.stderr
    assert "nudge-tick --quiet" in (home / ".crontab").read_text()

    p = make(home, "uninstall", env_make)
    assert p.returncode == 0, p.stdout + p.stderr
    after = tree(home)
    assert sorted(after) == sorted(before)
    for rel, doc in users.values():
        assert json.loads(after[rel]) == doc, rel
    for rel in before:
        if not rel.endswith(".json"):
            assert after[rel] == before[rel], rel


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
