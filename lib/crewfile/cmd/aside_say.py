HELP = """\
aside-say NAME TEXT...
Record TEXT as the captain's input to aside NAME, exactly as a prompt hook
would: `/aside-done [NOTE]` records the captain's conclusion (captain-done),
anything else a `captain` record, which voids an earlier conclusion. For
agents without a prompt hook, and for tests. Prints the kind recorded.

Example: aside-say api-design "what about pagination?"
"""


def run(args):
    import sys
    from ..aside import say
    from ..cli import crew
    kind = say(crew(args), args.name, " ".join(args.text))
    sys.stdout.write(kind + "\n")
    return 0
