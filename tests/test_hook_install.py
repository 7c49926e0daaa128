"""crew-hook --settings / --install: the hooks block, the merge that keeps the
user's other hooks and is idempotent, the dry run, the /aside files."""
import json
import os
import shlex
import stat
import subprocess
import sys

import pytest

from crewfile.agents import claude, claude as cc, codex, gemini, install
from crewfile.asides import aside, captain
from crewfile.core.errors import BadInput
from crewfile.hooks import hook

USER_SETTINGS = {
    "model": "opus",
    "permissions": {"allow": ["Bash(npm test)"]},
    "hooks": {
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "~/bin/audit.sh"},
                                          {"type": "command", "command": "/old/path/crew-hook"}]},
            {"matcher": "Write", "hooks": [{"type": "command", "command": "lint-write"}]}],
        "PreCompact": [{"hooks": [{"type": "command", "command": "python3 /x/crew-hook"}]}],
        "PostCompact": "not a list: left alone",
    },
}


def ours(settings):
    return [(ev, h["command"]) for ev, groups in settings["hooks"].items()
            if isinstance(groups, list) for g in groups for h in g.get("hooks", [])
            if install.is_ours(h)]


def test_block_has_every_event_once():
    block = install.hooks_block("/opt/crew-hook")
    assert set(block["hooks"]) == {"SessionStart", "UserPromptSubmit", "PreToolUse",
                                   "PostToolUse", "Stop", "StopFailure", "SubagentStop",
                                   "TeammateIdle", "TaskCompleted", "Notification", "SessionEnd"}
    for event, groups in block["hooks"].items():
        assert len(groups) == 1
        rewake = ([{"type": "command", "command": "/opt/crew-hook --rewake", "asyncRewake": True,
                    "timeout": 3660}] if event == "Stop" else [])
        assert groups[0]["hooks"] == [{"type": "command", "command": "/opt/crew-hook",
                                       "timeout": claude.TIMEOUT}] + rewake
    assert block["hooks"]["PreToolUse"][0]["matcher"] == "Bash"


def test_merge_keeps_unrelated_hooks_and_replaces_old_crew_hook():
    merged = install.merge(USER_SETTINGS, install.hooks_block("/new/crew-hook"))
    assert merged["model"] == "opus" and merged["permissions"] == USER_SETTINGS["permissions"]
    hooks = merged["hooks"]
    assert hooks["Stop"][0] == USER_SETTINGS["hooks"]["Stop"][0]
    assert hooks["PreToolUse"][0] == {"matcher": "Bash", "hooks": [
        {"type": "command", "command": "~/bin/audit.sh"}]}
    assert hooks["PreToolUse"][1] == USER_SETTINGS["hooks"]["PreToolUse"][1]
    assert "PreCompact" not in hooks                   # only our old entry was there
    assert hooks["PostCompact"] == "not a list: left alone"
    assert sorted(ours(merged)) == sorted([(ev, "/new/crew-hook") for ev in claude.EVENTS]
                                          + [("Stop", "/new/crew-hook --rewake")])
    assert USER_SETTINGS["hooks"]["PreToolUse"][0]["hooks"][1]["command"] == "/old/path/crew-hook"


def test_merge_is_idempotent():
    block = install.hooks_block("/new/crew-hook")
    once = install.merge(USER_SETTINGS, block)
    assert install.merge(once, block) == once
    assert install.dumps(install.merge(json.loads(install.dumps(once)), block)) == install.dumps(once)


def test_merge_into_empty_and_refusals():
    block = install.hooks_block("crew-hook")
    assert install.merge({}, block) == block
    with pytest.raises(BadInput):
        install.merge([], block)
    with pytest.raises(BadInput):
        install.merge({"hooks": []}, block)


@pytest.mark.parametrize("command,mine", [
    ("crew-hook", True), ("/a b/crew-hook --x", True), ("'/a b/crew-hook'", True),
    ("python3 /x/bin/crew-hook", True), ("my-crew-hook", False), ("crew-hook2", False),
    ("echo 'unbalanced", False)])
def test_is_ours(command, mine):
    assert install.is_ours({"type": "command", "command": command}) is mine


def test_settings_prints_the_block(run):
    p = run("crew-hook", "--settings", "--command", "/opt/bin/crew-hook")
    assert p.returncode == 0
    assert json.loads(p.stdout) == install.hooks_block("/opt/bin/crew-hook")
    p = run("crew-hook", "--settings")
    cmd = json.loads(p.stdout)["hooks"]["Stop"][0]["hooks"][0]["command"]
    # pinned: the interpreter that ran the install, then the script; no PATH lookup
    python, script = shlex.split(cmd)
    assert python == sys.executable
    assert os.path.isabs(script) and script.endswith("/bin/crew-hook") and os.access(script, os.X_OK)


