"""Every command is documented: a protocol.md section, a --help with an
example, and every option its help lists is one the parser knows."""
import os
import re

import pytest

from conftest import BIN, REPO, cmd
from crewfile import cli

COMMANDS = sorted(os.listdir(BIN))
STUB = open(os.path.join(BIN, "status-append")).read()
# Started without site (python3 -S), run by tmux every few seconds: their
# stub finds crewfile beside it, installed or not (test_install.py).
NO_SITE = {"crew-status"}


def test_there_are_commands():
    assert "status-append" in COMMANDS and "session-add" in COMMANDS


@pytest.mark.parametrize("name", COMMANDS)
def test_bin_entry_is_the_stub_and_executable(name):
    path = os.path.join(BIN, name)
    assert os.access(path, os.X_OK)
    text = open(path).read()
    if name in NO_SITE:
        assert text.startswith("#!/usr/bin/env -S python3 -S\n")
        assert text.endswith(STUB.split("\n", 3)[3])      # the same import and call
    else:
        assert text == STUB


@pytest.mark.parametrize("name", COMMANDS)
def test_protocol_has_a_section(name):
    """protocol.md's section, or the command's own page docs/commands/NAME.md."""
    page = os.path.join(REPO, "docs", "commands", f"{name}.md")
    if os.path.exists(page):
        assert open(page).read().startswith(f"# {name}\n"), f"{page} lacks # {name}"
        return
    protocol = open(os.path.join(REPO, "protocol.md")).read()
    assert re.search(rf"^### {re.escape(name)}\n", protocol, re.M), f"protocol.md lacks ### {name}"


@pytest.mark.parametrize("name", COMMANDS)
def test_help_has_example_and_every_listed_option_parses(name):
    r = cmd(name, "--help")
    assert r.returncode == 0 and r.stderr == ""
    assert "Example:" in r.stdout
    mod = __import__(f"crewfile.cmd.{name.replace('-', '_')}", fromlist=["HELP"])
    listed = re.findall(r"^ {2,}(?:-\w, )?(--[a-z][a-z0-9-]*)", mod.HELP, re.M)
    known, _, _ = cli._spec(mod.HELP)
    for flag in listed:
        assert flag in known, f"{name}: help lists {flag} but the parser does not know it"


def test_usage_error_is_one_line_plus_a_hint():
    r = cmd("status-show", "--nope")
    assert r.returncode == 2
    assert r.stderr == "status-show: unknown option --nope\nTry 'status-show --help'.\n"


def test_nothing_refers_to_files_outside_the_repository():
    """Issue 14: a clone is the whole product. No tracked file names the
    developers' reference directory beside the repository (a user has none)."""
    import subprocess
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    files = subprocess.run(["git", "-C", root, "ls-files", "-z"], stdout=subprocess.PIPE,
                           check=True).stdout.decode().split("\0")
    outside = ("../" + "shared", "/work/" + "shared")
    found = []
    for name in filter(None, files):
        try:
            with open(os.path.join(root, name), "rb") as f:
                text = f.read().decode("utf-8", "replace")
        except (IsADirectoryError, FileNotFoundError):
            continue
        found += [f"{name}: {o}" for o in outside if o in text]
    assert not found, found
