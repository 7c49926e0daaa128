HELP = """\
aside-done NAME
The captain concludes aside NAME: appends `captain-done[: NOTE]`. The agent
may then hand over its report (aside-conclude). It stands while it is the
captain's latest act: a captain input after it reopens the conversation.

  --note TEXT   a note to the agent and the primary (the record's text)

Example: tmux bind-key D run-shell 'aside-done "#{window_name}"'
"""


def run(args):
    from ..aside import captain_done
    from ..cli import crew
    captain_done(crew(args), args.name, args.note)
    return 0
