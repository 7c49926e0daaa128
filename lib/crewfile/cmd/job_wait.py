HELP = """\
job-wait HANDLE
Wait for job HANDLE to end; print a result line, then the output's tail.

  --timeout DURATION   give up after DURATION (e.g. 90, 30s, 10m, 1h30m); exit 124
  --tail N   how many lines of output to print (default: 10, at most 1000000)
  --all      print all the output kept (instead of the tail)

Exits with the job's code: its exit status, or 128+N if signal N killed it.
An outcome that lands while this waits is heard by this wait and is not
announced; on a timeout the job keeps running and is announced if nobody
waits when it ends. An announced outcome whose notice has not reached the
model yet is taken back from the inbox and heard by this wait; once the
notice has reached it, the outcome is not repeated (exit 122; job-ls has it).
The first line tells every case apart:
  HANDLE exited N after T; heard by this wait | heard already by wait
  HANDLE killed by SIGNAME (N) after T; ...
  HANDLE heard already by notice ID: not repeated                  (exit 122)
  HANDLE running: timed out after waiting T                        (exit 124)
  HANDLE lost: fate unknown (watcher lost); process group PGID ... (exit 125)
job-wait's own failures (usage, no such job, system) exit 125 with a message
on stderr and nothing on stdout.

Example: job-wait j-4f2a9c --timeout 10m || echo "deploy failed: $?"
"""
import os       # noqa: E402

from ..errors import INTERRUPTED, JOB_ERROR as ERROR_EXIT     # noqa: E402 (cli.py reads it)

# cli.leave(): the answer is out; a caller waiting on our exit would sit
# through the interpreter's teardown (~10 ms measured), and a --timeout's
# thread may still be blocked in flock(2)
EXIT_AT_ONCE = True

SHELL = "/bin/sh"
# What job-wait becomes once handed to the watcher (jobwait.HandOver): a
# shell that exits with the code the watcher writes into fd 3, after the
# answer. No code (the watcher died, or could not take the request): run
# job-wait again, alone (ALONE), which hears the outcome or says it is lost.
ALONE = "CREWFILE_JOB_WAIT_ALONE"
_AWAIT_CODE = ('IFS= read -r code <&3 && case $code in *[!0-9]*|"") false;; esac && exit "$code"; '
               f'exec 3<&-; {ALONE}=1; export {ALONE}; exec "$@"')


def run(args):
    import sys
    from ..cli import crew
    from ..durations import parse_count, parse_duration
    from ..jobwait import answer, wait
    timeout = (parse_duration(args.timeout, "--timeout", positive=False)
               if args.timeout is not None else None)
    tail = 10 if args.tail is None else parse_count(args.tail, "--tail")
    sys.stdout.flush()
    _printable()
    again = os.environ.get(ALONE) == "1"
    handing = (timeout is None or timeout > 0) and not again and _again() is not None
    outcome = wait(crew(args), args.handle, timeout, exiting=True,
                   hand_over=_hand_over(tail, args.all) if handing else None, again=again)
    sys.stdout.buffer.write(answer(outcome, tail, args.all))
    return outcome.code


def _printable():
    """Refuse, before anything is heard, to wait with a stdout the answer
    cannot be written to (closed, or open for reading only)."""
    import fcntl
    from ..errors import SystemFailure
    try:
        writable = fcntl.fcntl(1, fcntl.F_GETFL) & os.O_ACCMODE != os.O_RDONLY
    except OSError:
        writable = False
    if not writable:
        raise SystemFailure("standard output is not open for writing: nothing heard")


def _hand_over(tail, all_kept):
    """jobwait.wait()'s hand_over for job-wait: hand this wait to the job's
    watcher, then become a shell that exits with the code it is handed.

    Why: a job's watcher is awake at its end anyway, and answers from
    there: the process our caller waits on is then a shell woken once (a
    Python process woken and exiting costs ~0.4 ms, a shell ~0.1 ms), and
    no other process of ours is on the path from the job's end to our
    caller's wake-up."""
    def made(job):
        from ..jobwait import HandOver
        import sys
        sys.stdout.flush()
        sys.stderr.flush()
        return HandOver(job, tail, all_kept, _await_code)
    return made


def _again():
    """job-wait as it was run, to run it again (what the shell does when
    the watcher gives no code), or None (not a script: `python -c`)."""
    import sys
    if not sys.executable or not os.path.isfile(sys.argv[0]):
        return None
    return [sys.executable, *sys.argv]


def _await_code(r):
    """Become the shell that waits for the code on *r* (fd 3). If the
    shell cannot be run, this process does what it would."""
    if r != 3:
        os.dup2(r, 3)               # inheritable
        os.close(r)
    else:
        os.set_inheritable(3, True)
    again = _again()
    try:
        os.execv(SHELL, ["job-wait", "-c", _AWAIT_CODE, "job-wait", *again])
    except OSError:
        pass
    data = b""
    try:
        while more := os.read(3, 16):
            data += more
    except KeyboardInterrupt:
        os._exit(INTERRUPTED)
    if data.strip().isdigit():
        os._exit(int(data.strip()))     # the answer is out
    os.close(3)
    os.environ[ALONE] = "1"
    try:
        os.execv(again[0], again)
    except OSError as e:
        os.write(2, f"job-wait: cannot run job-wait again: {e.strerror}\n".encode())
    os._exit(ERROR_EXIT)
