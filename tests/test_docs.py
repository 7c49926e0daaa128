"""Every command is documented: a page under docs/commands/ with the fixed
headings, which is its command line (cli.py parses each option line and each
synopsis word, and a page it cannot read fails loudly) and its --help (plain
text in 80 columns, ending with an example and the page's path); and every
relative link of the contract (protocol.md and docs/) resolves."""
import glob
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import BIN, REPO, cmd
from crewfile import cli
from crewfile.core.errors import BadInput

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


HEADINGS = ["Synopsis", "Options", "Output", "Exit codes", "Notes"]
PAGES = sorted(glob.glob(os.path.join(REPO, "docs", "**", "*.md"), recursive=True))
CONTRACT = [os.path.join(REPO, "protocol.md")] + PAGES


def page(name):
    path = os.path.join(REPO, "docs", "commands", f"{name}.md")
    assert os.path.isfile(path), f"docs/commands/{name}.md is missing"
    return open(path, encoding="utf-8").read()


def section(text, heading):
    """The body of `## heading` in *text*, up to the next `## `."""
    return text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def test_a_page_for_each_command_and_a_command_for_each_page():
    pages = sorted(n[:-3] for n in os.listdir(os.path.join(REPO, "docs", "commands")))
    assert pages == COMMANDS
    assert os.path.samefile(cli.PAGES, os.path.join(REPO, "docs", "commands"))


@pytest.mark.parametrize("name", COMMANDS)
def test_command_page_has_the_fixed_headings_in_order(name):
    text = page(name)
    lines = text.split("\n")
    assert lines[0] == f"# {name}" and lines[1] == "" and lines[2].strip(), \
        f"{name}: the page starts with `# {name}`, then one line of purpose"
    headings = re.findall(r"^## (.*)$", text, re.M)
    assert headings == HEADINGS + ["Examples"], (name, headings)
    assert "    " + name in section(text, "Synopsis"), f"{name}: the synopsis names the command"


# One page per kind of file, each with the same headings (protocol.md,
# "The crew directory, file by file").
FILE_HEADINGS = ["Format", "Written by", "Read by", "Lock", "Atomicity", "When absent",
                 "Cleanup", "Invariants"]
FILE_PAGES = sorted(glob.glob(os.path.join(REPO, "docs", "files", "*.md")))


@pytest.mark.parametrize("path", FILE_PAGES, ids=os.path.basename)
def test_file_page_has_the_fixed_headings_in_order(path):
    text = open(path, encoding="utf-8").read()
    lines = text.split("\n")
    assert lines[0].startswith("# ") and lines[1] == "" and lines[2].strip(), \
        f"{path}: the page starts with its title, then what the file is"
    assert re.findall(r"^## (.*)$", text, re.M) == FILE_HEADINGS, path
    for heading in FILE_HEADINGS:
        assert section(text, heading).strip(), f"{path}: `## {heading}` is empty"


def test_the_file_pages_are_found():
    assert len(FILE_PAGES) >= 16


def page_options(text):
    """The options a page's Options section lists: the flags its bullets open
    with, read without cli.py."""
    found = set()
    for line in section(text, "Options").splitlines():
        if line.startswith("- `"):
            found |= set(re.findall(r"(--[a-z][a-z0-9-]*)", line.split("`:", 1)[0]))
    return found


@pytest.mark.parametrize("name", COMMANDS)
def test_the_parser_takes_the_options_the_page_lists(name):
    """Every option line parses (cli.spec raises on one it cannot read, and
    on a synopsis word that is no option, METAVAR, NAME or `-`), and the
    parser knows exactly the options the page's bullets name."""
    known, short, positional = cli.spec(page(name))
    documented = page_options(page(name))
    assert documented == set(known), (f"{name}: only parsed: {sorted(set(known) - documented)};"
                                      f" only on the page: {sorted(documented - set(known))}")
    assert {"--dir", "--help"} <= set(known) and short == {"-h": "--help"}
    assert all(re.fullmatch(r"\[?[A-Z][A-Z_-]*(\.\.\.)?\]?", w) for w in positional), positional


