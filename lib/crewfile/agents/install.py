"""What a user installs into an agent CLI: the hooks block that runs crew-hook,
its merge into the agent's hooks file, and the files that carry the captain's
conclusion (which events, file and timeout unit: the agent's adapter; what
the merge keeps and how each file is written: docs/commands/crew-hook.md).
"""
import difflib
import json
import os
import shlex
from collections import namedtuple

from crewfile.agents import claude as CLAUDE
from crewfile.core.atomic import read_text, replace
from crewfile.core.errors import BadInput

HOOK_NAME = "crew-hook"
# Each file of an adapter's FILES, installed at DIR/REL, is kept at SHARE/AGENT/REL.
SHARE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "files")


def hooks_block(command, agent=CLAUDE):
    """The fragment {"hooks": {...}} that runs *command* for each of *agent*'s
    events: its tool event only for its shell tools (the guard's); the rest see
    everything."""
    hooks = {}
    for event, action in agent.EVENTS.items():
        group = {"matcher": "|".join(agent.SHELL_TOOLS)} if action == "PreToolUse" else {}
        group["hooks"] = [{"type": "command", "command": command, "timeout": agent.TIMEOUT}]
        if event == getattr(agent, "REWAKE", None):
            group["hooks"].append({"type": "command", "command": f"{command} --rewake",
                                   "asyncRewake": True, "timeout": agent.REWAKE_TIMEOUT})
        hooks[event] = [group]
    return {"hooks": hooks}


def is_ours(hook):
    """True for a command hook that runs crew-hook (whatever its path or interpreter)."""
    if not isinstance(hook, dict) or not isinstance(hook.get("command"), str):
        return False
    try:
        words = shlex.split(hook["command"])
    except ValueError:
        words = hook["command"].split()
    return any(os.path.basename(w) == HOOK_NAME for w in words)


def merge(settings, block):
    """*settings* (a dict) with crew-hook's old entries replaced by *block*'s."""
    if not isinstance(settings, dict):
        raise BadInput("settings is not a JSON object")
    out = dict(settings)
    hooks = out.get("hooks", {})
    if not isinstance(hooks, dict):
        raise BadInput('settings "hooks" is not a JSON object')
    hooks = dict(hooks)
    for event, groups in list(hooks.items()):
        if not isinstance(groups, list):
            continue                 # not ours to understand: left as it is
        kept_groups = []
        for group in groups:
            inner = group.get("hooks") if isinstance(group, dict) else None
            if isinstance(inner, list) and any(map(is_ours, inner)):
                group = dict(group, hooks=[h for h in inner if not is_ours(h)])
                if not group["hooks"]:
                    continue
            kept_groups.append(group)
        if groups and not kept_groups:        # every group was ours alone
            del hooks[event]
        else:
            hooks[event] = kept_groups
    for event, groups in block["hooks"].items():
        mine = hooks.get(event, [])
        if not isinstance(mine, list):   # not ours to replace, and ours cannot go beside it
            raise BadInput(f'settings "hooks" has {event!r} not as a JSON array')
        hooks[event] = list(mine) + groups
    out["hooks"] = hooks
    return out


def dumps(settings):
    return json.dumps(settings, indent=2) + "\n"


class Change(namedtuple("Change", "path old new mode")):
    """One file the install creates, updates or leaves unchanged."""

    @property
    def verb(self):
        if self.old == self.new:
            return "unchanged"
        return "created" if self.old is None else "removed" if self.new is None else "updated"

    def diff(self):
        return "".join(difflib.unified_diff(
            (self.old or "").splitlines(True), (self.new or "").splitlines(True),
            fromfile=self.path if self.old is not None else "/dev/null",
            tofile=self.path if self.new is not None else "/dev/null"))


def _settings(claude_dir, agent):
    """(path, text or None, parsed dict, mode) of *claude_dir*'s hooks file."""
    path = os.path.realpath(os.path.join(claude_dir, agent.HOOKS_FILE))
    old = read_text(path)
    if old is None:
        return path, None, {}, 0o600
    try:
        current = json.loads(old) if old.strip() else {}
    except ValueError as e:
        raise BadInput(f"{path} is not valid JSON ({e}); nothing changed") from None
    return path, old, current, os.stat(path).st_mode & 0o777


def shipped(agent, rel):
    """The text crewfile ships for *agent*'s file *rel*."""
    with open(os.path.join(SHARE, agent.NAME, rel), encoding="utf-8") as f:
        return f.read()


def plan(claude_dir, command, agent):
    """The changes that installing into *claude_dir* (e.g. ~/.claude, ~/.codex,
    ~/.gemini) makes."""
    settings_path, old, current, mode = _settings(claude_dir, agent)
    merged = merge(current, hooks_block(command, agent))
    new = old if old is not None and merged == current else dumps(merged)
    changes = [Change(settings_path, old, new, mode)]
    for rel in agent.FILES:
        path = os.path.join(claude_dir, rel)
        changes.append(Change(path, read_text(path), shipped(agent, rel), 0o644))
    return changes


def plan_uninstall(claude_dir, agent):
    """(changes, kept) that removing crewfile from *claude_dir* makes: its
    hooks out of settings.json (a `hooks` object or a settings.json left
    empty by that goes too), the skill and command files if they are still
    crewfile's copies. *kept*: the paths of edited copies, left alone."""
    settings_path, old, current, mode = _settings(claude_dir, agent)
    changes, kept = [], []
    if old is not None:
        merged = merge(current, {"hooks": {}})
        if merged == dict(current, hooks=current.get("hooks", {})):
            merged = current                          # none of ours were there
        elif not merged["hooks"]:
            del merged["hooks"]
        new = old if merged == current else dumps(merged) if merged else None
        if new is None and os.path.islink(os.path.join(claude_dir, agent.HOOKS_FILE)):
            new = dumps({})                           # a dotfiles manager's link stays
        changes.append(Change(settings_path, old, new, mode))
    for rel in agent.FILES:
        path = os.path.join(claude_dir, rel)
        text = read_text(path)
        if text is None:
            continue
        if text == shipped(agent, rel):
            changes.append(Change(path, text, None, 0o644))
        else:
            kept.append(path)
    return changes, kept


def apply(changes, root=None):
    """Write the changed files (atomically, parents created); remove the
    ones whose new content is None, and the directories that leaves empty
    below *root*."""
    for ch in changes:
        if ch.old == ch.new:
            continue
        if ch.new is None:
            os.unlink(ch.path)
            _prune(os.path.dirname(ch.path), root)
            continue
        os.makedirs(os.path.dirname(ch.path), mode=0o755, exist_ok=True)
        replace(ch.path, ch.new, mode=ch.mode)


def _prune(directory, root):
    """Remove *directory* and its parents while empty, stopping at *root*."""
    if root is None:
        return
    root = os.path.abspath(root)
    directory = os.path.abspath(directory)
    while directory != root and directory.startswith(root + os.sep):
        try:
            os.rmdir(directory)
        except OSError:
            return
        directory = os.path.dirname(directory)
