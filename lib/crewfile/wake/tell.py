"""crew-notify: the events that need the captain (core/kinds.CAPTAINS), told
to the person through a command of their choosing (ntfy, a webhook, mail).

Batching, holds, the ceiling and exactly-once across kills:
docs/commands/crew-notify.md; the journal: docs/files/notify-journal.md.
"""
import os
import re
import signal
import subprocess
import time

from crewfile.core import logwrite
from crewfile.core.atomic import replace, write_all
from crewfile.core.errors import BadInput, CrewfileError, SystemFailure
from crewfile.core.kinds import CAPTAINS, MOVES_ON
from crewfile.core.records import printable_line
from crewfile.core.text import escape
from crewfile.session import tmux
from crewfile.wake import cursors, stream

DEFAULT_WINDOW = 2.0        # a burst's events within this of the first go in one message
DEFAULT_TIMEOUT = 30.0      # CMD killed after this long: a failed try
DEFAULT_AWAY = 300.0        # no key input for this long: the captain is away
DEFAULT_PER_HOUR = 20       # messages in any hour, at most
RETRY_FIRST = 2.0           # after a failed try; doubling up to RETRY_MAX
RETRY_MAX = 300.0
LOOK_AGAIN = 5.0            # while the captain is present: how often to look again
SHOWN = 50                  # event lines in one message; the rest counted
JOURNAL_KEEP = 2000         # journal lines kept when it is compacted
MAX_QUEUE = 100000          # events held before input is no longer read
# The cursor (the whole crew's positions, fsynced) is written at most this
# often while events only pass through; at once after a message went. What
# a kill loses of it is replayed, and the journal knows what was told.
ACK_DELAY = 0.2
HOUR = 3600.0
_CLOCK = "([01]?[0-9]|2[0-3]):([0-5][0-9])"        # H:MM or HH:MM, ASCII digits only


def parse_quiet(text):
    """(start, end) minutes of the day for `HH:MM-HH:MM` (local time; the span
    may cross midnight), BadInput otherwise."""
    m = re.fullmatch(f"{_CLOCK}-{_CLOCK}", text)
    if m is None:
        raise BadInput(f"bad --quiet '{escape(text)}': HH:MM-HH:MM such as 22:00-07:00")
    start, end = int(m[1]) * 60 + int(m[2]), int(m[3]) * 60 + int(m[4])
    if start == end:
        raise BadInput(f"bad --quiet '{escape(text)}': the start and the end are the same")
    return start, end


def quiet_left(quiet, now):
    """Seconds until quiet hours *quiet* end, if epoch time *now* is inside them, else 0."""
    if quiet is None:
        return 0.0
    t = time.localtime(now)
    m = t.tm_hour * 60 + t.tm_min + t.tm_sec / 60.0
    start, end = quiet
    inside = start <= m < end if start < end else (m >= start or m < end)
    if not inside:
        return 0.0
    return max(1.0, ((end - m) % 1440) * 60.0)


def captain_present(away, now, socket):
    """Seconds since the newest key input of a tmux client attached to the
    server (CREWFILE_TMUX's, else tmux's own), if within *away*; else None.
    No server, no client, or tmux missing: away."""
    newest = max((t for t, _pane in tmux.clients(socket)), default=None)
    if newest is None or newest < now - away:
        return None
    return max(0.0, now - newest)


