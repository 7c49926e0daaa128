"""crew-spawn, crew-retire and crew-respawn with the REAL Claude Code CLI, offline
in a private tmux server against the scripted stand-in model
(tests/model_server.py), crew-hook installed in the agent's HOME.

Two workers are spawned from a real git repository, each in its own worktree
with its first prompt typed by crew-spawn; one is retired; a nudge is
scheduled for the other; then the "reboot": the tmux server is killed.
crew-respawn brings back the live one only, with `claude --resume ID` in its
tree: the SessionStart hook reports the same session id, the model sees the
earlier conversation, and the nudge scheduled before the reboot (disarmed by
a tick during the outage, armed again by the respawn) reaches it.
The retired one stays ended.

Without the CLI (make claude-code) this test is skipped loudly.
"""
import json
import os
import shlex
import subprocess
import sys

from agent_rigs import committed_repo
from conftest import cmd, wait_for
from claude_harness import (BIN, ClaudeRig, hook_command, kinds, records, require_real_claude,
                            run_checked, user_texts, watched)
from crewfile.session.sessions import Session
from test_nudge import make_due

PROMPT = "FIRST-PROMPT-3141 read the README"
NUDGE = "NUDGE-AFTER-REBOOT-2718 continue with the plan"


def _rig(tmp_path, tmux, repo, trusted):
    """A rig whose HOME has crew-hook installed and trusts *trusted* folders;
    returns (rig, the agent's command line for crew-spawn --cmd)."""
    path = f"{os.path.dirname(sys.executable)}:{BIN}:{os.environ['PATH']}"
    rig = ClaudeRig(tmp_path / "rig", tmux.sock, {}, env={"PATH": path}, script=[],
                    project=repo)
    rig.prepare()
    run_checked([sys.executable, str(BIN / "crew-hook"), "--install",
                 str(rig.home / ".claude"), "--command", hook_command()])
    state = json.loads((rig.home / ".claude.json").read_text())
    trust = state["projects"][str(repo)]
    state["projects"] = {str(t): dict(trust) for t in trusted}
    (rig.home / ".claude.json").write_text(json.dumps(state))
    argv = [rig.binary, "--permission-mode", "default", "--allowedTools", "Bash"]
    return rig, ("exec env " + " ".join(shlex.quote(f"{k}={v}")
                                         for k, v in rig.claude_env().items())
                 + " " + " ".join(map(shlex.quote, argv)))


