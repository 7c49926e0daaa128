"""Codex CLI's version, and the one line of its config.toml that crewfile may
write: `codex_hooks = true` under `[features]`, for the versions whose hooks
are behind that flag (0.114 to 0.123; which version does what, and the edit's
rules: docs/commands/crew-hook.md). No TOML writer: an edit is kept only if
tomllib reads the result as the file plus (or, uninstalling, minus) that one
key; each line added ends with MARK, so --uninstall removes only those.
"""
import os
import shutil
import subprocess
import tomllib

from crewfile.agents.install import Change
from crewfile.core.atomic import read_text
from crewfile.core.text import ascii_int

FLAG_FROM, DEFAULT_FROM, TRUST_FROM = (0, 114, 0), (0, 124, 0), (0, 129, 0)
FILE = "config.toml"
MARK = "# added by crew-hook --install"
HEADER = f"[features]  {MARK}"
LINE = f"codex_hooks = true  {MARK}"
DOTTED = f"features.codex_hooks = true  {MARK}"
VERSION_WAIT = 20.0      # seconds for `codex --version` (a node start on a loaded machine)


def version(env=None):
    """(path, (major, minor, patch)) of the codex PATH finds; (None, None)
    when there is none; (path, None) when its version cannot be read."""
    env = os.environ if env is None else env
    path = shutil.which("codex", path=env.get("PATH"))
    if path is None:
        return None, None
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True,
                             timeout=VERSION_WAIT, env=env).stdout
    except (OSError, subprocess.SubprocessError):
        return path, None
    return path, parse_version(out)


def parse_version(text):
    """(major, minor, patch) of `codex-cli 0.171.0`, or None."""
    for word in text.split():
        parts = word.split("-")[0].split(".")
        numbers = tuple(ascii_int(p) for p in parts)
        if len(numbers) == 3 and None not in numbers:
            return numbers
    return None


def _parse(text):
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        return e


def _candidates(text):
    """Texts with the flag added, most natural first: a new table at the
    end; after an existing `[features]` header line; as a dotted key before
    the first table. Only one that parses as wanted is kept (with_flag)."""
    nl = "\r\n" if "\r\n" in text else "\n"
    lines = text.splitlines(keepends=True)
    tail = text if not text or text.endswith("\n") else text + nl
    out = [tail + (nl if tail.strip() else "") + HEADER + nl + LINE + nl]
    for i, line in enumerate(lines):
        head = line.split("#", 1)[0].strip()
        if head.replace(" ", "").replace("\t", "") == "[features]":
            out.append("".join(lines[:i + 1]) + (nl if not line.endswith("\n") else "")
                       + LINE + nl + "".join(lines[i + 1:]))
    first = next((i for i, l in enumerate(lines) if l.lstrip().startswith("[")), len(lines))
    out.append("".join(lines[:first]) + ("" if not first or lines[first - 1].endswith("\n")
                                         else nl) + DOTTED + nl + "".join(lines[first:]))
    return out


def with_flag(text):
    """(new text, None) with `codex_hooks = true` added to *text* (a
    config.toml's content, or None for none), or (text unchanged, why not)."""
    text = text or ""
    before = _parse(text)
    if isinstance(before, Exception):
        return text, f"it is not valid TOML ({before})"
    features = before.get("features")
    if features is not None and not isinstance(features, dict):
        return text, "its `features` is not a table"
    if features and "codex_hooks" in features:
        value = features["codex_hooks"]
        return text, (None if value is True else f"it sets codex_hooks = {value!r}: yours,"
                      " left as it is (Codex runs no hook with it)")
    want = dict(before, features=dict(features or {}, codex_hooks=True))
    for new in _candidates(text):
        if _parse(new) == want:
            return new, None
    return text, "no edit of it could be checked (an inline features table?)"


def _same(a, b):
    """Parsed configs equal, a `features` table left empty counting as none."""
    if isinstance(a, Exception) or isinstance(b, Exception):
        return False
    return ({k: v for k, v in a.items() if not (k == "features" and v == {})}
            == {k: v for k, v in b.items() if not (k == "features" and v == {})})


def without_flag(text):
    """*text* without the lines MARK says crewfile added (its `[features]`
    header too where the file reads the same without it), if the result
    parses as *text* minus features.codex_hooks; else *text*."""
    if not text or MARK not in text:
        return text
    before = _parse(text)
    if isinstance(before, Exception) or not isinstance(before.get("features"), dict):
        return text
    want = dict(before, features={k: v for k, v in before["features"].items()
                                  if k != "codex_hooks"})
    keep = [l for l in text.splitlines(keepends=True) if l.rstrip("\r\n") not in (LINE, DOTTED)]
    bare = [l for l in keep if l.rstrip("\r\n") != HEADER]
    while bare and not bare[-1].strip() and keep[-1].rstrip("\r\n") == HEADER:
        bare.pop()           # the blank line written before a header at the end
    for lines in (bare, keep):
        new = "".join(lines)
        if _same(_parse(new), want):
            return new
    return text


def plan(directory, uninstall=False):
    """(changes, notes) for DIR/config.toml and what the user must know."""
    path = os.path.realpath(os.path.join(directory, FILE))
    old = read_text(path)
    mode = os.stat(path).st_mode & 0o777 if old is not None else 0o600
    if uninstall:
        new = without_flag(old)
        if new == "" and old is not None and old.strip() and MARK in old:
            new = None if not os.path.islink(os.path.join(directory, FILE)) else ""
        return ([Change(path, old, new, mode)] if new != old else []), []
    where, ver = version()
    shown = ".".join(map(str, ver)) if ver else None
    if where is None:
        return [], ["no codex on PATH: its version is unknown. Codex before 0.124 runs hooks"
                    f" only with `[features] codex_hooks = true` in {path}, and from 0.129"
                    " only once you trust them (Codex asks at start)"]
    if ver is None:
        return [], [f"{where} --version said no version: if it is before 0.124, add"
                    f" `[features] codex_hooks = true` to {path}"]
    changes, notes = [], []
    if ver < FLAG_FROM:
        notes.append(f"codex {shown} ({where}) has no hooks (0.114 added them): upgrade it,"
                     " or use its notify (crew-hook --help)")
    elif ver < DEFAULT_FROM:
        new, why = with_flag(old)
        if why:
            notes.append(f"codex {shown} runs hooks only with `[features] codex_hooks = true`"
                         f" in {path}, not added: {why}")
        elif new != (old or ""):
            changes.append(Change(path, old, new, mode))
            notes.append(f"codex {shown} runs hooks only with `[features] codex_hooks = true`:"
                         f" added to {path}")
    if ver >= TRUST_FROM:
        notes.append(f"codex {shown} runs new or changed hooks only once you trust them: at"
                     " its next start choose `Trust all and continue` (or review them in"
                     " /hooks)")
    return changes, notes