class Journal:
    """FILE.journal (docs/files/notify-journal.md): what each try told.
    *path* None: kept in memory only (no cursor)."""

    def __init__(self, path):
        self.path = path
        self.sent = set()       # ids CMD took
        self.doubt = set()      # ids given to a CMD that may have told them, not known to
        self.times = []         # epoch of each success (step() keeps the last hour's)
        tries = {}
        raw = b""
        try:
            if path is not None:
                with open(path, "rb") as f:
                    raw = f.read()
        except FileNotFoundError:
            pass
        except OSError as e:
            raise SystemFailure(f"cannot read {path}: {e.strerror}") from None
        lines = raw.decode("utf-8", "replace").split("\n")
        for line in lines:
            words = line.split(" ", 3)
            if len(words) < 3:
                continue
            try:
                at = float(words[2])
            except ValueError:
                continue
            if words[0] == "sending":
                tries[words[1]] = [i for i in line.split(" ")[3:] if i]
            elif words[0] in ("sent", "failed", "unsure") and words[1] in tries:
                self.took(words[0], tries.pop(words[1]), at)
        for ids in tries.values():      # its supervisor killed mid-try
            self.doubt.update(ids)
        self.doubt -= self.sent
        kept = [ln for ln in lines if ln]
        if len(kept) > 2 * JOURNAL_KEEP:
            replace(path, "\n".join(kept[-JOURNAL_KEEP:]) + "\n")

    def took(self, word, ids, at):
        """What a try that ended *word* (sent, failed, unsure) at epoch *at* says of *ids*."""
        if word == "sent":
            self.sent.update(ids)
            self.doubt.difference_update(ids)
            self.times.append(at)
        elif word == "unsure":
            self.doubt.update(ids)

    def record(self, line):
        """Append *line*, fsynced (no file: nothing), under the cursor's lock."""
        if self.path is not None:
            logwrite.append_locked(self.path, [line + "\n"], sync=True)


class Event:
    """One input event: its id, its session, the cursor state after it
    (None without a position), its kind, and, if it needs the captain, its line."""
    __slots__ = ("eid", "key", "session", "state", "kind", "line", "done")

    def __init__(self, eid, key, session, state, kind, line):
        self.eid, self.key, self.session, self.state = eid, key, session, state
        self.kind, self.line = kind, line
        self.done = line is None


