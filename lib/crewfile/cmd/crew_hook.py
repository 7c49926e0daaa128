import os
import sys

from crewfile.core.errors import UsageError
from crewfile.hooks.hook import DEFAULT_AGENT, handle, load_agent, read_payload

# cli.leave(): every write is whole and every lock closed before run() returns;
# the interpreter's teardown of the hook's ~30 modules was a sixth of its CPU
EXIT_AT_ONCE = True


def run(args):
    if args.settings or args.install or args.uninstall:
        return _install(args)
    if args.payload is not None:
        raw = args.payload
    elif sys.stdin.isatty():
        raise UsageError("expected a hook payload on stdin (see --help)")
    else:
        try:
            raw = read_payload(sys.stdin.buffer)
        except OSError as e:
            # Exit 111 here would be read as a refusal: Gemini CLI denies
            # on any code but 0 and 1. As a hook, one line and exit 0.
            sys.stderr.write(f"crew-hook: ?: stdin cannot be read: {e.strerror or e}\n")
            return 0
    env = dict(os.environ)
    if args.dir:
        env["CREWFILE_DIR"] = args.dir
    if args.rewake:
        from crewfile.hooks import rewake  # the hook's budget: --rewake only
        reply = rewake.handle(raw, env, agent=args.agent or "claude")
        if reply.err:
            sys.stderr.write(reply.err + "\n" if reply.code == 2 else f"crew-hook: {reply.err}\n")
        return reply.code
    reply = handle(raw, env, codex=args.payload is not None, agent=args.agent or "claude")
    if reply.out:
        sys.stdout.write(reply.out)
        sys.stdout.flush()
    if reply.err:
        sys.stderr.write(f"crew-hook: {reply.err}\n")
    return reply.code


def _install(args):
    from crewfile.agents import install     # not on the hook's path
    from crewfile.core.pinned import command_line  # the hook's budget
    if args.install and args.uninstall:
        raise UsageError("--install and --uninstall exclude each other")
    agent = load_agent(args.agent or DEFAULT_AGENT)
    kept = []
    if args.uninstall:
        changes, kept = install.plan_uninstall(args.uninstall, agent)
        extra, notes = agent.install_extras(args.uninstall, uninstall=True)
    else:
        command = args.command or command_line(sys.argv[0])
        if not args.command and agent.NAME != DEFAULT_AGENT:
            command += f" --agent {agent.NAME}"
        if args.settings:
            sys.stdout.write(install.dumps(install.hooks_block(command, agent)))
            return 0
        changes = install.plan(args.install, command, agent)
        extra, notes = agent.install_extras(args.install)
    changes += extra
    out = []
    for ch in changes:
        if args.dry_run and ch.old != ch.new:
            out.append(ch.diff())
        verb = ch.verb if not args.dry_run or ch.verb == "unchanged" else f"would be {ch.verb}"
        out.append(f"{verb} {ch.path}\n")
    out += [f"kept {path} (edited: not crewfile's copy)\n" for path in kept]
    out += [f"note: {note}\n" for note in notes]
    if not args.dry_run:
        install.apply(changes, root=args.uninstall)
    sys.stdout.write("".join(out))
    return 0