# The positionals each command's run() reads, as the synopsis gives them (a
# slot every form fills is required; a `-` fills one as a value); the others
# take none.
POSITIONALS = {
    "aside-conclude": ["NAME"], "aside-done": ["NAME"], "aside-open": ["NAME"],
    "aside-reconcile": ["NAME", "[DURATION]"], "aside-say": ["NAME", "TEXT..."],
    "crew-hook": ["[PAYLOAD]"], "crew-respawn": ["[NAME...]"], "crew-retire": ["NAME"],
    "crew-spawn": ["NAME"], "crew-timeline": ["[SESSION...]"], "crew-up": ["[PRIMARY]"],
    "inbox-drain": ["NAME"], "job-exec": ["COMMAND..."], "job-wait": ["HANDLE"],
    "nudge-rm": ["ID..."], "session-add": ["NAME"], "session-rm": ["NAME"],
    "status-append": ["NAME", "KIND", "[TEXT...]"], "status-show": ["NAME"],
    "wake-send": ["PRIMARY"],
}


@pytest.mark.parametrize("name", COMMANDS)
def test_the_synopsis_gives_the_positionals(name):
    assert cli.spec(page(name))[2] == POSITIONALS.get(name, []), name


@pytest.mark.parametrize("name", COMMANDS)
def test_synopsis_shows_every_option(name):
    """The synopsis shows the same options (the common ones aside) as Options."""
    known, _, _ = cli.spec(page(name))
    shown = set(re.findall(r"(--[a-z][a-z0-9-]*)", section(page(name), "Synopsis")))
    assert shown == set(known) - {"--dir", "--help"}, (name, sorted(shown ^ (set(known) - {"--dir", "--help"})))


GOOD = page("job-wait")


@pytest.mark.parametrize("wrong,said", [
    ("- `--tail N`:", "- `--tail n`:"),                          # a metavar in lower case
    ("- `--tail N`:", "- `--tail N M`:"),
    ("- `--tail N`:", "- `--Tail N`:"),
    ("- `--tail N`:", "- `tail N`:"),
    ("- `--tail N`:", "- `--tail N`, --all:"),                     # a flag outside its span
    ("- `--tail N`:", "- ``:"),
    ("- `--tail N`:", "- `--tail N` how many"),                   # no `:` after the spans
    ("[--tail N | --all]", "[--tail N | --every]"),              # a synopsis option not listed
    ("HANDLE [--timeout", "handle [--timeout"),                  # a word no NAME
    ("HANDLE [--timeout DURATION] [--tail N | --all]", "HANDLE [--tail]"),     # its METAVAR missing
    ("    job-wait HANDLE", "    job-wiat HANDLE"),             # not the page's command
    ("    job-wait HANDLE", "    job-wait -"),                 # a place with no NAME at all
    ("\n## Options\n", "\n## Option\n"),
])
def test_a_wrong_page_line_fails_loudly(wrong, said):
    cli.spec(GOOD)
    assert wrong in GOOD
    with pytest.raises(BadInput):
        cli.spec(GOOD.replace(wrong, said, 1))


def broken_copy(tmp_path, name, text):
    """bin/NAME and lib/ copied, with NAME's page replaced by *text* (None: no page)."""
    shutil.copytree(os.path.join(REPO, "lib"), tmp_path / "lib",
                    ignore=shutil.ignore_patterns("__pycache__"))
    os.makedirs(tmp_path / "bin")
    shutil.copy(os.path.join(BIN, name), tmp_path / "bin")
    pages = tmp_path / "lib" / "crewfile" / "pages"
    assert pages.is_dir() and not pages.is_symlink()      # copied as an install has it
    os.remove(pages / f"{name}.md")
    if text is not None:
        (pages / f"{name}.md").write_text(text)
    return [sys.executable, str(tmp_path / "bin" / name)], str(pages / f"{name}.md")


