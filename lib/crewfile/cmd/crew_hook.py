HELP = """\
crew-hook [PAYLOAD]
The agent hook: Claude Code runs it for each hook event (the event's JSON on
stdin); it writes the session's status records, records the captain's input,
drains the session's notices into the model's context and guards the
captain-only /aside-done. A PAYLOAD argument is Codex CLI's notify JSON.
As a hook it always exits 0 (a problem is one line on stderr).

  --settings          print the hooks block for .claude/settings.json
  --install DIR       merge the hooks into DIR/settings.json and install the
                      /aside skill and /aside-done command under DIR (a
                      .claude directory: ~/.claude or PROJECT/.claude)
  --uninstall DIR     remove what --install put there: crew-hook's hooks
                      from DIR/settings.json, the skill and the command
                      (an edited copy is kept and named); nothing else
  --dry-run           with --install or --uninstall: show the changes,
                      write nothing
  --command CMD       the hook command written into the settings (default:
                      this interpreter and this crew-hook's absolute path)

Example: crew-hook --install ~/.claude --dry-run
"""


def run(args):
    import sys
    if args.settings or args.install or args.uninstall:
        return _install(args)
    if args.payload is not None:
        raw = args.payload
    elif sys.stdin.isatty():
        from ..errors import UsageError
        raise UsageError("expected a hook payload on stdin (see --help)")
    else:
        raw = sys.stdin.buffer.read()
    from ..hook import handle
    env = dict(__import__("os").environ)
    if args.dir:
        env["CREWFILE_DIR"] = args.dir
    reply = handle(raw, env, codex=args.payload is not None)
    if reply.out:
        sys.stdout.write(reply.out)
        sys.stdout.flush()
    if reply.err:
        sys.stderr.write(f"crew-hook: {reply.err}\n")
    return reply.code


def _install(args):
    import sys
    from .. import claude
    if args.install and args.uninstall:
        from ..errors import UsageError
        raise UsageError("--install and --uninstall exclude each other")
    kept = []
    if args.uninstall:
        changes, kept = claude.plan_uninstall(args.uninstall)
    else:
        command = args.command or claude.default_command(sys.argv[0])
        if args.settings:
            sys.stdout.write(claude.dumps(claude.hooks_block(command)))
            return 0
        changes = claude.plan(args.install, command)
    out = []
    for ch in changes:
        if args.dry_run and ch.old != ch.new:
            out.append(ch.diff())
        verb = ch.verb if not args.dry_run or ch.verb == "unchanged" else f"would be {ch.verb}"
        out.append(f"{verb} {ch.path}\n")
    out += [f"kept {path} (edited: not crewfile's copy)\n" for path in kept]
    if not args.dry_run:
        claude.apply(changes, root=args.uninstall)
    sys.stdout.write("".join(out))
    return 0
