"""One exception base and one table from exception to exit code (protocol.md's
"Exit codes"); only cli.py turns these into an exit status and a line on stderr."""
from crewfile.core.text import escape


OK = 0
REFUSED = 1      # understood and declined: the expected "no"
USAGE = 2        # wrong usage or bad input
NOT_FOUND = 3    # the named thing does not exist
DAMAGED = 4      # a file in the crew directory is not JSON or not of its shape
PARTIAL = 5      # done for every good entry; a bad one was named on stderr (and marked)
GONE = 6         # a watched directory was deleted or unmounted: restart the watcher
HELD = 7         # the captain is at the window (a draft, keys): nothing changed, try later
UNCONFIRMED = 8  # text typed and Entered, but no record says the agent took it: not repeated
SYSTEM = 111     # a system call failed (disk full, permission, ...)
INTERRUPTED = 130   # SIGINT (128 + 2)
BROKEN_PIPE = 141   # the reader of our output went away (128 + SIGPIPE)

# job-wait's own answers (timeout(1)'s numbering), beside the job's own code it
# passes through: 126/127 a shell's (and job-exec's) for not runnable / not found.
JOB_HEARD = 122     # its outcome was announced to the session already: not repeated
JOB_TIMEOUT = 124   # the job is still running when --timeout ran out
JOB_ERROR = 125     # job-wait's own failure (usage, no such job, system), or the job's fate is lost
NOT_RUNNABLE = 126
NO_COMMAND = 127


class CrewfileError(Exception):
    """Base: an expected failure with a one-line message."""
    exit_code = SYSTEM


def failure_line(name, e):
    """The one line command *name* says on stderr of its failure *e*, escaped."""
    return f"{name}: {escape(reason(e))}\n"


def reason(e):
    """What failure *e* (a CrewfileError, an OSError, a text) says, not escaped."""
    if isinstance(e, (str, CrewfileError)):
        return str(e)
    where = f"{e.filename}: " if e.filename else ""
    return f"{where}{e.strerror or e}"


class UsageError(CrewfileError):
    """The command line is wrong."""
    exit_code = USAGE


class BadInput(CrewfileError):
    """A name, kind, text or file given to us is not acceptable."""
    exit_code = USAGE


class NotFound(CrewfileError):
    """A session, report, schedule or job that does not exist."""
    exit_code = NOT_FOUND


class Refused(CrewfileError):
    """The request was understood and declined (a rule says no)."""
    exit_code = REFUSED


class CaptainPresent(Refused):
    """The captain may be mid-reply in the window: nothing was changed."""
    exit_code = HELD


class Unconfirmed(CrewfileError):
    """Typed and Entered, but no turn recorded: it may yet be taken, not typed again."""
    exit_code = UNCONFIRMED


class SystemFailure(CrewfileError):
    """The machine failed us: I/O error, full disk, missing tool."""
    exit_code = SYSTEM


class BadFile(CrewfileError):
    """A crew file that is not what the protocol says (not JSON, wrong shape)."""
    exit_code = DAMAGED

    def __init__(self, path, why):
        super().__init__(f"{path}: {why}")
        self.path, self.why = path, why


class Gone(CrewfileError):
    """A directory a watcher follows is gone (deleted, unmounted): only a restart can help."""
    exit_code = GONE
