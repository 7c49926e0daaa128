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
(notices pending in its inbox) NUDGE (`in 5m`, `due`, `held:CODE` after a
refusal, `disarmed:CODE`, `-` none) JOBS (`N run`, `M unheard`) and LAST
(the last record, escaped; last on the line). A session whose files cannot
be used is one row: `?` columns, STATE damaged, LAST `error: why`.
Footer: crew-up's state (as crew-up --status), the reports waiting in
reports/new.

Example: crew-top --once | grep -w blocked
"""


def run(args):
    import sys
    from ..cli import crew
    from ..errors import PARTIAL, UsageError
    from .. import top
    if not args.once:
        raise UsageError("only --once is available: the interactive view is not built yet")
    f = top.frame(crew(args), show_ended=args.all)
    sys.stdout.write(f.text(colour=sys.stdout.isatty()))
    return PARTIAL if f.bad else 0
