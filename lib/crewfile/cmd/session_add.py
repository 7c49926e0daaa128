HELP = """\
session-add NAME
Register a session: write its metadata and a `registered` record.

  --kind KIND                crew, aside or primary (default: crew)
  --exempt                   exempt from wake supervision (asides always are)
  --tmux TARGET              its tmux pane or window (stored as the pane id)
  --pid PID                  its agent's process (stored with its start time)
  --cwd DIR                  its working tree
  --session-key KEY          the orchestrator's handle for its conversation
  --agent-session-id ID      the agent's own session id (e.g. Claude Code's)
  --user USER                whose session it is (default: $USER, else
                             the password database's name for your uid)

A name already registered and not ended is refused (exit 1).

Example: session-add w1 --tmux crew:1 --cwd ~/src/app
"""


def run(args):
    from ..cli import crew
    from ..sessions import register
    register(crew(args), args.name, kind=args.kind or "crew", exempt=args.exempt,
             tmux=args.tmux, pid=args.pid and _pid(args.pid), cwd=args.cwd,
             session_key=args.session_key, agent_session_id=args.agent_session_id,
             user=args.user)



def _pid(text):
    from ..durations import parse_count
    return parse_count(text, "--pid", 1, 1 << 22)      # the kernel's PID_MAX_LIMIT
