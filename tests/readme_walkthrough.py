#!/usr/bin/env python3
"""Turn a section of the README into a bash script that runs its commands
literally, top to bottom (tests/test_quickstart.py and tests/bats/readme.bats
run them, so the README and the tests cannot drift).

    python3 tests/readme_walkthrough.py README.md "## Quick start" > quickstart.sh

Every fenced block opened with ```sh between the heading and the next `## `
heading is shell, run in one bash process in the order written; other
fences (```text) are not run. A line continued with `\\` is one command. A
command must exit 0, or N when its comment says `(exit N)`. A command ending
in `&` runs in the background: it must still run at the end, where it is
killed.
"""
import re
import shlex
import sys

EXPECT = re.compile(r"\(exit (\d+)\)")
SHELL_FENCE = "```sh"


def blocks(text, heading):
    """(line number, [lines]) of each shell block of the section *heading*."""
    lines = text.splitlines()
    start = lines.index(heading)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    out, i = [], start + 1
    while i < end:
        fence = lines[i].strip()
        if fence.startswith("```"):
            close = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
            if fence == SHELL_FENCE:
                out.append((i + 2, lines[i + 1:close]))
            i = close
        i += 1
    return out


def commands(block_lines, first):
    """(line number, command text, expected exit or None for background)."""
    out, pending, at = [], "", first
    for n, line in enumerate(block_lines, first):
        if not pending:
            at = n
        stripped = line.strip()
        if not stripped or (stripped.startswith("#") and not pending):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        cmd = pending + line
        pending = ""
        m = EXPECT.search(cmd)
        code = int(m.group(1)) if m else 0
        out.append((at, cmd.strip(), None if _background(cmd) else code))
    return out


def _background(cmd):
    """True for `... &` (a trailing comment allowed)."""
    try:
        words = shlex.split(cmd, comments=True, posix=True)
    except ValueError:
        return False
    return bool(words) and words[-1] == "&"


def script(text, heading):
    # set -m: each background pipeline is a process group of its own, all of
    # which the EXIT trap kills (a stage left running would hold the output open)
    out = ["set -u -m", "exec </dev/null", "bg=()",
           'trap \'for g in $(jobs -p); do kill -- -"$g" 2>/dev/null; done\' EXIT']
    for first, body in blocks(text, heading):
        for at, cmd, code in commands(body, first):
            out.append(f"echo {shlex.quote(f'README.md:{at}: {cmd}')} >&2")
            if code is None:
                out.append(cmd)
                out.append(f"bg+=($!:{at})")
                continue
            out.append(cmd)
            out.append(f"rc=$?; if [ $rc != {code} ]; then echo {shlex.quote(f'README.md:{at}: ')}"
                       f'"exit $rc, expected {code}" >&2; exit 1; fi')
    # A background pipeline must still run at the end (one that failed at
    # its start has exited by then: its last stage read end of file).
    out.append('for b in "${bg[@]}"; do kill -0 "${b%:*}" 2>/dev/null || '
               '{ echo "README.md:${b#*:}: the background command has exited" >&2; exit 1; }; done')
    out.append(f"echo {shlex.quote(f'{heading} ran to its end')} >&2")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as f:
        sys.stdout.write(script(f.read(), sys.argv[2]))