def test_the_installed_hook_runs_with_an_empty_path(run, tmp_path):
    """The exact command written into settings.json, run by a shell whose PATH
    has no python at all, handles a Stop event."""
    d = tmp_path / ".claude"
    assert run("crew-hook", "--install", str(d)).returncode == 0
    cmd = json.loads((d / "settings.json").read_text())["hooks"]["Stop"][0]["hooks"][0]["command"]
    crew = tmp_path / "crew"
    payload = json.dumps({"hook_event_name": "Stop", "session_id": "u1", "cwd": str(tmp_path)})
    p = subprocess.run(["/bin/sh", "-c", cmd], input=payload, text=True, capture_output=True,
                       env={"PATH": "/nonexistent", "CREWFILE_DIR": str(crew),
                            "CREWFILE_SESSION": "w1", "HOME": str(tmp_path)})
    assert p.returncode == 0 and p.stderr == ""
    assert "turn-ended" in (crew / "sessions" / "w1" / "status").read_text()


def test_install_dry_run_then_install_then_again(run, tmp_path):
    d = tmp_path / ".claude"
    d.mkdir()
    settings = d / "settings.json"
    original = json.dumps(USER_SETTINGS, indent=4) + "\n"
    settings.write_text(original)
    os.chmod(settings, 0o640)

    p = run("crew-hook", "--install", str(d), "--dry-run", "--command", "/opt/crew-hook")
    assert p.returncode == 0, p.stderr
    assert settings.read_text() == original               # nothing written
    assert not (d / "skills").exists() and not (d / "commands").exists()
    assert f"+++ {settings}" in p.stdout and '+            "command": "/opt/crew-hook",' in p.stdout
    assert f"would be updated {settings}\n" in p.stdout
    assert f"would be created {d}/skills/aside/SKILL.md\n" in p.stdout
    assert f"would be created {d}/commands/aside-done.md\n" in p.stdout

    p = run("crew-hook", "--install", str(d), "--command", "/opt/crew-hook")
    assert p.returncode == 0, p.stderr
    assert p.stdout == (f"updated {settings}\ncreated {d}/skills/aside/SKILL.md\n"
                        f"created {d}/commands/aside-done.md\n")
    merged = json.loads(settings.read_text())
    assert merged == install.merge(USER_SETTINGS, install.hooks_block("/opt/crew-hook"))
    assert stat.S_IMODE(os.stat(settings).st_mode) == 0o640
    skill = (d / "skills" / "aside" / "SKILL.md").read_text()
    assert skill.startswith("---\nname: aside\n")
    assert (d / "commands" / "aside-done.md").read_text().startswith("---\n")
    text = settings.read_text()

    p = run("crew-hook", "--install", str(d), "--command", "/opt/crew-hook")
    assert p.returncode == 0
    assert p.stdout.count("unchanged ") == 3
    assert settings.read_text() == text
    p = run("crew-hook", "--install", str(d), "--command", "/opt/crew-hook", "--dry-run")
    assert p.stdout.count("unchanged ") == 3 and "---" not in p.stdout
    assert not [f for f in os.listdir(d) if f.startswith(".")]      # no temporary left


def test_install_creates_missing_settings_and_follows_a_link(run, tmp_path):
    d = tmp_path / "proj" / ".claude"
    p = run("crew-hook", "--install", str(d), "--command", "crew-hook")
    assert p.returncode == 0, p.stderr
    assert json.loads((d / "settings.json").read_text()) == install.hooks_block("crew-hook")
    # a dotfiles manager's link: written through to its target
    real = tmp_path / "dotfiles-settings.json"
    real.write_text('{"model": "sonnet"}')
    (d / "settings.json").unlink()
    (d / "settings.json").symlink_to(real)
    p = run("crew-hook", "--install", str(d), "--command", "crew-hook")
    assert p.returncode == 0, p.stderr
    assert os.path.islink(d / "settings.json")
    assert json.loads(real.read_text())["model"] == "sonnet"
    assert "Stop" in json.loads(real.read_text())["hooks"]


