"""crew-hook --install --agent codex and Codex's feature flag: the version of
the `codex` on PATH decides (a stand-in `codex` printing an old version,
and the real one from .cache/codex); the one-line edit of config.toml is
checked by parsing before and after, over odd and hostile files; --uninstall
takes out only the lines it added."""
import os
import random
import tomllib

import pytest

import agent_clis
from conftest import cmd
from crewfile.agents import codexconf
from crewfile.agents.codexconf import LINE, MARK, with_flag, without_flag

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REAL = [b for b in [agent_clis.codex(ROOT)] if b]

# Files the flag can be added to: (name, text).
ADDABLE = [
    ("none", ""),
    ("blank lines", "\n\n"),
    ("top keys", 'model = "o3"\nmodel_provider = "fake"\n'),
    ("no final newline", 'model = "o3"'),
    ("ends in a comment", 'model = "o3"\n# the end'),
    ("crlf", 'model = "o3"\r\n[profiles.x]\r\nmodel = "y"\r\n'),
    ("features table", '[features]\nweb_search = true\n\n[tui]\nx = 1\n'),
    ("spaced header with comment", 'a = 1\n[ features ]   # mine\nundo = false\n'),
    ("features last, no newline", 'a = 1\n[features]\nundo = false'),
    ("dotted features", 'features.undo = true\n[tui]\nx = 1\n'),
    ("features subtable only", '[features.sub]\nx = 1\n'),
    ("header in a multi-line string", 'notes = """\n[features]\n"""\n[tui]\nx = 1\n'),
    ("array of tables", '[[mcp]]\nname = "a"\n[[mcp]]\nname = "b"\n'),
    ("unicode and tabs", 'name = "\u00e9t\u00e9 \U0001f680"\n\t[features]\n\tundo = true\n'),
    ("array spanning lines", 'list = [\n  [1, 2],\n  [3],\n]\n'),
    ("hooks state", '[hooks.state."/h/hooks.json:stop:0:0"]\ntrusted_hash = "sha256:ab"\n'),
]
# Files it is not added to, and why.
REFUSED = [
    ("not TOML", 'model = "o3\n', "not valid TOML"),
    ("inline features", 'features = { undo = true }\n', "no edit of it could be checked"),
    ("features not a table", 'features = 3\n', "`features` is not a table"),
    ("the user's false", '[features]\ncodex_hooks = false\n', "codex_hooks = False: yours"),
    ("a bom", '\ufeffmodel = "o3"\n', "not valid TOML"),
]


@pytest.mark.parametrize("name,text", ADDABLE, ids=[n for n, _ in ADDABLE])
def test_the_flag_is_added_as_one_checked_edit_and_taken_out_again(name, text):
    new, why = with_flag(text)
    assert why is None
    before, after = tomllib.loads(text), tomllib.loads(new)
    assert after == dict(before, features=dict(before.get("features", {}), codex_hooks=True))
    assert with_flag(new) == (new, None)                        # idempotent
    assert sum(MARK in line for line in new.splitlines()) in (1, 2)
    back = without_flag(new)
    assert tomllib.loads(back) == before and MARK not in back
    if text.endswith("\n") and not text.endswith("\n\n") or not text:
        assert back == text                                     # to the byte
    if "\r\n" in text:
        assert "\n" not in new.replace("\r\n", "")              # its line ends kept


@pytest.mark.parametrize("name,text,why", REFUSED, ids=[n for n, _, _ in REFUSED])
def test_files_it_cannot_edit_safely_are_left_as_they_are(name, text, why):
    new, said = with_flag(text)
    assert new == text and why in said
    assert without_flag(text) == text


def test_a_flag_the_user_set_is_theirs():
    text = "[features]\ncodex_hooks = true\n"
    assert with_flag(text) == (text, None)
    assert without_flag(text) == text
    edited = f"[features]\ncodex_hooks = false  {MARK}\n"    # ours, changed by the user
    assert without_flag(edited) == edited


def test_uninstall_keeps_keys_the_user_added_under_our_header():
    new, _ = with_flag("a = 1\n")
    mixed = new + "undo = true\n"
    back = without_flag(mixed)
    assert tomllib.loads(back) == {"a": 1, "features": {"undo": True}}
    assert LINE not in back


def test_random_files_never_lose_a_key():
    """300 files built from pieces (tables, dotted keys, strings holding
    headers, comments, CRLF, no final newline): every edit kept parses as
    the file plus the flag; every other one is refused, the file unchanged."""
    pieces = ['a = 1', '[features]', '[ features ] # c', 'features.x = 1', '[tui]', 'b = "[features]"',
              's = """\n[features]\n"""', '# [features]', '[features.sub]', 'y = [\n [1],\n]',
              '[[arr]]', 'z = { q = 1 }', '', 'codex_hooks = true', 'k = "\u00e9"']
    rng = random.Random(18)
    for _ in range(300):
        nl = rng.choice(["\n", "\r\n"])
        text = nl.join(rng.choice(pieces) for _ in range(rng.randint(0, 6)))
        if rng.random() < 0.5:
            text += nl
        try:
            before = tomllib.loads(text)
        except tomllib.TOMLDecodeError:
            assert with_flag(text)[0] == text
            continue
        new, why = with_flag(text)
        if why is not None or new == text:
            assert new == text
            continue
        assert tomllib.loads(new) == dict(before, features=dict(before.get("features", {}),
                                                                 codex_hooks=True)), text
        back = tomllib.loads(without_flag(new))
        assert codexconf._same(back, before) and "codex_hooks" not in back.get("features", {}), text


