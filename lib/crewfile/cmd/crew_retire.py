import os
import sys

from crewfile.cli import crew
from crewfile.core.text import escape
from crewfile.crew.retire import retire

HELP = """\
crew-retire NAME
The captain's act when crew session NAME is done: appends `ended: retired`,
saves its window's whole scrollback (sessions/NAME/scrollback.TS) and a copy
of its agent's own transcript, if its hook recorded one
(sessions/NAME/transcript.TS), closes the window, removes its worktree and
keeps its branch. Refused while the agent
is generating (or its state is unknown, or a dialog is up) and while the
worktree has uncommitted changes. Disarms the session's nudge schedules.
Prints `scrollback:`, `worktree:` and `branch:` lines (and `transcript:`
when one was kept), and `nudges:` naming
the schedules it disarmed, if any. Safe to rerun: on an ended session it
finishes what is left.

  --keep-worktree   leave the worktree in place (uncommitted changes then
                    refuse nothing: they stay where they are)
  --force           retire anyway, cutting off a turn and throwing away
                    uncommitted changes; stderr says what was thrown away

Exit: 0; 1 refused (busy, uncommitted changes, a delivery in progress);
2 bad name, not a crew session; 3 no such session; 111.

Example: crew-retire builder && git log --oneline main..crew/builder
"""


def run(args):
    out = retire(crew(args), args.name, keep_worktree=args.keep_worktree, force=args.force)
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
    return 0