class Teller(stream.Taker):
    """take(line) for each input line; step() sends what is due; due() says when.
    *command*: given each message (sh -c). *cursor*: the one acknowledged
    (None: nothing is, no journal). *away*: seconds without key input that
    make the captain away (None: always tell). *quiet*: (start, end) minutes
    or None. *doubt*(name, text): why a `concluded` is not believed, or None."""

    def __init__(self, command, cursor=None, window=DEFAULT_WINDOW, timeout=DEFAULT_TIMEOUT,
                 away=DEFAULT_AWAY, per_hour=DEFAULT_PER_HOUR, quiet=None, retry=RETRY_FIRST,
                 log=None, socket=None, doubt=None):
        self.command = command
        self.doubt = doubt
        self.cursor = cursor
        self.window, self.timeout, self.away = window, timeout, away
        self.per_hour, self.quiet, self.retry_first = per_hour, quiet, retry
        self.socket = socket
        self.log = self.warn = log or (lambda msg: None)
        self.queues = {}            # session -> [Event] not yet acknowledged, in log order
        self.pending = []           # [Event] that need the captain, not yet told
        self.first_at = None        # monotonic: when the oldest pending arrived
        self.wait_until = None      # monotonic: no try before this (backoff, hold)
        self.retry = retry
        self.failures = 0
        self.held_quiet = False     # what is pending was held by quiet hours
        self.said = None            # the hold or failure last said
        self.acked = cursors.acked(cursor) if cursor else {}
        self.write_at = None        # monotonic: when the cursor is written next (None: nothing to)
        # no cursor: what this run told, in memory
        self.journal = Journal(cursor + ".journal" if cursor else None)

    # -- input ---------------------------------------------------------------
    def take(self, line):
        """One input line (str, no newline)."""
        body, eid, sname, state = stream.position(line, self.log)
        # The journal's name for it: the id and its record's time, as an id
        # alone recurs once a rotated log's inode is reused (event-lines.md).
        key = None if eid is None else f"{eid}@{body[:24]}"
        words = body.split(" ", 2)
        captain = kind = None
        if len(words) == 3:
            kind = words[2].split(":", 1)[0]
            if kind in CAPTAINS:
                captain = printable_line(body.encode()).decode("utf-8", "replace")
            if kind == "concluded" and captain is not None and self.doubt is not None:
                try:
                    why = self.doubt(words[1], words[2].partition(": ")[2])
                except (CrewfileError, OSError):
                    why = None          # unsure: telling is safer than losing
                if why:
                    self.log(f"{words[1]}: concluded not believed, not told: {why}")
                    captain = None
        elif body:
            self.log(f"not an event line, skipped: {body[:80]!r}")
        if captain is not None and key in self.journal.sent:
            captain = None          # told before a restart: acknowledged, not told again
        if kind in MOVES_ON:
            self._unpause(words[1])
        ev = Event(eid, key, sname, state, kind, captain)
        if state is not None:
            self.queues.setdefault(sname, []).append(ev)
        if captain is not None:
            if not self.pending:
                self.first_at = self.clock()
            self.pending.append(ev)

    def take_all(self, lines):
        """The lines of one read (stream.run), acknowledged at once where nothing waits."""
        for raw in lines:
            if raw:
                self.take(raw.decode("utf-8", "replace"))
        self.acknowledge()

    def _unpause(self, name):
        """A pause not told yet is no news once its session moved on (the
        captain answered; aside-open's own pause, once the captain types):
        it is dropped, acknowledged, never told."""
        for ev in self.pending:         # none of them is done yet
            ev.done = ev.kind == "paused" and ev.line.split(" ", 2)[1] == name
        self.pending = [ev for ev in self.pending if not ev.done]
        if not self.pending:
            self.first_at = None

    def holding(self):
        return sum(len(q) for q in self.queues.values()) >= MAX_QUEUE

    # -- acknowledgement -----------------------------------------------------
    def acknowledge(self, now=False):
        """Move the position, per session, past every event before its first
        untold one; write the cursor within ACK_DELAY (*now*: at once)."""
        for sname, queue in self.queues.items():
            i = next((i for i, ev in enumerate(queue) if not ev.done), len(queue))
            if i:
                cursors.keep_newer(self.acked, sname, queue[i - 1].state)
                del queue[:i]
                if self.cursor and self.write_at is None:
                    self.write_at = self.clock() + ACK_DELAY
        if self.write_at is not None and (now or self.clock() >= self.write_at):
            cursors.write(self.cursor, self.acked)
            self.write_at = None

    def done(self):
        """Stopped or at the end (what was pending told first): acknowledge."""
        try:
            self.acknowledge(now=True)
        except CrewfileError:
            pass

    # -- telling -------------------------------------------------------------
    def due(self, eof=False):
        """Monotonic time of the next step(), or None with nothing to do."""
        return min((t for t in (self._tell_at(eof), self.write_at) if t is not None), default=None)

    def _tell_at(self, eof):
        """When what is pending may be told (the window, a hold, a backoff), or None."""
        if not self.pending:
            return None
        at = self.first_at if eof else self.first_at + self.window
        return at if self.wait_until is None else max(at, self.wait_until)

    def step(self, eof=False):
        """Write the cursor if due; tell what is pending if nothing holds it;
        True if a message went."""
        self.acknowledge()
        due = self._tell_at(eof)
        if due is None or self.clock() < due:
            return False
        self.wait_until = None
        wall = time.time()
        n = len(self.pending)
        left = quiet_left(self.quiet, wall)
        if left:
            self.held_quiet = True
            return self._hold(left, "quiet", f"holding {n} event(s): quiet hours, for {left:.0f}s")
        if self.away is not None:
            since = captain_present(self.away, wall, self.socket)
            if since is not None:
                return self._hold(min(LOOK_AGAIN, self.away), "present",
                                  f"holding {n} event(s): the captain is at a terminal"
                                  f" (key input {since:.0f}s ago)")
        told = self.journal.times       # each message of the last hour (the ceiling)
        told[:] = [t for t in told if t > wall - HOUR]
        if len(told) >= self.per_hour:
            wait = told[0] + HOUR - wall
            return self._hold(wait, "ceiling", f"holding {n} event(s): {self.per_hour}"
                              f" messages in the last hour (the ceiling), for {wait:.0f}s")
        return self._send()

    def _hold(self, seconds, why, msg):
        self.wait_until = self.clock() + max(0.01, seconds)
        if self.said != why:
            self.said = why
            self.log(msg)
        return False

    def message(self, events):
        """(title, body) of the message for *events*."""
        n = len(events)
        names = list(dict.fromkeys(f"{ev.line.split(' ', 2)[1]} {ev.kind}" for ev in events))
        head = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        title = (f"crewfile: {n} event{'s' if n != 1 else ''} need{'' if n != 1 else 's'}"
                 f" you: {head}")
        if self.held_quiet:
            title += " (held through quiet hours)"
        lines = [ev.line for ev in events[:SHOWN]]
        if n > SHOWN:
            lines.append(f"... and {n - SHOWN} more")
        return title, title + "\n" + "\n".join(lines) + "\n"

    def _send(self):
        events = list(self.pending)
        ids = [ev.eid for ev in events if ev.eid is not None]
        told = [ev.key for ev in events if ev.key is not None]     # the journal's names
        title, text = self.message(events)
        key = f"{os.getpid()}-{time.time_ns()}"
        again = bool(self.journal.doubt.intersection(told))
        env = dict(os.environ, CREWFILE_NOTIFY_IDS=" ".join(ids), CREWFILE_NOTIFY_KEY=key,
                   CREWFILE_NOTIFY_TITLE=title, CREWFILE_NOTIFY_COUNT=str(len(events)),
                   CREWFILE_NOTIFY_AGAIN="1" if again else "0")
        word, why = try_command(self.command, text, env, self.timeout, self.journal, key, told)
        self.journal.took(word, told, time.time())
        if word != "sent":
            self.failures += 1
            self.wait_until = self.clock() + self.retry
            if self.failures == 1:
                self.log(f"the command failed ({why}); holding {len(events)} event(s),"
                         f" retrying from {self.retry:g}s, backing off to {RETRY_MAX:g}s")
            self.retry = min(RETRY_MAX, self.retry * 2)
            return False
        if self.failures:
            self.log(f"the command succeeded again after {self.failures} failed tries")
        self.failures, self.retry, self.said, self.held_quiet = 0, self.retry_first, None, False
        for ev in events:
            ev.done = True
        self.pending, self.first_at = [], None
        self.acknowledge(now=True)
        return True


