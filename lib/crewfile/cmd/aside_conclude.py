import sys

from crewfile.asides.aside import MAX_REPORT, conclude
from crewfile.cli import crew
from crewfile.core.errors import BadInput, UsageError

HELP = """\
aside-conclude NAME
The aside's agent hands over its report, into reports/new/; prints its path.
Only after the captain's believed conclusion; otherwise refused (exit 1), a
`problem` record (docs/commands/aside-conclude.md).

  --report FILE   the report: a file, or - for stdin (required)

Example: aside-conclude api-design --report notes/api-design.md
"""


def run(args):
    if not args.report:
        raise UsageError("missing --report FILE (or - for stdin)")
    if args.report == "-":
        data = sys.stdin.buffer.read(MAX_REPORT + 1)
    else:
        try:
            with open(args.report, "rb") as f:
                data = f.read(MAX_REPORT + 1)
        except FileNotFoundError:
            raise BadInput(f"no report file '{args.report}'") from None
        except IsADirectoryError:
            raise BadInput(f"'{args.report}' is a directory") from None
    path, adopted = conclude(crew(args), args.name, data)
    if adopted:
        sys.stderr.write(f"aside-conclude: {args.name}: adopted the report an interrupted"
                         f" run delivered\n")
    sys.stdout.write(path + "\n")
