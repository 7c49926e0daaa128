"""Where the real agent CLIs the end-to-end tests run are installed, and which
release of each runs.

`make test` installs each CLI at an exact release into .cache/NAME-VERSION
(claude-code, codex, gemini) and names the release to run in
CREWFILE_CLAUDE_VERSION, CREWFILE_CODEX_VERSION and CREWFILE_GEMINI_VERSION:
the newest, or with AGENTS=oldest the oldest the README supports. Run by hand
(pytest alone) the newest release installed runs, so a test never runs an old
CLI by accident. A checkout from before versioned directories has .cache/NAME
only; that is used when no versioned one exists. CREWFILE_CLAUDE names a claude
binary outright. Standard library only.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Optional, Union

REPO = Path(__file__).resolve().parent.parent
_VERSION = re.compile(r"\d+(?:\.\d+)+")


def install_dir(name: str, root: Union[str, Path, None] = None) -> Optional[Path]:
    """The .cache directory holding NAME at the release to run, or None.

    Only NAME-VERSION with a dotted version counts: tests keep other
    directories there too (.cache/codex-e2e)."""
    cache = Path(root or REPO) / ".cache"
    wanted = os.environ.get(f"CREWFILE_{name.split('-')[0].upper()}_VERSION")
    if wanted:
        path = cache / f"{name}-{wanted}"
        return path if path.is_dir() else None
    releases = [p for p in cache.glob(f"{name}-*")
                if _VERSION.fullmatch(p.name[len(name) + 1:]) and p.is_dir()]
    if releases:
        return max(releases, key=lambda p: tuple(int(n) for n in p.name[len(name) + 1:].split(".")))
    legacy = cache / name
    return legacy if legacy.is_dir() else None


def _first_executable(candidates) -> Optional[str]:
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    return None


def claude(root: Union[str, Path, None] = None) -> Optional[str]:
    """The native claude binary (its platform package carries it), or None."""
    env = os.environ.get("CREWFILE_CLAUDE")
    if env and os.access(env, os.X_OK):
        return env
    where = install_dir("claude-code", root)
    if where is None:
        return None
    base = where / "node_modules" / "@anthropic-ai"
    return _first_executable([base / "claude-code-linux-x64" / "claude",
                              *sorted(base.glob("claude-code-*/claude")),
                              base / "claude-code" / "bin" / "claude.exe"])


def codex(root: Union[str, Path, None] = None) -> Optional[str]:
    """The native codex binary of @openai/codex's platform package, or None."""
    where = install_dir("codex", root)
    if where is None:
        return None
    return _first_executable(sorted(where.glob(
        "node_modules/@openai/codex-linux-*/vendor/*/bin/codex")))


def gemini(root: Union[str, Path, None] = None) -> Optional[str]:
    """The gemini launcher npm links (a Node script), or None."""
    where = install_dir("gemini", root)
    if where is None:
        return None
    return _first_executable([where / "node_modules" / ".bin" / "gemini"])