@pytest.mark.parametrize("argv", [["--json"], ["--help"]])
def test_a_command_whose_page_is_wrong_says_so_in_one_line(tmp_path, argv):
    command, where = broken_copy(tmp_path, "job-ls", page("job-ls").replace("- `--json`:", "- `--json x`:"))
    env = dict(os.environ, CREWFILE_DIR=str(tmp_path / "crew"))
    p = subprocess.run(command + argv, env=env, capture_output=True, text=True)
    assert (p.returncode, p.stdout) == (2, ""), p.stderr
    assert p.stderr == f"job-ls: {where}: option line not understood: - `--json x`:" \
                       f" a JSON array, one object per job (every field job-ls knows) (default: off)\n"


def test_a_command_whose_page_is_missing_says_so_in_one_line(tmp_path):
    command, where = broken_copy(tmp_path, "job-ls", None)
    p = subprocess.run(command, env=dict(os.environ, CREWFILE_DIR=str(tmp_path / "crew")),
                       capture_output=True, text=True)
    assert (p.returncode, p.stdout, p.stderr) == (111, "", f"job-ls: {where}: No such file or directory\n")


@pytest.mark.parametrize("name", COMMANDS)
def test_page_options_say_their_default(name):
    body = section(page(name), "Options")
    bullets = re.split(r"^- ", body, flags=re.M)[1:]
    for b in bullets:
        if "common options" not in b:
            assert re.search(r"default|required", b), f"{name}: no default said: {b.splitlines()[0]}"


def exit_table():
    """The index's exit table: {code: meaning}."""
    text = open(os.path.join(REPO, "protocol.md"), encoding="utf-8").read()
    return {int(c): m for c, m in re.findall(r"^\| (\d+) \| (.*) \|$", section(text, "Exit codes"), re.M)}


def page_codes(text):
    """The exit codes a page gives: its `- `N`` lines and its line of the codes every command has."""
    body = section(text, "Exit codes")
    return {int(c) for c in re.findall(r"^- `(\d+)`", body, re.M)} | \
           {int(c) for line in body.splitlines() if line.startswith("And, as for every command")
            for c in re.findall(r"`(\d+)`", line)}


# Codes only one command gives, as the exit table says.
ONLY = {7: "aside-reconcile", 8: "crew-spawn", 122: "job-wait", 124: "job-wait",
        125: "job-wait", 126: "job-wait", 127: "job-wait"}
# What every command can give: the crew directory not trusted (1), usage (2),
# a system call (111), SIGINT (130), a reader gone (141); job-wait says all
# of its own failures with 125, and crew-hook as a hook always exits 0.
EVERY = {1, 2, 111, 130, 141}
OWN = {"job-wait": {125, 130, 141}, "crew-hook": {2, 111, 130, 141}}


@pytest.mark.parametrize("name", COMMANDS)
def test_page_exit_codes_are_the_commands_codes(name):
    codes = page_codes(page(name))
    table = exit_table()
    assert 0 in codes or name == "job-wait", f"{name}: success is a code too"
    assert codes <= set(table), f"{name}: codes not in the exit table: {sorted(codes - set(table))}"
    assert OWN.get(name, EVERY) <= codes, f"{name}: lacks {sorted(OWN.get(name, EVERY) - codes)}"
    for code, only in ONLY.items():
        assert (code in codes) == (name == only) or (name == "job-wait" and code in (126, 127)), \
            f"{name}: exit {code} is {only}'s alone (the exit table)"
    for code, only in ONLY.items():
        assert only in table[code], f"the exit table does not say exit {code} is {only}'s"


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path):
    text = open(path, encoding="utf-8").read()
    return {slug(h) for h in re.findall(r"^#+ (.*)$", text, re.M)}


def links(path):
    """The relative links of a Markdown file, outside code blocks and code spans."""
    text = open(path, encoding="utf-8").read()
    text = re.sub(r"^(?:    |\t).*$", "", text, flags=re.M)
    text = re.sub(r"`[^`\n]*`", "``", text)
    return [t for t in re.findall(r"\]\(([^)\s]+)\)", text)
            if not re.match(r"[a-z]+:", t)]


