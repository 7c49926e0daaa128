import os
import sys

from crewfile.background.jobwatch import start
from crewfile.core.names import check_name
from crewfile.core.paths import Crew

# cli.leave(): the handle is out; the caller reading it would sit through
# the interpreter's teardown (the watcher runs on in its own process)
EXIT_AT_ONCE = True


def run(args):
    session = args.session if args.session is not None else os.environ.get("CREWFILE_SESSION")
    if args.handle is not None:
        check_name(args.handle, "job handle")       # before new_job makes jobs/
    handle = start(Crew(args.dir), args.command, session=session or None, label=args.label,
                   handle=args.handle, exiting=True)
    sys.stdout.write(handle + "\n")
