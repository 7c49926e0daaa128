from crewfile.asides.aside import captain_done
from crewfile.cli import crew

HELP = """\
aside-done NAME
The captain concludes aside NAME: appends `captain-done[: NOTE]`. Typed in
another window of the aside's tmux server, or a key bound to it, by a
person; otherwise refused (exit 1), a `problem` record
(docs/commands/aside-done.md).

  --note TEXT   a note to the agent and the primary (the record's text)

Example: tmux bind-key D run-shell 'aside-done "#{window_name}"'
"""


def run(args):
    captain_done(crew(args), args.name, args.note)