def test_install_refuses_invalid_settings_untouched(run, tmp_path):
    d = tmp_path / ".claude"
    d.mkdir()
    (d / "settings.json").write_text('{"hooks": oops')
    p = run("crew-hook", "--install", str(d))
    assert p.returncode == 2
    assert p.stderr.startswith(f"crew-hook: {d}/settings.json is not valid JSON")
    assert (d / "settings.json").read_text() == '{"hooks": oops'
    assert not (d / "commands").exists()


def test_names_agree_with_the_aside_module():
    """The guard's words, the installed command's name and the aside's constants are one."""
    assert captain.CONCLUDE_COMMAND == "/aside-done"
    assert set(hook.CAPTAIN_ONLY_WORDS) == {captain.CONCLUDE_COMMAND[1:], aside.CAPTAIN_DONE}
    assert cc.CONCLUDE == gemini.CONCLUDE == captain.CONCLUDE_COMMAND
    assert codex.CONCLUDE == "$" + captain.CONCLUDE_COMMAND[1:]
    assert "commands/aside-done.md" in cc.FILES and "commands/aside-done.toml" in gemini.FILES
    assert "skills/aside-done/SKILL.md" in codex.FILES
    assert "name: aside-done\n" in install.shipped(codex, "skills/aside-done/SKILL.md")
    assert hook.RULE_HEADING in install.shipped(cc, cc.FILES[0])


def test_uninstall_removes_exactly_what_install_added(run, tmp_path):
    d = tmp_path / ".claude"
    d.mkdir()
    settings = d / "settings.json"
    settings.write_text(json.dumps(USER_SETTINGS, indent=4) + "\n")
    (d / "commands").mkdir()
    (d / "commands" / "mine.md").write_text("the user's own command\n")
    before = json.loads(settings.read_text())
    assert run("crew-hook", "--install", str(d)).returncode == 0
    p = run("crew-hook", "--uninstall", str(d), "--dry-run")
    assert p.returncode == 0, p.stderr
    assert f"would be removed {d}/skills/aside/SKILL.md" in p.stdout
    assert f"would be updated {settings}" in p.stdout and "-            \"command\":" in p.stdout
    assert (d / "skills" / "aside" / "SKILL.md").exists()

    p = run("crew-hook", "--uninstall", str(d))
    assert p.returncode == 0, p.stderr
    assert sorted(p.stdout.splitlines()) == sorted([
        f"updated {settings}", f"removed {d}/skills/aside/SKILL.md",
        f"removed {d}/commands/aside-done.md"])
    # the user's old crew-hook entries went too (--install had replaced them)
    assert json.loads(settings.read_text()) == install.merge(before, {"hooks": {}})
    assert not (d / "skills").exists()                         # emptied: gone
    assert (d / "commands" / "mine.md").read_text() == "the user's own command\n"
    p = run("crew-hook", "--uninstall", str(d))                 # again: nothing to do
    assert p.returncode == 0 and p.stdout == f"unchanged {settings}\n"


def test_uninstall_after_install_into_nothing_leaves_nothing(run, tmp_path):
    d = tmp_path / "proj" / ".claude"
    assert run("crew-hook", "--install", str(d)).returncode == 0
    p = run("crew-hook", "--uninstall", str(d))
    assert p.returncode == 0, p.stderr
    assert os.listdir(d) == []


def test_uninstall_keeps_an_edited_copy_and_a_link(run, tmp_path):
    d = tmp_path / ".claude"
    real = tmp_path / "dotfiles-settings.json"
    real.write_text("{}")
    d.mkdir()
    (d / "settings.json").symlink_to(real)
    assert run("crew-hook", "--install", str(d)).returncode == 0
    edited = d / "commands" / "aside-done.md"
    edited.write_text(edited.read_text() + "my note\n")
    p = run("crew-hook", "--uninstall", str(d))
    assert p.returncode == 0, p.stderr
    assert f"kept {edited} (edited: not crewfile's copy)" in p.stdout
    assert edited.exists() and os.path.islink(d / "settings.json")
    assert json.loads(real.read_text()) == {}


def test_uninstall_refuses_invalid_settings_untouched(run, tmp_path):
    d = tmp_path / ".claude"
    d.mkdir()
    (d / "settings.json").write_text('{"hooks": oops')
    p = run("crew-hook", "--uninstall", str(d))
    assert p.returncode == 2 and "is not valid JSON" in p.stderr
    assert (d / "settings.json").read_text() == '{"hooks": oops'
    p = run("crew-hook", "--install", str(d), "--uninstall", str(d))
    assert p.returncode == 2 and "exclude each other" in p.stderr
