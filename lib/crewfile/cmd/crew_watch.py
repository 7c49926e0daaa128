import os
import signal
import stat
import threading

from crewfile.core.durations import parse_duration
from crewfile.core.errors import BadInput, UsageError
from crewfile.core.jsonio import loads
from crewfile.core.moments import parse_moment
from crewfile.core.paths import Crew
from crewfile.core.records import timestamp
from crewfile.wake.watch import DEFAULT_PROBE, DEFAULT_STALE, Watcher, write_json_lines


def run(args):
    w = None

    def stop(_sig, _frame):
        """SIGTERM and SIGINT: a batch being written (its events, then its
        cursor) is finished first; anywhere else the watcher stops at once,
        which loses nothing (what is not written is read again)."""
        if w is not None:
            w.stop_after_batch = True       # kept even if the raise below is lost
            if w.busy:
                return
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, stop)     # first: a SIGTERM during start-up is a clean exit too
    signal.signal(signal.SIGINT, stop)
    try:
        if args.resume and args.cursor:
            raise UsageError("--cursor and --resume name two different writers; give one")
        if args.json_lines and (args.resume or args.positions):
            raise UsageError("--json-lines has no positions; use event lines")
        since = None
        if args.since is not None:
            if args.resume or args.cursor:
                raise UsageError("--since replays from a moment, a cursor from a position;"
                                 " give one")
            since = parse_moment(args.since, "--since", future=False)
        w = Watcher(Crew(args.dir), from_start=args.from_start or since is not None,
                    cursor=args.cursor,
                    stale_after=parse_duration(args.stale, "--stale", default=DEFAULT_STALE),
                    probe_every=parse_duration(args.probe, "--probe", default=DEFAULT_PROBE),
                    poll=parse_duration(args.poll, "--poll"),
                    out=write_json_lines if args.json_lines else None,
                    positions=args.positions, resume=args.resume)
        if since is not None:
            w.since_ts = timestamp(since)
        if args.resume == "-":
            w.resume_doc = _stdin_cursor()
            if not args.once:
                _exit_at_end_of_stdin()
        if args.once:
            w.run_once()
        else:
            w.stop_fd = _wakeup_fd()
            w.reader_fd = _pipe_or_socket(1)
            w.follow()
    except KeyboardInterrupt:
        pass
    finally:
        if w is not None:
            w.close()


def _wakeup_fd():
    """The read end of a pipe each caught signal writes a byte to (C-level,
    at the signal): a wait that began just after the handler's check still
    wakes."""
    r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(w)
    return r


def _pipe_or_socket(fd):
    """*fd* when it is a pipe or a socket (its reader can go away), else None."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return None
    return fd if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) else None


def _stdin_cursor():
    """The cursor document on stdin's first line (None for an empty line)."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = os.read(0, 1)       # byte by byte: what follows is not ours to read
        if not chunk:
            break
        data += chunk
        if len(data) > 64 << 20:
            raise BadInput("the cursor on stdin is longer than 64 MiB")
    if not data.strip():
        return None
    try:
        return loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise BadInput("the first line of stdin is not a crew-watch cursor") from None


def _exit_at_end_of_stdin():
    """A thread that waits for the end of stdin, then stops us as SIGTERM does."""

    def wait():
        try:
            while os.read(0, 65536):
                pass
        except OSError:
            pass
        os.kill(os.getpid(), signal.SIGTERM)
    threading.Thread(target=wait, daemon=True).start()
