import os
import sys

from crewfile.core.paths import Crew
from crewfile.core.text import escape
from crewfile.crew.retire import retire


def run(args):
    out = retire(Crew(args.dir), args.name, keep_worktree=args.keep_worktree, force=args.force)
    for warning in out.warnings:
        sys.stderr.write(f"crew-retire: {args.name}: {escape(warning)}\n")
    if out.thrown:
        sys.stderr.write(f"crew-retire: --force: threw away {escape('; '.join(out.thrown))}\n")
    tree = (f"removed {out.worktree}" if out.removed else
            f"kept {out.worktree}" if out.worktree and os.path.lexists(out.worktree) else "-")
    branch = f"{out.branch} {out.head}" if out.branch and out.head else out.branch or "-"
    sys.stdout.write(f"scrollback: {escape(out.scrollback or '-')}\n")
    if out.transcript:
        sys.stdout.write(f"transcript: {escape(out.transcript)}\n")
    sys.stdout.write(f"worktree: {escape(tree)}\nbranch: {escape(branch)}\n")
    if out.disarmed:
        sys.stdout.write(f"nudges: disarmed {escape(' '.join(out.disarmed))}\n")
