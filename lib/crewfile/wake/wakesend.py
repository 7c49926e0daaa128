"""wake-send: wakes (the lines wake-filter kept) posted to the primary's
inbox, acknowledged to crew-watch's cursor, and announced in its pane.

Each chunk's wakes are posted in one append before the next read (stream.run).
"""
import time

from crewfile.core import locks
from crewfile.core.errors import CrewfileError, NotFound
from crewfile.core.names import check_name
from crewfile.core.text import escape
from crewfile.session import delivery
from crewfile.session.delivery import UNCONFIRMED
from crewfile.session.sessions import Session
from crewfile.wake import announce, cursors, inbox, stream
from crewfile.wake.words import DEFAULT_SAY

DEFAULT_WINDOW = 0.5
DEFAULT_RETRY = 2.0
# The cursor is written at most this long after the first wake it covers was
# posted, not after every chunk: its write (the whole crew's positions, fsync)
# must not stand between the next append and its wake. What a crash loses of
# it is replayed, and recognised by id.
ACK_DELAY = 0.2
MAX_HELD = 10000            # wakes held in memory before input is no longer read
MAX_TEXT = 8192             # a notice must stay within one record


class Sender(stream.Taker):
    """Post wakes to the primary's inbox; acknowledge them; announce bursts in its pane.
    wake(line) takes one input line; flush() posts what was taken in one
    append, and only then is its position acknowledged: a restart never
    resumes past a wake that is not in the inbox. tick(), when due(), types
    the announcement. What is held, retried and said: wake-send.md."""

    def __init__(self, crew, primary, window=DEFAULT_WINDOW, retry=DEFAULT_RETRY, say=DEFAULT_SAY,
                 log=None, clock=None, deliver=None, warn=None, cursor=None, host=None):
        check_name(primary)
        self.crew = crew
        self.host = host            # the events come from this host's crew (see wake())
        self.sess = Session(crew, primary)
        self.primary = primary
        self.window, self.retry, self.say = window, retry, say
        self.log = log or (lambda msg: None)
        self.warn = warn or self.log
        self.stuck = False          # the primary's lock was stuck at the last post
        self.clock = clock or time.monotonic
        self.deliver = deliver or delivery.deliver
        self.due_at = None          # when to try to announce; None: nothing to announce
        self.retry_at = None        # when to try flush() again; None: nothing held
        self.ack_at = None          # when to write the cursor; None: nothing to acknowledge
        self.announced = set()      # ids of wake notices already announced
        self.seen = set()           # the wakes waiting at the last announcement
        self.held = []              # [(id or None, text)] not yet in the inbox
        # session -> the newest state to acknowledge once held is posted: one
        # per session however many lines a backlog brings
        self.acks = {}
        self.cursor = cursor
        self.known = None           # (id, text) found in the inbox before our first post
        self.said = {}              # topic -> the state last logged
        self.acked = cursors.acked(cursor) if cursor else {}

    def say_once(self, topic, state, msg):
        """Log *msg* if *topic*'s state changed since it was last logged; "ok"
        (working again) only once something else was."""
        if self.said.get(topic, "ok") != state:
            self.said[topic] = state
            self.log(msg)

    def wake(self, line):
        """Take one input line (str, no newline); flush() posts it."""
        body, eid, sname, state = stream.position(line, self.log)
        if state is not None and self.cursor:
            cursors.keep_newer(self.acks, sname, state)
        if not body:
            return
        name = body.split(" ", 2)[1] if body.count(" ") >= 2 else ""
        if self.host:
            # Another machine's crew: its session names (and ids) qualified by
            # host, so its w1 is never ours, nor ever taken for the primary.
            if name:
                ts, _, rest = body.partition(" ")
                body = f"{ts} {self.host}:{rest}"
            if eid is not None:
                eid = f"{self.host}:{eid}"
        elif name == self.primary:
            return              # the primary's own events never wake it
        if len(body) > MAX_TEXT:
            body = body[:MAX_TEXT] + " [cut]"
        self.held.append((eid, body))

    def holding(self):
        """True if so many wakes wait for the inbox that input should not be read."""
        return len(self.held) >= MAX_HELD

    def flush(self):
        """Post the held wakes, then acknowledge; True if nothing is left held."""
        if self.held:
            try:
                if self.known is None:
                    try:
                        self.known = inbox.posted(self.crew, self.primary, announce.LOCK_WAIT)
                    except NotFound:
                        raise
                    except CrewfileError as e:
                        # Only the check for repeats needs those files: a damaged
                        # inbox.read must not hold every wake back.
                        self.say_once("ids", "damaged", f"cannot read the notices {self.primary}"
                                      f" already has ({e}); posting without that check")
                        self.known = set()
                # A repeat is the same event again: its id and its text. An id
                # alone recurs once a rotated log's inode is reused.
                fresh = [("wake", eid, text) for eid, text in self.held
                         if eid is None or (eid, text) not in self.known]
                if fresh:
                    self._post(fresh)
            except NotFound:
                self.say_once("inbox", "absent", f"{self.primary} is not registered; holding"
                              f" {len(self.held)} wake(s) until it is")
                self.retry_at = self.clock() + self.retry
                return False
            except CrewfileError as e:
                self.say_once("inbox", "failing", f"cannot post to {self.primary}'s inbox ({e});"
                              f" holding {len(self.held)} wake(s), retrying")
                self.retry_at = self.clock() + self.retry
                return False
            self.say_once("inbox", "ok", f"posting to {self.primary}'s inbox again")
            self.held = []
            if fresh and self.due_at is None:
                self.due_at = self.clock() + self.window
        self.retry_at = None
        if self.acks and self.ack_at is None:
            self.ack_at = self.clock() + ACK_DELAY
        return True

    def _post(self, fresh):
        old = locks.bound_waits(0 if self.stuck else announce.LOCK_WAIT)
        try:
            inbox.post_many(self.crew, self.primary, fresh)
        finally:
            locks.restore_waits(old)
        notes = locks.take_notes()
        if notes:
            if not self.stuck:
                self.warn(notes[-1])
            self.stuck = True
        elif self.stuck:
            self.stuck = False
            self.warn(f"{self.primary}'s lock is free again; posting under it")

    def acknowledge(self):
        """Write the cursor for everything posted so far (see ACK_DELAY); not
        while wakes are held (their acknowledgements wait for them)."""
        self.ack_at = None
        if not self.acks or self.held:
            return
        acked = dict(self.acked)
        for sname, state in self.acks.items():
            cursors.keep_newer(acked, sname, state)
        try:
            cursors.write(self.cursor, acked)
        except CrewfileError as e:
            # A full disk must not stop the wakes: the positions wait here
            # and are written later; a restart meanwhile replays from the
            # older cursor, and the inbox's ids tell the repeats.
            self.say_once("cursor", "failing", f"{e}; keeping the position, retrying")
            self.ack_at = self.clock() + self.retry
            return
        self.say_once("cursor", "ok", f"writing {self.cursor} again")
        self.acked, self.acks = acked, {}

    done = acknowledge      # stopped or at the end: the acks of wakes still held are replayed

    def due(self, eof=False):
        """When tick() or flush() wants to run next (monotonic), or None."""
        if eof and not self.held:
            return None         # all posted: step() has made the last announcement
        times = [t for t in (self.due_at, self.retry_at, self.ack_at) if t is not None]
        return min(times) if times else None

    # -- the input loop (stream.run) ---------------------------------------
    def take_all(self, lines):
        for raw in lines:
            if raw:
                self.wake(raw.decode("utf-8", "replace"))
        self.flush()

    def step(self, eof=False):
        """What is due; at the end of input, post what is held (retrying
        while the primary cannot take it), then one last announcement."""
        now = self.clock()
        if self.retry_at is not None and now >= self.retry_at:
            self.flush()
        if self.ack_at is not None and (now >= self.ack_at or eof):
            self.acknowledge()
        if self.due_at is not None and (now >= self.due_at or (eof and not self.held)):
            if eof and now < self.due_at:
                time.sleep(self.due_at - now)
            self.tick()

    def tick(self):
        """Announce what waits, if the primary can take it now. True if typed."""
        self.due_at = None
        if self._unannounced() is None:
            return False
        try:
            decision = announce.deciding(self.sess)
        except CrewfileError as e:
            return self._cannot(e)
        if decision is None:        # the other path is deciding: what it records decides
            self.due_at = self.clock() + self.retry
            return False
        with decision:
            # Decided and recorded under announce.lock: the waiter, deciding
            # next, sees what was typed, though deliver.lock is let go before
            # the record is made (and before the typed turn's record comes).
            found = self._unannounced()         # afresh, under the lock
            return found is not None and self._type(*found)

    def _unannounced(self):
        """(the wakes waiting, their ids, those of them to announce), or None
        when there is nothing to announce now (due_at says when to look again)."""
        try:
            waiting, told = announce.waiting_wakes(self.sess)
        except NotFound:
            return None             # flush() says so; nothing can be waiting
        except CrewfileError as e:
            self._cannot(e)
            return None
        ids = {n.id for n in waiting}
        self.announced |= ids & told
        fresh = [n for n in waiting if n.id not in self.announced]
        self.announced &= ids
        # The primary's hook took part of what was announced and left the rest
        # (more than it can show in one turn): announce the rest once more.
        partly = bool(waiting) and ids < self.seen
        if not fresh and not partly:
            if waiting:
                self.due_at = self.clock() + self.retry     # watch for a partial take
            return None
        return waiting, ids, fresh

    def _type(self, waiting, ids, fresh):
        """Type the announcement unless the waiter is armed; record it. True if typed."""
        if announce.armed(self.sess):
            # Its waiter announces them, with no keystroke; if it ends first
            # (timed out, killed, the session cleared), typing takes over.
            self.due_at = self.clock() + self.retry
            self.say_once("announce", "armed", f"{self.primary}'s keystroke-free wake is armed:"
                                               f" it announces {len(fresh)} wake(s)")
            return False
        text = message(waiting, self.say, self.primary)
        try:
            ok, reason = self.deliver(self.sess, text)
        except CrewfileError as e:  # a damaged meta or inbox: said once, tried again
            return self._cannot(e)
        self.due_at = self.clock() + self.retry
        if ok or reason.code == UNCONFIRMED:
            # Unconfirmed: Enter was pressed and the prompt line cleared, but no
            # turn-started came. Not announced again (it may have been taken
            # late); the wakes stay in the inbox for its next turn's hook.
            self.announced |= ids
            self.seen = ids
            try:
                announce.mark(self.sess, ids, 0 if self.stuck else announce.LOCK_WAIT)
            except CrewfileError as e:   # typed all the same; the waiter may say it again
                self.say_once("mark", "failing", f"cannot record the announcement ({e})")
            self.said.pop("announce", None)
            self.log(f"announced {len(waiting)} wake(s) to {self.primary}: {text}" if ok else
                     f"announced {len(waiting)} wake(s) to {self.primary}, unconfirmed"
                     f" ({reason.detail}); they stay in its inbox: {text}")
        else:
            self.say_once("announce", reason.code,
                          f"holding the announcement of {len(fresh)} wake(s) for {self.primary}"
                          f" (they are in its inbox): {reason}")
        return ok

    def _cannot(self, err):
        """A file of the primary's is damaged: keep going, say so once, retry."""
        self.due_at = self.clock() + self.retry
        self.say_once("announce", "damaged", f"cannot announce to {self.primary} ({err});"
                      f" the wakes stay in its inbox; retrying every {self.retry:g} s")
        return False


def message(waiting, say, primary):
    """The announcement of the wake notices *waiting*: *say* filled in (see
    --say), every name escaped and short."""
    # Whatever a line named as its session is typed into the pane: escaped
    # (no control character reaches the keys), and short.
    names = (n.text.split(" ", 2)[1] if " " in n.text else "" for n in waiting)
    senders = list(dict.fromkeys(escape(name)[:40] or "?" for name in names))
    shown = ", ".join(senders[:5]) + (f" and {len(senders) - 5} more" if len(senders) > 5 else "")
    n = len(waiting)
    return say.format(n=f"{n} wake{'s' if n != 1 else ''}", count=n, primary=primary,
                      **{"from": shown})
