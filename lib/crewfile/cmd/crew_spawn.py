import sys

from crewfile.cli import crew
from crewfile.core.durations import parse_duration
from crewfile.core.errors import Refused, Unconfirmed
from crewfile.core.text import escape
from crewfile.crew.spawn import PROMPT_WAIT, spawn
from crewfile.session.delivery import UNCONFIRMED

HELP = """\
crew-spawn NAME
Start crew session NAME in a tree of its own: a git worktree on a new branch
crew/NAME (from REF, default HEAD) beside the repository, at
<main tree>/../<main tree's name>.crew/NAME; a tmux window named NAME there
with the agent started in it (CREWFILE_DIR and CREWFILE_SESSION=NAME in its
environment); the session registered (kind crew, its tree, its pane). The
agent's first hook records its process and conversation. Prints `window:`,
`tree:` and `branch:` lines.

  --agent AGENT          claude, codex or gemini (default: claude)
  --cmd COMMAND          the agent's shell command (default: $CREWFILE_AGENT_CMD,
                         else the agent's name)
  --from REF             the commit the branch starts at (default: HEAD); refused
                         if REF is checked out somewhere with uncommitted changes
  --tmux-session SESSION   the tmux session for the window (created if missing;
                         default: tmux's current session)
  --prompt TEXT          type TEXT as the first prompt once the agent is idle
                         (through the one safe delivery path)
  --wait DURATION        how long --prompt waits for the agent's idle, empty
                         prompt line (default: 60s)
  --no-worktree          no worktree or branch: the session works in the current
                         directory (refused if another live session holds it)

Refused (exit 1): a name registered and not ended, an existing branch or
worktree path, a dirty REF, a tree another live session holds, a prompt that
could not be delivered (the worker is spawned; stderr says why). Exit 2: a
bad name or agent, not in a git repository, a repository with no commits;
3: no such REF. Nothing is left behind by a refusal. Exit 8: the worker is
spawned and its prompt typed and Entered, but its prompt hook recorded no
turn (it may yet take it: do not send it again blindly).

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
    return 0
