"""The one loop of the commands that read event lines on stdin and act on a
clock (wake-filter, wake-send, crew-notify): partial lines, overlong lines,
the end of input and the waits are handled here, once.

Input is read in chunks of whatever is available, and each chunk's lines are
handed over (take_all) before the next read: a live stream gets each line at
once, a file gets no system call per line, and nothing depends on
PYTHONUNBUFFERED.
"""
import os
import select
import signal
import time
from contextlib import nullcontext

from crewfile.core.errors import BadFile
from crewfile.core.jsonio import loads
from crewfile.core.locks import acquire
from crewfile.core.names import is_name
from crewfile.core.records import MAX_LINE
from crewfile.core.shapes import check

# An event line at most: a record, a session name (64 at most) and a space, a
# TAB and a position token (a small JSON object; 4096 is far above any).
MAX_EVENT = MAX_LINE + 65 + 4096
LOOK_AGAIN = 5.0        # a taker holding too much to read, with nothing due: look again
_CHUNK = 1 << 18


class Lines:
    """Chunks in, complete lines out, in bounded memory: an overlong line and
    a fragment at the end of input are dropped and said (docs/files/event-lines.md)."""

    def __init__(self, warn):
        self.warn = warn
        self.carry = b""
        self.overlong = False       # inside a line too long to be an event: drop until newline

    def feed(self, data):
        """The complete lines (bytes, no newline) that *data* finishes."""
        lines = (self.carry + data).split(b"\n")
        self.carry = lines.pop()
        if self.overlong:
            self.overlong = not lines
            if lines:
                lines.pop(0)
            else:
                self.carry = b""
        if len(self.carry) > MAX_EVENT:
            self.warn(f"a line longer than {MAX_EVENT} bytes, dropped: {self.carry[:80]!r}")
            self.carry, self.overlong = b"", True
        return lines

    def finish(self):
        if self.carry:
            self.warn(f"input ended inside a line, dropped: {self.carry[:80]!r}")
            self.carry = b""
        return []


def position(line, log):
    """(body, id, session, state) of an event line, state None without a
    position token (docs/files/event-lines.md). A token that does not read
    back as crew-watch wrote it is said, and the whole line taken as text."""
    body, tab, token = line.partition("\t")
    if tab:
        try:
            tok = loads(token)
            eid, sname, state = tok["id"], tok["s"], tok["at"]
            if isinstance(eid, str) and eid and " " not in eid and is_name(sname):
                return body, eid, sname, check("cursor-entry", state, "(token)")
        except (ValueError, TypeError, KeyError, AttributeError, BadFile):
            pass
        log(f"not a position token, taken as text: {token[:80]!r}")
    return line, None, None, None


class Taker:
    """What run() drives: take_all(lines) with each read's complete lines;
    step(eof) when due() says (a monotonic time, None: nothing until input);
    at the end of input run() returns once due(True) is None. holding():
    too much is held to read on. done(): however run() ends (a stop too).
    The defaults suit a taker without a clock."""

    clock = staticmethod(time.monotonic)

    def take_all(self, lines):
        raise NotImplementedError

    def due(self, eof=False):
        return None

    def step(self, eof=False):
        pass

    def holding(self):
        return False

    def done(self):
        pass


def run(taker, fd_in=0):
    """Feed *taker* the lines of fd_in, stepping it when due, until the input
    ended and nothing is due; then, or at a stop, taker.done()."""
    split = Lines(taker.warn)
    eof = False
    try:
        while True:
            due = taker.due(eof)
            if eof and due is None:
                return
            wait = None if due is None else max(0.0, due - taker.clock())
            if eof or taker.holding():
                time.sleep(LOOK_AGAIN if wait is None else wait)
            elif select.select([fd_in], [], [], wait)[0]:
                data = os.read(fd_in, _CHUNK)
                eof = not data
                taker.take_all(split.feed(data) if data else split.finish())
            taker.step(eof)
    finally:
        taker.done()


def run_stage(make, cursor):
    """run() the taker make() builds, as a pipeline's acknowledging stage
    (wake-send, crew-notify): SIGTERM stops it as ^C does, its done()
    acknowledging what it handled; and it holds *cursor*'s FILE.lock, taken
    before make() reads the cursor: one writer at a time (docs/files/cursor.md)."""

    def stop(_sig, _frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, stop)
    with acquire(cursor + ".lock") if cursor else nullcontext():
        run(make())
