import sys

from crewfile.cli import crew
from crewfile.core.durations import parse_duration
from crewfile.core.errors import Refused, Unconfirmed
from crewfile.core.text import escape
from crewfile.crew.spawn import PROMPT_WAIT, spawn
from crewfile.session.delivery import UNCONFIRMED

HELP = """\
crew-spawn NAME
Start crew session NAME in a tree of its own (a git worktree on a new branch
crew/NAME), its agent in a tmux window there; prints `window:`, `tree:` and
`branch:` lines (docs/commands/crew-spawn.md).

  --agent AGENT          claude, codex or gemini (default: claude)
  --cmd COMMAND          the agent's shell command (default: $CREWFILE_AGENT_CMD, else AGENT)
  --from REF             the commit the branch starts at (default: HEAD)
  --tmux-session SESSION   the tmux session for the window (default: tmux's current one)
  --prompt TEXT          type TEXT as the first prompt once the agent is idle
  --wait DURATION        how long --prompt waits for the agent's idle prompt (default: 60s)
  --no-worktree          no worktree or branch: work in the current directory

Exit: 0; 1 refused (nothing left behind; a prompt not delivered: the worker
is spawned); 2 bad name or agent, no repository; 3 no such REF; 8 the prompt
typed and Entered but no turn recorded (do not send it again blindly).

Example: crew-spawn builder --from main --tmux-session crew --prompt "run the tests and fix what fails"
"""


def run(args):
    wait = parse_duration(args.wait, "--wait") if args.wait is not None else PROMPT_WAIT
    out = spawn(crew(args), args.name, agent=args.agent or "claude", ref=args["from"],
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
