import os
import sys

from crewfile.background.jobwatch import start
from crewfile.cli import crew
from crewfile.core.names import check_name

HELP = """\
job-exec COMMAND...
Run COMMAND detached under a watcher; print its handle at once and return.

  --session NAME   the session its outcome is announced to (default: $CREWFILE_SESSION)
  --label TEXT     a few words saying what it is (job-ls, the notice)
  --handle HANDLE  use this handle (default: j- and 6 random hex digits)

Put `--` before COMMAND. When it ends and nobody is waiting (job-wait),
the outcome is posted to the session's inbox (docs/commands/job-exec.md).

Example: h=$(job-exec --session w1 --label deploy -- make deploy)
"""

# cli.leave(): the handle is out; the caller reading it would sit through
# the interpreter's teardown (the watcher runs on in its own process)
EXIT_AT_ONCE = True


def run(args):
    session = args.session if args.session is not None else os.environ.get("CREWFILE_SESSION")
    if session:
        check_name(session, "session name")
    if args.handle is not None:
        check_name(args.handle, "job handle")
    handle = start(crew(args), args.command, session=session or None, label=args.label,
                   handle=args.handle, exiting=True)
    sys.stdout.write(handle + "\n")
