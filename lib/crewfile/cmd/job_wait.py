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
# The process our caller waits on, once we wait: it exits with the code our
# child hands it, or says the child ended without one.
_AWAIT_CODE = ('IFS= read -r code <&3 && case $code in *[!0-9]*|"") false;; esac && exit "$code"; '
               'printf "%s\\n" "$1" >&2; exit "$2"')
_NO_ANSWER = "job-wait: its waiter (pid {}) ended without an answer"
_code_fd = None     # in the child: the pipe its code goes into (leave())


def run(args):
    import sys
    from ..cli import crew
    from ..durations import parse_count, parse_duration
    from ..jobwait import wait
    timeout = (parse_duration(args.timeout, "--timeout", positive=False)
               if args.timeout is not None else None)
    tail = 10 if args.tail is None else parse_count(args.tail, "--tail")
    sys.stdout.flush()
    outcome = wait(crew(args), args.handle, timeout, exiting=True,
                   prepare=_hand_the_exit_on if timeout is None or timeout > 0 else None,
                   waiter=os.getpid(), wanted=_still_wanted)
    if outcome.state == "abandoned":
        return outcome.code         # nobody to print to: our parent is gone
    lines = [outcome.line() + "\n"]
    if outcome.state == "done" or outcome.state == "lost":
        data = outcome.job.output()
        if not args.all:
            parts = data.split(b"\n")
            if parts and parts[-1] == b"":
                parts.pop()
            data = b"\n".join(parts[-tail:]) + b"\n" if parts and tail else b""
        elif data and not data.endswith(b"\n"):
            data += b"\n"
        sys.stdout.write("".join(lines))
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
    else:
        sys.stdout.write("".join(lines))
    return outcome.code


def _hand_the_exit_on():
    """About to wait: fork. The child waits, hears and prints,
    as job-wait always did, and hands its exit code through a pipe; this
    process, the one our caller waits on, becomes a shell that reads the
    code and exits with it.

    Why: a Python process exits in ~0.4 ms (its address space torn down)
    against ~0.05 ms for a shell; on the path from a job's end to our
    caller's wake-up that was the largest cost left that is no promise's
    price. The child's own exit comes after its answer is out, on nobody's
    path. The child dies with us (a thread of it watches the pipe): a
    job-wait killed while it waits counts itself out, as before. If the
    shell cannot be run, this process waits for the code itself; if no
    process can be forked, it waits as before, alone."""
    import sys
    sys.stdout.flush()
    sys.stderr.flush()
    made = []
    try:
        made += os.pipe()
        made += os.pipe()           # its write end is closed by our exec (close-on-exec)
        pid = os.fork()
    except OSError:
        for fd in made:
            os.close(fd)
        return
    r, w, execed_r, execed_w = made
    if pid == 0:
        global _code_fd
        os.close(r)
        os.close(execed_w)
        while os.read(execed_r, 1):     # our parent has exec'd (or died): off its way
            pass
        os.close(execed_r)
        _code_fd = w
        _die_with_parent(w)
        # fork() left every page of ours shared with our parent until its
        # exec, and write-protected still: the first write to each (Python
        # writes reference counts as it reads) is a page fault. Taken here,
        # by the collector's pass over every object, and not after the wake.
        import gc
        gc.collect()
        return
    os.close(w)
    os.close(execed_r)
    if r != 3:
        os.dup2(r, 3)           # inheritable
        os.close(r)
    else:
        os.set_inheritable(3, True)
    try:
        os.execv(SHELL, ["job-wait", "-c", _AWAIT_CODE, "job-wait", _NO_ANSWER.format(pid),
                         str(ERROR_EXIT)])
    except OSError:
        os.close(execed_w)
    data = b""
    try:
        while True:
            more = os.read(3, 16)
            if not more:
                break
            data += more
    except KeyboardInterrupt:
        os._exit(INTERRUPTED)
    code = data.strip()
    if not code.isdigit():
        os.write(2, (_NO_ANSWER.format(pid) + "\n").encode())
        os._exit(ERROR_EXIT)
    os._exit(int(code))


def _still_wanted():
    """False once our parent is gone (the read end of our pipe closed): asked
    under the job's lock right before this wait would hear the outcome, so a
    job-wait killed at any moment before leaves it to be announced."""
    if _code_fd is None:
        return True
    import select
    poller = select.poll()
    poller.register(_code_fd, 0)
    return not poller.poll(0)


def _die_with_parent(w):
    """The child's watch: when the read end of *w* closes (our parent, the
    process our caller waits on, ended: killed, or done), exit at once. The
    kernel lets go of our registration: the watcher announces the outcome."""
    import _thread
    import select

    def watch():
        poller = select.poll()
        poller.register(w, 0)           # POLLERR: no reader left
        while True:
            try:
                if poller.poll():
                    os._exit(INTERRUPTED)
            except InterruptedError:
                continue
    _thread.start_new_thread(watch, ())


def leave(code):
    """cli.leave(), handing *code* to our parent first (in the child).

    stdout and stderr are flushed and closed before the code is written, so a
    caller reading our output (`$(job-wait ...)`) sees its end when our
    parent exits, not when we do."""
    from ..cli import leave as cli_leave
    if _code_fd is None:
        cli_leave(code)
    import sys
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    for fd in (1, 2):
        try:
            os.close(fd)
        except OSError:
            pass
    try:
        os.write(_code_fd, b"%d\n" % code)
    except OSError:
        pass                        # our parent is gone
    os._exit(code)
