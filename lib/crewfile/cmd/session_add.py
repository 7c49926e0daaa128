import os

from crewfile.cli import crew
from crewfile.core.durations import parse_count
from crewfile.core.errors import BadInput
from crewfile.session.sessions import is_registered, record_agent, register

HELP = """\
session-add NAME
Register a session: write its metadata and a `registered` record.

  --kind KIND                crew, aside or primary (default: crew)
  --exempt                   exempt from wake supervision (asides always are)
  --tmux TARGET              its tmux pane or window (stored as the pane id)
  --pid PID                  its agent's process (stored with its start time)
  --cwd DIR                  its working tree (an existing directory)
  --session-key KEY          the orchestrator's handle for its conversation
  --agent-session-id ID      the agent's own session id (e.g. Claude Code's)
  --user USER                whose session it is (default: $USER, else
                             the password database's name for your uid)

A name already registered and not ended is refused (exit 1), except for
`session-add NAME --pid PID` alone: it records the agent of a registration
that has none (its liveness was unknown until then).

Example: session-add w1 --tmux crew:1 --cwd ~/src/app
"""


def run(args):
    alone = not any((args.kind, args.exempt, args.tmux, args.cwd, args.session_key,
                     args.agent_session_id, args.user))
    if args.pid and alone and is_registered(crew(args), args.name):
        record_agent(crew(args), args.name, _pid(args.pid))
        return
    if args.cwd is not None and not os.path.isdir(args.cwd):
        # A mistyped tree would make the nudge rule's "another session in the
        # same tree" compare against a path no agent works in.
        raise BadInput(f"bad --cwd {args.cwd!r}: no such directory")
    register(crew(args), args.name, kind=args.kind or "crew", exempt=args.exempt,
             tmux=args.tmux, pid=args.pid and _pid(args.pid), cwd=args.cwd,
             session_key=args.session_key, agent_session_id=args.agent_session_id,
             user=args.user)



def _pid(text):
    return parse_count(text, "--pid", 1, 1 << 22)      # the kernel's PID_MAX_LIMIT