def test_spawn_retire_reboot_respawn_with_the_real_claude(crew, tmux, tmp_path, monkeypatch):
    require_real_claude()
    repo = committed_repo(tmp_path, monkeypatch)
    trees = {n: str(tmp_path / "src" / "app.crew" / n) for n in ("w1", "w2")}
    rig, agent = _rig(tmp_path, tmux, repo, [repo, *trees.values()])
    with watched(rig, crew, "w1"):
        ids = {}
        for name in ("w1", "w2"):
            r = subprocess.run([sys.executable, str(BIN / "crew-spawn"), name, "--cmd", agent,
                                "--tmux-session", "crew", "--prompt", f"{PROMPT} ({name})"],
                               cwd=repo, capture_output=True, text=True, timeout=120)
            assert r.returncode == 0, r.stderr
            assert f"tree: {trees[name]}\n" in r.stdout
            wait_for(lambda: "turn-ended" in kinds(crew, name), timeout=60,
                     what=f"{name}'s first turn")
            meta = Session(crew, name).meta
            ids[name] = meta["agent_session_id"]          # recorded by SessionStart
            assert meta["cwd"] == trees[name]
            assert ("captain", f"{PROMPT} ({name})") in records(crew, name)
        rig.attach(Session(crew, "w1").meta["tmux"])
        wait_for(lambda: f"{PROMPT} (w1)" in user_texts(rig), what="the first prompt")

        r = cmd("crew-retire", "w2")
        assert r.returncode == 0, r.stderr
        assert ("ended", "retired") in records(crew, "w2")
        sid = cmd("nudge-add", "--session", "w1", "--every", "1", "--message", NUDGE,
                  check=True).stdout.strip()

        before = len(records(crew, "w1"))
        tmux.kill()                                       # the "reboot"
        assert cmd("status-show", "w1", "--json").stdout.count('"live": "no"') == 1
        # Hung up on, Claude Code runs its SessionEnd hook with reason `other`:
        # not an end on purpose (crew-respawn brings such a session back).
        wait_for(lambda: ("ended", "other") in records(crew, "w1")[before:], timeout=30,
                 what="SessionEnd after the hang-up")
        # cron ticks during the outage: the schedule is disarmed (not live).
        make_due(crew, sid)
        r = cmd("nudge-tick")
        assert "disarmed" in r.stdout, r.stdout + r.stderr

        r = cmd("crew-respawn", "--dry-run", "--json")
        assert r.returncode == 0, r.stderr
        plan = {x["name"]: (x["action"], x["detail"]) for x in json.loads(r.stdout)}
        assert plan["w1"] == ("would-respawn", f"in {trees['w1']}: {agent} --resume {ids['w1']}")
        assert plan["w2"][0] == "ended"
        r = cmd("crew-respawn", "--json")
        assert r.returncode == 0, r.stderr
        done = {x["name"]: x for x in json.loads(r.stdout)}
        assert {n: x["action"] for n, x in done.items()} == {"w1": "respawned", "w2": "ended"}
        assert done["w1"]["detail"].endswith(f"(schedules armed again: {sid})")
        meta = Session(crew, "w1").meta
        rig.attach(meta["tmux"])
        wait_for(lambda: ("started", "resume") in records(crew, "w1"), timeout=60,
                 what="the resumed SessionStart")
        assert Session(crew, "w1").meta["agent_session_id"] == ids["w1"]   # its own conversation
        assert not Session(crew, "w1").ended()
        assert tmux("display-message", "-p", "-t", meta["tmux"],
                    "#{pane_current_path}").strip() == trees["w1"]
        assert tmux("list-windows", "-a", "-F", "#{window_name}").split() == ["w1"]
        assert Session(crew, "w2").ended()

        def ticked():
            cmd("nudge-tick", "--quiet")
            return [t for k, t in records(crew, "w1") if k == "nudge"]
        wait_for(ticked, timeout=60, what="the nudge scheduled before the reboot")
        wait_for(lambda: NUDGE in user_texts(rig), timeout=60, what="the nudge at the model")
        last = [r for r in rig.main_requests() if NUDGE in json.dumps(r)][-1]
        assert f"{PROMPT} (w1)" in json.dumps(last)      # the same conversation goes on


def test_the_first_prompt_never_answers_claudes_trust_dialog(crew, tmux, tmp_path, monkeypatch):
    """Nothing trusted: Claude Code asks whether to trust the new worktree. Its
    selected option reads as a draft: nothing is typed. 2.1.197 shows
    `❯ 1. Yes, I trust this folder`; 2.1.332 `❯ No, exit`, selected by default,
    where an Enter typed by anyone would end the agent."""
    require_real_claude()
    repo = committed_repo(tmp_path, monkeypatch)
    rig, agent = _rig(tmp_path, tmux, repo, [])
    with watched(rig, crew, "w1"):
        # The whole wait: a draft is retried until it ends, and the dialog may
        # show late (2.1.197 not within 8 s at load 20: `no-prompt` instead).
        r = subprocess.run([sys.executable, str(BIN / "crew-spawn"), "w1", "--cmd", agent,
                            "--tmux-session", "crew", "--prompt", "PROMPT-NEVER-TYPED",
                            "--wait", "60s"], cwd=repo, capture_output=True, text=True,
                           timeout=240)
        rig.pane = Session(crew, "w1").meta["tmux"]
        assert r.returncode == 1, r.stderr
        selected = {"2.1.197": "1. Yes, I trust this folder"}.get(rig.version(), "No, exit")
        assert r.stderr == ("crew-spawn: w1 is spawned, but its first prompt was not delivered:"
                            f" draft: the prompt line holds '{selected}'\n")
        screen = rig.screen()
        assert "trust this folder" in screen and "PROMPT-NEVER-TYPED" not in screen
        assert "captain" not in kinds(crew, "w1")
