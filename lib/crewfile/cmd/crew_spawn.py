import sys

from crewfile.core.durations import parse_duration
from crewfile.core.errors import Refused, Unconfirmed
from crewfile.core.paths import Crew
from crewfile.core.text import escape
from crewfile.crew.spawn import PROMPT_WAIT, spawn
from crewfile.session.delivery import UNCONFIRMED


def run(args):
    wait = parse_duration(args.wait, "--wait", default=PROMPT_WAIT)
    out = spawn(Crew(args.dir), args.name, agent=args.agent or "claude", ref=args["from"],
                tmux_session=args.tmux_session, prompt=args.prompt,
                worktree=not args.no_worktree, cmd=args.cmd, prompt_wait=wait)
    sys.stdout.write(f"window: {escape(out.target)}\ntree: {escape(out.tree)}\n"
                     f"branch: {escape(out.branch or '-')}\n")
    if out.prompt is not None and not out.prompt[0]:
        sys.stdout.flush()
        if out.prompt[1].code == UNCONFIRMED:
            raise Unconfirmed(f"{args.name} is spawned; its first prompt was typed and"
                              f" Entered, but not confirmed: {out.prompt[1]}")
        raise Refused(f"{args.name} is spawned, but its first prompt was not delivered:"
                      f" {out.prompt[1]}")