def _codex_at(tmp_path, version):
    """A directory holding a stand-in `codex` that prints *version* as Codex does."""
    d = tmp_path / "bin"
    d.mkdir(exist_ok=True)
    (d / "codex").write_text(f'#!/bin/sh\necho "codex-cli {version}"\n')
    (d / "codex").chmod(0o755)
    return str(d)


def _install(d, path, action="--install", *more):
    return cmd("crew-hook", action, str(d), *more, "--agent", "codex", "--command",
               "crew-hook", env={"PATH": f"{path}:/usr/bin:/bin"})


def test_an_old_codex_gets_the_flag_once_and_uninstall_takes_it_out(tmp_path):
    d = tmp_path / ".codex"
    d.mkdir()
    user = 'model = "o3"  # mine\n\n[features]\nweb_search = true\n'
    (d / "config.toml").write_text(user)
    (d / "config.toml").chmod(0o640)
    path = _codex_at(tmp_path, "0.120.0")
    p = _install(d, path, "--install", "--dry-run")
    assert p.returncode == 0 and f"+{LINE}" in p.stdout
    assert (d / "config.toml").read_text() == user
    p = _install(d, path)
    assert p.returncode == 0, p.stderr
    assert f"updated {d}/config.toml\n" in p.stdout
    assert p.stdout.endswith("note: codex 0.120.0 runs hooks only with `[features] codex_hooks"
                             f" = true`: added to {d}/config.toml\n")
    text = (d / "config.toml").read_text()
    assert tomllib.loads(text) == {"model": "o3",
                                   "features": {"web_search": True, "codex_hooks": True}}
    assert (d / "config.toml").stat().st_mode & 0o777 == 0o640
    again = _install(d, path)
    assert "config.toml" not in again.stdout and "note:" not in again.stdout
    assert (d / "config.toml").read_text() == text
    p = _install(d, path, "--uninstall")
    assert p.returncode == 0 and f"updated {d}/config.toml\n" in p.stdout
    assert (d / "config.toml").read_text() == user


def test_a_config_created_for_the_flag_goes_with_it(tmp_path):
    d = tmp_path / ".codex"
    path = _codex_at(tmp_path, "0.114.0")
    assert _install(d, path).returncode == 0
    assert tomllib.loads((d / "config.toml").read_text()) == {"features": {"codex_hooks": True}}
    assert _install(d, path, "--uninstall").returncode == 0
    assert os.listdir(d) == []


@pytest.mark.parametrize("version,note", [
    ("0.113.9", "note: codex 0.113.9 ({path}/codex) has no hooks (0.114 added them): upgrade"
                " it, or use its notify (crew-hook --help)\n"),
    ("0.124.0", None),
    ("0.129.0", "note: codex 0.129.0 runs new or changed hooks only once you trust them: at"
                " its next start choose `Trust all and continue` (or review them in /hooks)\n"),
    ("garbled", "note: {path}/codex --version said no version: if it is before 0.124, add"
                " `[features] codex_hooks = true` to {d}/config.toml\n")])
def test_versions_that_need_no_flag_leave_config_toml_alone(tmp_path, version, note):
    d = tmp_path / ".codex"
    path = _codex_at(tmp_path, version)
    p = _install(d, path)
    assert p.returncode == 0, p.stderr
    assert not (d / "config.toml").exists()
    notes = [line + "\n" for line in p.stdout.splitlines() if line.startswith("note:")]
    assert notes == ([note.format(path=path, d=d)] if note else [])


def test_no_codex_on_path_is_one_line(tmp_path):
    d = tmp_path / ".codex"
    p = _install(d, str(tmp_path / "empty"))
    assert p.returncode == 0
    notes = [line for line in p.stdout.splitlines() if line.startswith("note:")]
    assert notes == [f"note: no codex on PATH: its version is unknown. Codex before 0.124 runs"
                     f" hooks only with `[features] codex_hooks = true` in {d}/config.toml,"
                     " and from 0.129 only once you trust them (Codex asks at start)"]
    assert not (d / "config.toml").exists()


@pytest.mark.skipif(not REAL, reason="Codex CLI not installed in .cache/codex-VERSION")
def test_the_real_codex_needs_no_flag_but_trust(tmp_path):
    d = tmp_path / ".codex"
    path = os.path.dirname(REAL[0])
    assert codexconf.version({"PATH": path})[1] >= (0, 129, 0)
    p = _install(d, path)
    assert p.returncode == 0, p.stderr
    assert not (d / "config.toml").exists()
    assert "runs new or changed hooks only once you trust them" in p.stdout
