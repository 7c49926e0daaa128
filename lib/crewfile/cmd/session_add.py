import os

from crewfile.agents import registry
from crewfile.cli import crew
from crewfile.core.durations import parse_count
from crewfile.core.errors import BadInput, UsageError
from crewfile.core.text import escape
from crewfile.session import fromregistry
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
  --from-registry            take the agent process, its start time, its
                             conversation id, cwd and pane from the agent
                             CLI's own registry (Claude Code's
                             sessions/PID.json): the agent in the --tmux
                             pane, the --pid process, else this command's
                             nearest ancestor with an entry; checked
                             against /proc and the pane first
  --adopt ID                 the same for a background session (claude --bg):
                             ID is its short id or its conversation id;
                             watched through its process, never typed into
  --registry DIR             the registry to read (default:
                             $CLAUDE_CONFIG_DIR/sessions, else
                             ~/.claude/sessions)

A name already registered and not ended is refused (exit 1), except for
`session-add NAME --pid PID` alone: it records the agent of a registration
that has none (its liveness was unknown until then).
With --from-registry or --adopt, a NAME registered and not ended is
repaired: moved to the registry's process when its own is gone (or is that
process), if the entry is in its pane or its conversation; `registered`
is appended.

Example: session-add w1 --tmux crew:1 --cwd ~/src/app
"""


def run(args):
    if args.from_registry or args.adopt is not None:
        _from_registry(args)
        return
    if args.registry is not None:
        raise UsageError("--registry goes with --from-registry or --adopt")
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


def _from_registry(args):
    if args.from_registry and args.adopt is not None:
        raise UsageError("--from-registry and --adopt: one or the other")
    if args.adopt is not None and (args.tmux or args.pid):
        raise UsageError("--adopt takes no --tmux or --pid: a background session has no pane")
    if args.agent_session_id:
        raise UsageError("--agent-session-id comes from the registry here")
    if args.cwd is not None and not os.path.isdir(args.cwd):
        raise BadInput(f"bad --cwd {args.cwd!r}: no such directory")
    where = args.registry or registry.directory()
    if not where:
        raise BadInput("no registry to read: set HOME or CLAUDE_CONFIG_DIR, or give --registry")
    where = os.path.abspath(where)
    sess, done = fromregistry.register(
        crew(args), args.name, where, pid=args.pid and _pid(args.pid), target=args.tmux,
        job=args.adopt, kind=args.kind or "crew", exempt=args.exempt, cwd=args.cwd,
        session_key=args.session_key, user=args.user)
    meta = sess.meta
    print(escape(f"{args.name}: {done}: agent process {meta['pid']}"
                 + (f", conversation {meta['agent_session_id']}"
                    if meta.get("agent_session_id") else "")
                 + (f", pane {meta['tmux']}" if meta.get("tmux") else "")))


def _pid(text):
    return parse_count(text, "--pid", 1, 1 << 22)      # the kernel's PID_MAX_LIMIT
