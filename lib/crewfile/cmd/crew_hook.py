import os
import sys

from crewfile.core.errors import UsageError
from crewfile.hooks.hook import DEFAULT_AGENT, handle, load_agent, read_payload

HELP = """\
crew-hook [PAYLOAD]
The agent hook: the agent CLI runs it for each hook event (the event's JSON
on stdin); it writes the session's status records, records the captain's
input, drains the session's notices into the model's context and guards the
captain-only /aside-done. A PAYLOAD argument is Codex CLI's notify JSON.
As a hook it always exits 0 (a problem is one line on stderr).

  --agent NAME        whose hook protocol: claude (default), codex (hooks.json)
                      or gemini (settings.json hooks)
  --settings          print the hooks block for the agent's hooks file
  --install DIR       merge the hooks into the agent's hooks file in DIR
                      and install the captain's conclusion command
                      (claude: DIR/settings.json, the /aside skill and the
                      /aside-done command, DIR being ~/.claude or
                      PROJECT/.claude; codex: DIR/hooks.json and the
                      $aside-done skill, DIR ~/.codex or PROJECT/.codex;
                      gemini: DIR/settings.json and the /aside-done
                      command, DIR ~/.gemini or PROJECT/.gemini). For
                      codex, the `codex` on PATH is asked its version:
                      0.114 to 0.123 run hooks only with `codex_hooks =
                      true` under [features], added to DIR/config.toml.
                      Lines `note: ...` say what is left to you (the
                      CLI's trust of hooks or folders)
  --uninstall DIR     remove what --install put there: crew-hook's hooks
                      from the hooks file, the skill and command files
                      (an edited copy is kept and named), the config.toml
                      lines it added; nothing else
  --dry-run           with --install or --uninstall: show the changes,
                      write nothing
  --command CMD       the hook command written into the settings (default:
                      this interpreter and this crew-hook's absolute path)
  --rewake            run as the primary's keystroke-free wake (claude:
                      the asyncRewake Stop hook --install adds): wait until
                      wakes that nobody announced wait in its inbox, its
                      turn has ended and nobody typed in its window for
                      5s, then print the announcement on stderr and exit 2
                      (the CLI starts the model's turn with it); exit 0
                      at once for any other session, and after a wait
                      with nothing to say (docs/commands/crew-hook.md)

Environment: CREWFILE_ACCOUNT_HOLD, the seconds an account's stop that time
lifts (a 429 rate limit; Claude Code's StopFailure) holds crewfile's typing
into the session, unless a turn succeeds first (default 300).
CREWFILE_REWAKE_WAIT, the seconds --rewake waits at most (default and
longest: the installed hook's timeout less 60).

Example: crew-hook --install ~/.codex --agent codex --dry-run
"""
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
