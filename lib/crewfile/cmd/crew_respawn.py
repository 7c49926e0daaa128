HELP = """\
crew-respawn [NAME...]
The captain's explicit act after a reboot or a lost tmux server (never run by
a schedule or a nudge): for each registered session (or each NAME) whose
agent is gone and that did not end on purpose, open its window again in its
recorded tree, resuming its own conversation (Claude Code: `--resume ID`,
meta agent_session_id), so a schedule attached to it still belongs to it.
One line per session on stdout, `NAME ACTION DETAIL`, ACTION one of
respawned, would-respawn, live, ended; refusals go to stderr as
`crew-respawn: NAME: why` (an agent that cannot resume by id, no
conversation id, its tree gone or held by another live session).

  --dry-run   say what would be done; change nothing

Exit: 0; 1 some session was refused; 2 bad name; 3 no such session; 111.

Example: crew-respawn --dry-run && crew-respawn
"""


def run(args):
    import sys
    from ..cli import crew
    from ..spawn import REFUSED, respawn
    refused = 0
    for r in respawn(crew(args), args.name, dry_run=args.dry_run):
        if r.action == REFUSED:
            refused += 1
            sys.stdout.flush()
            sys.stderr.write(f"crew-respawn: {r.name}: {r.detail}\n")
        else:
            sys.stdout.write(f"{r.name} {r.action} {r.detail}\n")
    from ..errors import REFUSED as REFUSED_EXIT
    return REFUSED_EXIT if refused else 0