@pytest.mark.parametrize("path", CONTRACT, ids=lambda p: os.path.relpath(p, REPO))
def test_every_relative_link_resolves(path):
    bad = []
    for target in links(path):
        where, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(path), where)) if where else path
        if not os.path.exists(dest):
            bad.append(f"{target}: no such file")
        elif anchor and (not dest.endswith(".md") or anchor not in anchors(dest)):
            bad.append(f"{target}: no such heading")
    assert not bad, bad


def test_every_page_is_linked_from_the_index():
    """protocol.md is the entry point: every page of docs/ is reachable from it."""
    seen, todo = set(), [os.path.join(REPO, "protocol.md")]
    while todo:
        path = todo.pop()
        if path in seen or not path.endswith(".md") or not os.path.isfile(path):
            continue
        seen.add(path)
        for target in links(path):
            where = target.partition("#")[0]
            if where:
                todo.append(os.path.normpath(os.path.join(os.path.dirname(path), where)))
    assert not set(PAGES) - seen, sorted(os.path.relpath(p, REPO) for p in set(PAGES) - seen)


def test_slug_is_githubs():
    assert slug("What crewfile guards, and what it cannot") == "what-crewfile-guards-and-what-it-cannot"
    assert slug("Nudge records in `sessions/NAME/status`") == "nudge-records-in-sessionsnamestatus"


def test_the_link_checker_finds_a_broken_link(tmp_path):
    bad = tmp_path / "x.md"
    bad.write_text("# T\n\nsee [a](nowhere.md) and [b](#t) and [c](#nope)\n    [code](skipped.md)\n")
    assert links(str(bad)) == ["nowhere.md", "#t", "#nope"]
    assert anchors(str(bad)) == {"t"}


# An example too long for 80 columns that cannot be broken: tmux's format
# for crew-status --panes is one quoted word of 84 characters.
UNBREAKABLE = {"crew-status": "tmux set -g status-right '#(crew-status --tmux --panes"}


@pytest.mark.parametrize("name", COMMANDS)
def test_help_is_the_page_in_plain_text(name):
    r = cmd(name, "--help")
    assert r.returncode == 0 and r.stderr == ""
    lines = r.stdout.splitlines()
    text = page(name)
    assert lines[0] == section(text, "Synopsis").strip("\n").split("\n")[0][4:]
    assert "Options:" in lines and "Exit codes:" in lines and "Examples:" in lines
    examples = [line[4:] for line in section(text, "Examples").splitlines() if line.startswith("    ")]
    assert examples and all("  " + e in lines for e in examples), name
    assert lines[-1] == f"The whole page: {os.path.realpath(os.path.join(REPO, 'docs', 'commands', name + '.md'))}"
    assert "](" not in r.stdout and "**" not in r.stdout, "markdown left in --help"
    wide = [line for line in lines if len(line) > 80 and not line.strip().startswith(UNBREAKABLE.get(name, "\0"))]
    assert not wide, wide
    for flag in page_options(text):
        assert re.search(rf"^  (-h, )?{flag}\b", r.stdout, re.M) or f", {flag}" in r.stdout, flag


def test_usage_error_is_one_line_plus_a_hint():
    r = cmd("status-show", "--nope")
    assert r.returncode == 2
    assert r.stderr == "status-show: unknown option --nope\nTry 'status-show --help'.\n"


def test_each_misuse_of_the_command_line_is_a_usage_error():
    """A value given to a flag that takes none and a word too many are each
    refused as usage (exit 2), never guessed at (a flag missing its value:
    test_install)."""
    for words, said in ((("--json=yes", "x"), "--json takes no value"),
                        (("x", "y"), "unexpected argument 'y'")):
        r = cmd("status-show", *words)
        assert (r.returncode, r.stderr) == (2, f"status-show: {said}\nTry 'status-show --help'.\n")


def test_nothing_refers_to_files_outside_the_repository():
    """Issue 14: a clone is the whole product. No tracked file names the
    developers' reference directory beside the repository (a user has none)."""
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
