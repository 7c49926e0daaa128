import fcntl
import os
import sys

from crewfile.background.jobwait import answer, unhear, wait
from crewfile.core.durations import parse_count, parse_duration
from crewfile.core.errors import JOB_ERROR as ERROR_EXIT, SystemFailure     # noqa: F401 (cli.py reads it)
from crewfile.core.paths import Crew

# cli.leave(): the answer is out; a caller waiting on our exit would sit
# through the interpreter's teardown (~10 ms measured), and a --timeout's
# thread may still be blocked in flock(2)
EXIT_AT_ONCE = True


def run(args):
    timeout = parse_duration(args.timeout, "--timeout", positive=False)
    tail = parse_count(args.tail, "--tail", default=10)
    _printable()
    outcome = wait(Crew(args.dir), args.handle, timeout, exiting=True)
    try:
        sys.stdout.buffer.write(answer(outcome, tail, args.all, terminal=sys.stdout.isatty()))
        sys.stdout.flush()
    except BaseException:       # not heard here after all: the watcher will announce it
        unhear(outcome)
        raise
    return outcome.code


def _printable():
    """Refuse, before anything is heard, to wait with a stdout the answer
    cannot be written to (closed, or open for reading only)."""
    try:
        writable = fcntl.fcntl(1, fcntl.F_GETFL) & os.O_ACCMODE != os.O_RDONLY
    except OSError:
        writable = False
    if not writable:
        raise SystemFailure("standard output is not open for writing: nothing heard")
