import os

from crewfile.agents import registry
from crewfile.core.durations import parse_count
from crewfile.core.errors import BadInput, UsageError
from crewfile.core.paths import Crew
from crewfile.core.text import escape
from crewfile.session import fromregistry
from crewfile.session.reader import is_registered
from crewfile.session.sessions import record_agent, register


def run(args):
    if args.from_registry or args.adopt is not None:
        _from_registry(args)
        return
    if args.registry is not None:
        raise UsageError("--registry goes with --from-registry or --adopt")
    c = Crew(args.dir)
    alone = not any((args.kind, args.exempt, args.tmux, args.cwd, args.session_key,
                     args.agent_session_id, args.user))
    if args.pid and alone and is_registered(c, args.name):
        record_agent(c, args.name, _pid(args.pid))
        return
    if args.cwd is not None and not os.path.isdir(args.cwd):
        # A mistyped tree would make the nudge rule's "another session in the
        # same tree" compare against a path no agent works in.
        raise BadInput(f"bad --cwd {args.cwd!r}: no such directory")
    register(c, args.name, kind=args.kind or "crew", exempt=args.exempt,
             tmux=args.tmux, pid=_pid(args.pid), cwd=args.cwd,
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
    sess, done = fromregistry.register(
        Crew(args.dir), args.name, os.path.abspath(where), pid=_pid(args.pid), target=args.tmux,
        job=args.adopt, kind=args.kind or "crew", exempt=args.exempt, cwd=args.cwd,
        session_key=args.session_key, user=args.user)
    meta = sess.meta
    print(escape(f"{args.name}: {done}: agent process {meta['pid']}"
                 + (f", conversation {meta['agent_session_id']}"
                    if meta.get("agent_session_id") else "")
                 + (f", pane {meta['tmux']}" if meta.get("tmux") else "")))


def _pid(text):
    return parse_count(text, "--pid", 1, 1 << 22)      # the kernel's PID_MAX_LIMIT
