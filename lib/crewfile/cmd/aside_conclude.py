import sys

from crewfile.asides.aside import MAX_REPORT, conclude
from crewfile.core.errors import BadInput, UsageError
from crewfile.core.paths import Crew


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
    path, adopted = conclude(Crew(args.dir), args.name, data)
    if adopted:
        sys.stderr.write(f"aside-conclude: {args.name}: adopted the report an interrupted"
                         f" run delivered\n")
    sys.stdout.write(path + "\n")