def try_command(command, text, env, timeout, journal, key, ids):
    """One try of *command* with *text* on stdin under its supervisor
    (docs/files/notify-journal.md): (word, why) as the journal says them.
    SystemFailure if the journal cannot be written (then CMD is not run)."""
    r, w = os.pipe()
    try:
        pid = os.fork()
    except OSError as e:        # out of processes: a failed try, nothing ran
        os.close(r)
        os.close(w)
        return "failed", f"cannot start its supervisor: {e.strerror}"
    if pid == 0:
        try:
            os.close(r)
            _supervise(command, text, env, timeout, journal, key, ids, w)
        finally:
            os._exit(0)     # never back into the teller's loop, nor its exit handlers
    os.close(w)
    with os.fdopen(r, "rb") as f:
        said = f.read()
    os.waitpid(pid, 0)
    word, _, why = said.decode("utf-8", "replace").partition(" ")
    if word == "error":
        raise SystemFailure(why)
    if word not in ("sent", "failed", "unsure"):
        # It died without a word (killed): what it did is unknown, so in doubt.
        return "unsure", "its supervisor ended without saying how the try went"
    return word, why or None


def _supervise(command, text, env, timeout, journal, key, ids, out):
    """The try's supervisor (the forked child of try_command): says the
    outcome on *out* once it is journaled; deaf to what stops the teller."""
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)        # not the teller's input: its writer sees the teller's end as the end
    os.close(null)
    try:
        journal.record(f"sending {key} {time.time():.3f} {' '.join(ids)}")
        word, why = run_command(command, text, env, timeout)
        journal.record(f"{word} {key} {time.time():.3f}" + (f" {why}" if why else ""))
        said = f"{word} {why or ''}"
    except SystemFailure as e:
        said = f"error {e}"
    try:
        write_all(out, said.encode())
    except OSError:
        pass                # the teller is gone: the journal says it to the next one


def run_command(command, text, env, timeout):
    """Run sh -c *command* with *text* on stdin: (word, why) as the journal
    says them. In a session of its own, so a timeout kills what it started too."""
    try:
        p = subprocess.Popen(["/bin/sh", "-c", command], stdin=subprocess.PIPE,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                             start_new_session=True)
    except OSError as e:
        return "failed", f"cannot run it: {e.strerror}"
    try:
        _out, err = p.communicate(text.encode(), timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        p.communicate()
        return "unsure", f"no exit after {timeout:g}s, killed"
    if p.returncode == 0:
        return "sent", None
    said = (err or b"").decode("utf-8", "replace").strip().splitlines()
    last = f": {escape(said[-1])[:200]}" if said else ""
    if p.returncode < 0:
        return "unsure", f"signal {-p.returncode}{last}"
    return "failed", f"exit {p.returncode}{last}"
