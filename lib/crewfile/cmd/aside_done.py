from crewfile.asides.aside import captain_done
from crewfile.cli import crew

HELP = """\
aside-done NAME
The captain concludes aside NAME: appends `captain-done[: NOTE]`. The agent
may then hand over its report (aside-conclude). It stands while it is the
captain's latest act: a captain input after it reopens the conversation.
Type it in another window of the aside's tmux server or press a key bound
to it, in a tmux client attached to that server: run by the aside's agent,
from its own window, detached, from outside that server, or with no key of
a person's behind it (`tmux run-shell` sent by a process), it is refused
(exit 1) and the attempt is a `problem` record.

  --note TEXT   a note to the agent and the primary (the record's text)

Example: tmux bind-key D run-shell 'aside-done "#{window_name}"'
"""


def run(args):
    captain_done(crew(args), args.name, args.note)
    return 0
