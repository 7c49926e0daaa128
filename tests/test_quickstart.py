"""Issue 31: the README's quick start, run as written, starts a real crew.

From a fresh clone of this repository (nothing beside it), with HOME a
temporary directory and `claude` on PATH the REAL Claude Code from .cache
(tests/agent_clis.py), run offline against the project's stand-in model
(tests/model_server.py), in a tmux server of its own (TMUX_TMPDIR): the
commands of the README's `## Quick start` block, extracted from the README
(tests/readme_walkthrough.py), never copied here. They install crewfile
(`make install`), its hooks into ~/.claude, register and start the primary,
crew-up, two workers in their own worktrees (the primary and both workers
are real Claude Code sessions), a nudge, an aside. The test then reads the
state back: crew-up running, each worker in its tree, the schedule armed,
the aside open, and the wake of builder's first turn in the primary's inbox
and at its model. Then the README's `## Stop and uninstall` block, as
written; once every process of the crew is gone, HOME is what it was before
`make install`, but for what Claude Code keeps of its own (its state file
and its directory's other entries) and the project with its workers' trees,
which are the captain's.

The captain's answers to Claude Code's first-start questions (onboarding,
the API key, trusting the project and the two worktrees) are in HOME before
the quick start: crewfile never answers a dialog.

Without the CLI (make claude-code) this test is skipped loudly.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

import readme_walkthrough
from claude_harness import API_KEY, find_claude, records, require_real_claude, run_checked
from conftest import REPO, wait_for
from test_install import FAKE_CRONTAB, tree
from crewfile.core.paths import Crew
from crewfile.crew import crewup
from crewfile.session.sessions import Session

WORKERS = ("builder", "tester")
# What belongs to Claude Code, not crewfile: its state file (and backups of
# it), in ~/.claude everything but what `crew-hook --install` writes, and
# the handler of claude-cli:// links it registers at its first start.
CREWFILE_IN_CLAUDE = ("settings.json", "commands", "skills")
CLAUDE_CODE_S = {".config", ".config/mimeapps.list", ".local/share/applications",
                 ".local/share/applications/claude-code-url-handler.desktop"}


def readme():
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        return f.read()


def theirs(rel):
    """Is HOME-relative path *rel* another program's or the captain's?"""
    top = rel.split(os.sep)
    if top[0].startswith(".claude.json"):
        return True
    if top[0] == ".claude" and len(top) > 1 and top[1] not in CREWFILE_IN_CLAUDE:
        return True
    return rel in CLAUDE_CODE_S or top[0] == "src"   # src: the project, its workers' trees


def claude_state(home, trusted):
    """~/.claude.json as Claude Code keeps the captain's first answers."""
    version = subprocess.run([find_claude(), "--version"], capture_output=True,
                             text=True).stdout.split()[0]
    trust = {"hasTrustDialogAccepted": True, "hasCompletedProjectOnboarding": True,
             "allowedTools": []}
    return {"hasCompletedOnboarding": True, "lastOnboardingVersion": version,
            "lastReleaseNotesSeen": version, "numStartups": 1,
            "customApiKeyResponses": {"approved": [API_KEY[-20:]], "rejected": []},
            "projects": {str(t): dict(trust) for t in trusted}}


def model_server(tmp_path):
    """tests/model_server.py on a port of its own: (process, port)."""
    with open(tmp_path / "model-server.err", "wb") as err:
        server = subprocess.Popen([sys.executable, os.path.join(REPO, "tests", "model_server.py"),
                                   "--log", str(tmp_path / "requests.log")],
                                  stdout=subprocess.PIPE, stderr=err)
    line = server.stdout.readline().decode()
    assert line.startswith("port "), line
    return server, int(line.split()[1])


def ours(home):
    """{pid: command line} of the processes whose HOME is *home*."""
    mark = f"HOME={home}".encode()
    out = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if mark not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                out[int(pid)] = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
    return out


