import sys

from crewfile.cli import crew
from crewfile.core.errors import PARTIAL, UsageError, failure_line
from crewfile.views import top
from crewfile.views.topview import main

HELP = """\
crew-top
The crew, live: one row per session and a footer, redrawn as records come.

  --once   print one frame to stdout and exit (plain text unless stdout is
           a terminal)
  --all    include ended sessions

Columns: NAME KIND (an aside is `aside*`) STATE (glance.py's word from the
verdict: working, idle, dialog, blocked, paused, lost(CODE), unknown(CODE),
ended; `(live?)` when the verdict cannot tell whether it is live,
`(stopped)` after SIGSTOP/Ctrl-Z) AGE (of the last record) WAKES
(notices pending in its inbox; `N+`: at least N, in an inbox too big
to count whole at once) NUDGE (`in 5m`, `due`, `held:CODE` after a
refusal, `disarmed:CODE`, `-` none) JOBS (`N run`, `M unheard`) TOKENS
(what its agent used, from its transcript: meta transcript_path) and LAST
(the last record, escaped; last on the line). A session whose files cannot
be used (or that cannot be a session: a link, a FIFO, mode 000) is one row:
`?` columns, STATE damaged, LAST `error: why`. A part of the crew that
cannot be read (jobs/ not a directory, crew-up/lock a FIFO) shows `?` in
its column or footer line. With --once each is said on stderr; exit 5.
Footer: crew-up's state (as crew-up --status), the reports waiting in
reports/new, and for each primary the share of its tokens spent on wake
turns (turns that wake-send's announcement or its Stop hook's wakes began
or continued): `wake turns: 58% of firstmate's tokens (7.1k of 12.3k)`.

The live view redraws when a file of the crew changes (inotify; polling
each second where it cannot be had), reading again only the sessions whose
files changed; every 10 s ($CREWFILE_TOP_FULL) it probes each session's
liveness again, for agents and panes gone without a record. Keys: up/down (k/j) choose a session;
Enter switches your tmux client to its pane; i its inbox; l its log
(scrollable); r the reports waiting; / filters the rows by a word; q quits
(or leaves a list). It never types into an agent.

Example: crew-top --once | grep -w blocked
"""


def run(args):
    if not args.once:
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            raise UsageError("the live view needs a terminal: use --once")
        main(crew(args), show_ended=args.all)
        return 0
    f = top.frame(crew(args), show_ended=args.all)
    sys.stdout.write(f.text(colour=sys.stdout.isatty()))
    sys.stderr.write("".join(failure_line("crew-top", why) for why in f.said))
    return PARTIAL if f.bad else 0
