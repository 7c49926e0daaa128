HELP = """\
inbox-drain NAME
Print and remove NAME's pending notices, oldest first, one per line:
`<timestamp> <kind>: <id> <text>`. A notice posted during the drain stays
for the next one. Drained notices are kept in sessions/NAME/inbox.read.

  --json   one JSON object per line (ts, kind, id, text)
  --peek   print without removing

Example: inbox-drain firstmate
"""


def run(args):
    import sys
    from .. import inbox, records
    from ..cli import crew
    c = crew(args)
    if args.peek:
        notices, garbage = inbox.pending(c, args.name), 0
    else:
        notices, garbage = inbox.drain(c, args.name)
    if garbage:
        sys.stderr.write(f"inbox-drain: {args.name}: skipped {garbage} malformed line(s)\n")
    if args.json:
        import json
        out = [json.dumps(n.as_dict()) + "\n" for n in notices]
    else:
        out = [records.format_line(n.ts, n.kind, f"{n.id} {n.text}") for n in notices]
    sys.stdout.write("".join(out))
    return 0