def test_the_readme_quick_start_as_written(tmp_path):
    require_real_claude()
    clone = tmp_path / "crewfile"
    run_checked(["git", "clone", "-q", REPO, str(clone)])
    home = tmp_path / "home"
    app = home / "src" / "app"
    trees = {n: home / "src" / "app.crew" / n for n in WORKERS}
    # A HOME as a Debian user has it: ~/.local's directories, settings of
    # the user's own in ~/.claude, a crontab line of theirs, the project.
    for d in (".local/bin", ".local/share", ".local/state", ".claude"):
        (home / d).mkdir(parents=True)
    # in crew-hook's own layout: it rewrites a settings file it changes so
    # (indent 2), the user's content kept (readme.bats compares a compact one as JSON)
    (home / ".claude" / "settings.json").write_text('{\n  "includeCoAuthoredBy": false\n}\n')
    (home / ".claude.json").write_text(json.dumps(claude_state(home, [app, *trees.values()])))
    (home / ".crontab").write_text("0 5 * * * /usr/local/bin/backup\n")
    app.mkdir(parents=True)
    git = {"GIT_AUTHOR_NAME": "captain", "GIT_AUTHOR_EMAIL": "captain@example.org",
           "GIT_COMMITTER_NAME": "captain", "GIT_COMMITTER_EMAIL": "captain@example.org"}
    run_checked(["git", "init", "-q", "-b", "main", str(app)])
    (app / "README").write_text("app\n")
    run_checked(["git", "-C", str(app), "add", "README"])
    run_checked(["git", "-C", str(app), "commit", "-q", "-m", "the app"], env={**os.environ, **git})
    before = tree(home)

    stubs = tmp_path / "stubs"
    stubs.mkdir()
    os.symlink(find_claude(), stubs / "claude")          # the real Claude Code, as `claude`
    (stubs / "crontab").write_text(FAKE_CRONTAB)         # the user's crontab: ~/.crontab
    (stubs / "crontab").chmod(0o755)
    server, port = model_server(tmp_path)
    sockets = tempfile.mkdtemp(prefix="cf-qs-")          # socket paths stay short
    drop = ("TMUX", "TMUX_PANE", "MAKEFLAGS", "CREWFILE_DIR", "CREWFILE_SESSION", "CREWFILE_TMUX",
            "CREWFILE_AGENT_CMD", "CREWFILE_PRIMARY", "XDG_STATE_HOME", "XDG_DATA_HOME",
            "XDG_CONFIG_HOME", "XDG_CACHE_HOME")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(git, HOME=str(home), TMUX_TMPDIR=sockets, TERM="xterm-256color",
               # ~/.local/bin, as the README asks; python3 that can make a venv;
               # the system's own (a toolchain manager's shims would write into HOME)
               PATH=f"{home}/.local/bin:{stubs}:{os.path.dirname(sys.executable)}"
                    ":/usr/local/bin:/usr/bin:/bin",
               # Claude Code, offline: the stand-in model, no update or telemetry
               ANTHROPIC_API_KEY=API_KEY, ANTHROPIC_BASE_URL=f"http://127.0.0.1:{port}",
               DISABLE_AUTOUPDATER="1", DISABLE_TELEMETRY="1", DISABLE_ERROR_REPORTING="1",
               CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1")
    crew = Crew(str(home / ".local" / "state" / "crewfile"))

    def run_section(heading):
        script = readme_walkthrough.script(readme(), heading)
        return subprocess.run(["bash", "-c", script], cwd=clone, env=env, capture_output=True,
                              text=True, timeout=900)

    def account():
        log = crewup.files(crew)[crewup.LOG]
        return (f"records: {[(n, records(crew, n)) for n in ('firstmate', *WORKERS)]}\n"
                f"crew-up log: {open(log).read()[-3000:] if os.path.exists(log) else ''}")

    try:
        r = run_section("## Quick start")
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
        assert r.stderr.endswith("## Quick start ran to its end\n")

        # crew-up runs, its wake pipe and nudge-tick --watch with it
        def running():
            stages = crewup.read_state(crew).get("stages") or {}
            return all(stages.get(n, {}).get("running") for n in ("wake", "nudge"))
        wait_for(running, timeout=120, what=account)
        # two workers, each in a worktree of its own on its own branch, live
        for name in WORKERS:
            meta = Session(crew, name).meta
            assert (meta["kind"], meta["cwd"]) == ("crew", str(trees[name]))
            assert run_checked(["git", "-C", str(trees[name]), "rev-parse", "--abbrev-ref",
                                "HEAD"]).stdout == f"crew/{name}\n"
            wait_for(lambda: '"live": "yes"' in shown(env, name), timeout=60,
                     what=lambda: shown(env, name))
        assert ("captain", "run the tests and fix what fails") in records(crew, "builder")
        # the schedule armed for builder
        p = subprocess.run(["nudge-ls"], env=env, capture_output=True, text=True)
        rows = [line.split() for line in p.stdout.splitlines()[1:]]
        assert [(row[2], row[3], row[4], row[5]) for row in rows] == \
            [("builder", "1800s", "0/20", "yes")], p.stdout
        # the aside open, waiting for the captain, in its window
        aside = Session(crew, "api-design")
        assert aside.meta["kind"] == "aside"
        # (its agent's own `started`, from its SessionStart hook, may come before
        # or after this look: the aside's records are read without it)
        assert [r for r in records(crew, "api-design") if r[0] != "started"][-2:] == [
            ("opened", "shape of the v2 API"), ("paused", "awaiting captain")]
        windows = run_checked(["tmux", "list-windows", "-t", "crew", "-F", "#{window_name}"],
                              env=env).stdout.split()
        assert sorted(windows) == sorted(["firstmate", "crew-up", *WORKERS, "api-design"])
        # builder's first turn ends: its wake reaches the primary's inbox, and its model
        wait_for(lambda: "turn-ended" in [k for k, _ in records(crew, "builder")],
                 timeout=120, what=account)
        wake = " builder turn-ended"
        inbox = [crew.root + f"/sessions/firstmate/{f}" for f in ("inbox", "inbox.read")]
        wait_for(lambda: any(wake in read(f) for f in inbox), timeout=120, what=account)
        wait_for(lambda: wake in read(tmp_path / "requests.log"), timeout=120,
                 what="the wake at the primary's model")

        r = run_section("## Stop and uninstall")
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
        wait_for(lambda: not ours(home), timeout=60, what=lambda: f"gone: {ours(home)}",
                 every=0.2)
        after = tree(home)
        left = sorted(p for p in set(after) - set(before) if not theirs(p))
        gone = sorted(p for p in set(before) - set(after) if not theirs(p))
        assert (left, gone) == ([], [])
        for rel in before:
            if not theirs(rel):
                assert after[rel] == before[rel], rel
    finally:
        subprocess.run(["tmux", "kill-server"], env=env, capture_output=True)
        for pid in ours(home):
            try:
                os.kill(pid, signal.SIGTERM)
            except OSError:
                pass
        server.kill()
        server.wait()
        server.stdout.close()
        shutil.rmtree(sockets, ignore_errors=True)


def shown(env, name):
    return subprocess.run(["status-show", name, "--json"], env=env, capture_output=True,
                          text=True).stdout


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def test_the_quick_start_is_ten_lines_and_every_command_has_its_link():
    """Issue 31: ten command lines or fewer, from install to a crew; the rest
    of the README links each command's page (docs/commands/NAME.md) and the
    contract, protocol.md."""
    text = readme()
    (first, block), = readme_walkthrough.blocks(text, "## Quick start")
    lines = readme_walkthrough.commands(block, first)
    assert len(lines) <= 10, lines
    assert lines[0][1].startswith("make install")
    linked = set(re.findall(r"\]\(docs/commands/([a-z-]+)\.md\)", text))
    assert linked == set(os.listdir(os.path.join(REPO, "bin")))
    assert "](protocol.md)" in text
