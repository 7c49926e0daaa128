HELP = """\
aside-reconcile NAME
The primary takes in concluded aside NAME: moves its report from
reports/new/ to reports/cur/, saves the window's whole scrollback beside it
(REPORT.scrollback), appends `closed: REPORT`, and only then kills the
window. Safe to rerun after a crash at any step; rerun on a closed aside,
it finishes what is left (the kill). Prints `report: PATH` and
`scrollback: PATH`.

Example: aside-reconcile api-design && cat "$(report-ls --aside api-design | awk 'END {print $4}')"
"""


def run(args):
    import sys
    from ..aside import reconcile
    from ..cli import crew
    out = reconcile(crew(args), args.name)
    if out.warning:
        sys.stderr.write(f"aside-reconcile: {args.name}: {out.warning}\n")
    sys.stdout.write(f"report: {out.report or '-'}\nscrollback: {out.scrollback or '-'}\n")
    return 0
