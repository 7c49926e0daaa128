#!/usr/bin/env python3
"""Turn the README's walkthrough into a bash script that runs it literally,
top to bottom (tests/bats/readme.bats runs it, so the two cannot drift).

    python3 tests/readme_walkthrough.py README.md > walkthrough.sh

Every indented code block between `## Walkthrough` and the next `## `
heading is shell, run in one bash process in the order written, except a
block right after an HTML comment `<!-- walkthrough: not shell -->` or
`<!-- walkthrough: not shell: why -->` (text typed into an agent, a command
that runs in the foreground for ever). A line continued with `\\` is one
command. A command must exit 0, or N when its comment says `(exit N)`. A
command ending in `&` runs in the background: it must still run at the end,
where it is killed.

The script expects the sandbox readme.bats makes: HOME a temporary
directory, private tmux servers (TMUX_TMPDIR), and stand-ins on
PATH for what a test must never touch or cannot have: `claude` (the fake
agent), `crontab` and `systemctl` (files in HOME), `tail -f` (without -f).
"""
import re
import shlex
import sys

NOT_SHELL = "<!-- walkthrough: not shell"     # then `-->`, or `: why -->`
EXPECT = re.compile(r"\(exit (\d+)\)")


def blocks(text):
    """(line number, [lines]) of each runnable code block of the walkthrough."""
    lines = text.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith("## Walkthrough"))
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    out, i, skip = [], start + 1, False
    while i < end:
        line = lines[i]
        if line.strip().startswith(NOT_SHELL):
            skip = True
        elif line.startswith("    ") and not lines[i - 1].strip():
            first, body = i, []
            while i < end and (lines[i].startswith("    ") or not lines[i].strip()):
                body.append(lines[i][4:])
                i += 1
            while body and not body[-1].strip():
                body.pop()
            if not skip:
                out.append((first + 1, body))
            skip = False
            continue
        elif line.strip():
            skip = False            # the comment marks the block right after it only
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


def script(text):
    # set -m: each background pipeline is a process group of its own, all of
    # which the EXIT trap kills (a stage left running would hold the output open)
    out = ["set -u -m", "exec </dev/null", "bg=()",
           'trap \'for g in $(jobs -p); do kill -- -"$g" 2>/dev/null; done\' EXIT']
    for first, body in blocks(text):
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
    out.append("echo 'the walkthrough ran to its end' >&2")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as f:
        sys.stdout.write(script(f.read()))
