"""crew-notify: the captain told, through a real command, of what needs them.

The target is a real local HTTP receiver (http.server) reached by the
README's curl recipe; it counts arrivals per event id, as a receiver that
keeps CREWFILE_NOTIFY_IDS would."""
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conftest import BIN, wait_for
from crewfile.core import liveness, locks, records
from crewfile.asides import reports
from crewfile.core.kinds import CAPTAINS
from crewfile.crew import crewup
from crewfile.session.sessions import register
from crewfile.wake import tell
from crewfile.wake.watch import first_position
from terminal import AttachedClient

ROUTINE = ["turn-started", "turn-ended", "idle", "note", "tool", "waiting", "done", "nudge"]


class Receiver:
    """An HTTP endpoint on 127.0.0.1 that keeps every POST: its ids header,
    its 'again' header and its body. down() closes it (curl then fails to
    connect); up() opens it again on the same port. *on_post*, if set, is
    called once, at the next POST, after it is kept and before it is
    answered (curl still waiting)."""

    def __init__(self):
        self.posts = []
        self.on_post = None
        self.lock = threading.Lock()
        self.server = None
        self.port = 0
        self.up()

    def up(self):
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"] or 0)).decode()
                with outer.lock:
                    outer.posts.append((self.headers["X-Ids"].split(),
                                        self.headers["X-Again"], body))
                    hook, outer.on_post = outer.on_post, None
                if hook is not None:
                    hook()
                self.send_response(200)
                self.end_headers()

            def log_message(self, *a):
                pass
        ThreadingHTTPServer.allow_reuse_address = True
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def down(self):
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.thread.join()
            self.server = None

    def ids(self):
        with self.lock:
            return [i for ids, _, _ in self.posts for i in ids]

    def command(self):
        """The README's curl recipe (docs/notify.md), pointed here."""
        return ('curl -fsS -m 5 -H "X-Ids: $CREWFILE_NOTIFY_IDS" -H "X-Again: $CREWFILE_NOTIFY_AGAIN"'
                f' --data-binary @- http://127.0.0.1:{self.port}/')


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.down()


def notify_argv(cursor, command, *args):
    return [sys.executable, os.path.join(BIN, "crew-notify"), "--cursor", cursor,
            "--exec", command, "--retry", "0.05", *args]


def pipe(crew, cursor, command, *args, once=True, group=False):
    """crew-watch --resume C [--once] | crew-notify --cursor C ...: (watch, notify).
    *group*: crew-notify leads a process group of its own (and its tries'
    supervisors are in it), for a test that kills that group."""
    env = dict(os.environ, CREWFILE_DIR=crew.root)
    watch = subprocess.Popen([sys.executable, os.path.join(BIN, "crew-watch"), "--resume", cursor,
                              *(["--once"] if once else [])],
                             stdout=subprocess.PIPE, env=env)
    notify = subprocess.Popen(notify_argv(cursor, command, *args), stdin=watch.stdout,
                              stderr=subprocess.PIPE, env=env, text=True,
                              start_new_session=group)
    watch.stdout.close()
    return watch, notify


def finish(watch, notify, timeout=60):
    _, err = notify.communicate(timeout=timeout)
    watch.wait(timeout)
    return notify.returncode, err


def ids_of(crew, name):
    """The event ids of session *name*'s records, by crew-watch --positions."""
    p = subprocess.run([sys.executable, os.path.join(BIN, "crew-watch"), "--from-start", "--once",
                        "--positions"], env=dict(os.environ, CREWFILE_DIR=crew.root),
                       stdout=subprocess.PIPE, text=True, check=True)
    out = {}
    for line in p.stdout.splitlines():
        body, _, tok = line.partition("\t")
        t = json.loads(tok)
        if t["s"] == name:
            out.setdefault(body.split(" ", 3)[2].rstrip(":"), []).append(t["id"])
    return out



class Moment:
    """A random moment to kill crew-notify at, within how long a run lasts on
    this machine: a moment that came after the run had ended narrows the span,
    one that landed widens it again, so kills land on a fast machine and on a
    loaded one alike (a fixed span lands few kills where runs are quick)."""

    def __init__(self, rng, span=0.5):
        self.rng, self.span = rng, span

    def pick(self):
        return self.rng.uniform(0, self.span)

    def landed(self, yes):
        self.span = min(0.5, self.span * 1.1) if yes else max(0.005, self.span * 0.7)

def test_each_kind_of_captain_event_arrives_once_and_routine_never(crew, tmux, tmp_path, receiver):
    cursor = str(tmp_path / "cur")
    w = register(crew, "w1")
    a = register(crew, "a1", kind="aside")
    pane = tmux.new_window("sleep 600", name="gone")
    register(crew, "g1", tmux=pane)
    first_position(crew, cursor)
    for kind in ROUTINE:
        w.append(kind, "routine")
    w.append("paused", "awaiting captain")
    w.append("blocked", "account: usage limit reached")
    w.append("account-blocked", "rate_limit until 2026-12-02T05:00:00.000Z: limit reached")
    w.append("problem", "tests fail")
    a.append("concluded", "a1,1796040000.M000001P1Q1.host")      # appended by hand: no report
    report = reports.deliver(crew, "a1", b"the report\n")       # as aside-conclude leaves it
    a.append("concluded", report)
    a.append("error", "meta unreadable")
    tmux("kill-window", "-t", pane)
    code, err = finish(*pipe(crew, cursor, receiver.command(), "--always", "--window", "0.2"))
    assert code == 0, err
    assert err == ("crew-notify: a1: concluded not believed, not told: its text names no report"
                   " of this aside\n")
    assert len(receiver.posts) == 1
    ids, again, body = receiver.posts[0]
    assert again == "0"
    lines = body.splitlines()
    assert lines[0].startswith("crewfile: 7 events need you: ")
    got = {(ln.split(" ")[1], ln.split(" ")[2].rstrip(":")) for ln in lines[1:]}
    assert got == {("w1", "paused"), ("w1", "blocked"), ("w1", "account-blocked"),
                   ("w1", "problem"), ("a1", "concluded"), ("a1", "error"), ("g1", "lost")}
    assert {k for _, k in got} == CAPTAINS
    assert f"a1 concluded: {report}" in body                         # the report named
    assert "1796040000" not in body                 # the hand-appended one: not believed
    assert not any(k in body for k in ("routine", "turn-started"))
    assert len(ids) == len(set(ids)) == 7
    want = ids_of(crew, "w1")
    assert set(want["paused"] + want["blocked"] + want["problem"]) <= set(ids)
    # Again from the cursor: nothing is told twice, nothing new.
    w.append("turn-ended")
    code, err = finish(*pipe(crew, cursor, receiver.command(), "--always", "--window", "0"))
    assert code == 0 and err == "" and len(receiver.posts) == 1


def test_killed_at_random_with_the_receiver_down_every_event_arrives_once(crew, tmp_path,
                                                                          receiver):
    """150 trials or more: events appended, the pipe started, crew-notify SIGKILLed
    at a random moment (or let finish) until 100 kills landed, the receiver
    down for stretches; and in some trials SIGKILLed at the worst moment,
    when the receiver has the message and curl waits for its answer (until
    40 of those landed).
    Then the receiver up and one last run: every captain event has arrived
    exactly once, and no message was marked again: a kill of crew-notify
    leaves its try to the try's supervisor, which records how CMD ended."""
    cursor = str(tmp_path / "cur")
    sessions = [register(crew, f"w{i}") for i in range(3)]
    first_position(crew, cursor)
    rng = random.Random(33)
    trials, kills, down_trials = 0, 0, 0
    during = 0          # kills after which the message of the try they cut short arrived
    delivered = []      # kills at the worst moment: the message taken, not yet answered
    # Until 100 kills landed on a live crew-notify at a random moment (one
    # that ended before its moment is no kill), and 40 at the worst moment;
    # 150 trials at least; 500 at most.
    moment = Moment(rng)
    while (kills < 100 or len(delivered) < 40 or trials < 150) and trials < 500:
        trial = trials
        trials += 1
        if trial % 30 == 10:
            receiver.down()
        if trial % 30 == 22:
            receiver.up()
        down_trials += receiver.server is None
        s = rng.choice(sessions)
        s.append("turn-started")
        # Not paused: the next trial's turn-started would end it (see the
        # test of a pause answered before it is told).
        kind = rng.choice(["blocked", "problem", "concluded"])
        # a conclusion as aside-conclude leaves it: its report delivered
        s.append(kind, reports.deliver(crew, s.name, b"r\n") if kind == "concluded"
                 else f"trial {trial}")
        s.append("turn-ended")
        watch, notify = pipe(crew, cursor, receiver.command(), "--always", "--max-per-hour",
                             "1000000", "--window", rng.choice(["0", "0.05"]), "--log-quiet")
        told = None
        how = rng.random()
        if receiver.server is not None and how < 0.4:
            def worst(notify=notify):
                notify.kill()
                delivered.append(notify.pid)
            receiver.on_post = worst
        elif receiver.server is None or how < 0.9:
            try:
                notify.wait(moment.pick())
            except subprocess.TimeoutExpired:
                notify.kill()
                kills += 1
                told = len(receiver.posts)
                moment.landed(True)
            else:
                moment.landed(False)
        notify.communicate(timeout=60)      # its stderr ends with its try's supervisor
        receiver.on_post = None             # a trial that had nothing to tell
        during += told is not None and len(receiver.posts) > told
        watch.wait(60)
    if receiver.server is None:
        receiver.up()
    code, err = finish(*pipe(crew, cursor, receiver.command(), "--always", "--window", "0",
                             "--max-per-hour", "1000000"))
    assert code == 0, err
    want = set()
    for s in sessions:
        for kind, ids in ids_of(crew, s.name).items():
            if kind in CAPTAINS:
                want.update(ids)
    assert len(want) == trials
    arrived = receiver.ids()
    repeats = len(arrived) - len(set(arrived))
    marked = sum(again == "1" for _, again, _ in receiver.posts)
    print(f"{trials} trials, {kills} kills at random ({during} of them while CMD ran),"
          f" {len(delivered)} at the worst moment, {down_trials} with the receiver down,"
          f" {len(receiver.posts)} messages, {repeats} repeated arrivals, {marked} marked again")
    assert set(arrived) == want
    assert (repeats, marked) == (0, 0)
    assert kills >= 100 and len(delivered) >= 40 and down_trials >= 30
    # Once everything is told, a run from the cursor tells nothing.
    n = len(receiver.posts)
    code, err = finish(*pipe(crew, cursor, receiver.command(), "--always", "--window", "0",
                             "--max-per-hour", "1000000"))
    assert code == 0 and len(receiver.posts) == n


def journal_of(cursor):
    """The notify journal's lines, each split as [word, key, ...]."""
    with open(cursor + ".journal") as f:
        return [ln.split(" ") for ln in f.read().splitlines()]


def gone(pidfile):
    """The process whose pid *pidfile* holds has ended (reaped: it is init's orphan)."""
    st = liveness.stat(int(pidfile.read_text()))
    return st is None or st.gone


@pytest.mark.parametrize("sig,code", [(signal.SIGKILL, -signal.SIGKILL), (signal.SIGTERM, 130)])
def test_stopped_while_the_command_runs_its_supervisor_records_it(crew, tmp_path, receiver,
                                                                  sig, code):
    """CMD delivers, then waits on a gate (a flock the test holds) while
    crew-notify is SIGKILLed or SIGTERMed: crew-notify ends at once, CMD runs
    on, and the try's supervisor holds the cursor's lock until CMD ended and
    the journal says `sent`. The restart, started while CMD still runs,
    waits for that and tells nothing again (had it read the journal at once,
    the try would have been in doubt and its message sent again)."""
    cursor = str(tmp_path / "cur")
    gate = str(tmp_path / "gate")
    w = register(crew, "w1")
    first_position(crew, cursor)
    w.append("problem", "told while crew-notify dies")
    held = locks.acquire(gate)
    try:
        watch, notify = pipe(crew, cursor, receiver.command() + f" && exec flock {gate} true",
                             "--always", "--window", "0")
        wait_for(lambda: receiver.posts, what="the message")
        notify.send_signal(sig)
        assert notify.wait(30) == code
        assert locks.is_held(cursor + ".lock")      # by the supervisor, while CMD runs
        assert [ln[0] for ln in journal_of(cursor)] == ["sending"]
        again = pipe(crew, cursor, receiver.command(), "--always", "--window", "0")
    finally:
        held.release()
    assert finish(*again) == (0, "")
    finish(watch, notify)
    assert len(receiver.posts) == 1 and receiver.posts[0][1] == "0"
    (word, key, *_), (word2, key2, *_) = journal_of(cursor)
    assert (word, word2, key2) == ("sending", "sent", key)


def test_a_try_whose_supervisor_is_killed_is_told_again_marked_again(crew, tmp_path, receiver):
    """crew-notify's whole process group SIGKILLed (the teller and its try's
    supervisor) after CMD delivered and while it still runs: nothing recorded
    how the try ended, so the restart gives its events again, with the same
    ids, marked CREWFILE_NOTIFY_AGAIN=1; and once that try is sent, never again."""
    cursor = str(tmp_path / "cur")
    gate = str(tmp_path / "gate")
    pidfile = tmp_path / "cmd.pid"
    w = register(crew, "w1")
    first_position(crew, cursor)
    w.append("blocked", "account: usage limit reached")
    held = locks.acquire(gate)
    try:
        watch, notify = pipe(crew, cursor, f"echo $$ > {pidfile}; " + receiver.command()
                             + f" && exec flock {gate} true", "--always", "--window", "0",
                             group=True)
        wait_for(lambda: receiver.posts, what="the message")
        os.killpg(notify.pid, signal.SIGKILL)
        assert notify.wait(30) == -signal.SIGKILL
    finally:
        held.release()
    wait_for(lambda: gone(pidfile), what="the orphaned command's end")
    finish(watch, notify)
    assert not locks.is_held(cursor + ".lock")
    assert [ln[0] for ln in journal_of(cursor)] == ["sending"]
    assert finish(*pipe(crew, cursor, receiver.command(), "--always", "--window", "0")) == (0, "")
    assert len(receiver.posts) == 2
    (ids1, again1, body1), (ids2, again2, body2) = receiver.posts
    assert (ids2, again1, again2, body2) == (ids1, "0", "1", body1) and len(ids1) == 1
    assert [ln[0] for ln in journal_of(cursor)] == ["sending", "sending", "sent"]
    assert finish(*pipe(crew, cursor, receiver.command(), "--always", "--window", "0")) == (0, "")
    assert len(receiver.posts) == 2


def test_killed_with_its_supervisor_at_random_only_a_marked_message_repeats(crew, tmp_path,
                                                                           receiver):
    """60 trials or more, until 40 kills landed: crew-notify's whole process
    group SIGKILLed at a random moment (or let finish). A try cut short may repeat its events, but only
    in a message marked again: each id arrives once unmarked at most (the
    orphaned CMD may arrive after the try that repeats it), and every event
    arrives."""
    cursor = str(tmp_path / "cur")
    pids = tmp_path / "cmd.pids"
    sessions = [register(crew, f"w{i}") for i in range(3)]
    first_position(crew, cursor)
    rng = random.Random(3333)
    command = f"echo $$ >> {pids}; exec " + receiver.command()
    trials, kills = 0, 0
    moment = Moment(rng)
    while (kills < 40 or trials < 60) and trials < 200:
        trial = trials
        trials += 1
        s = rng.choice(sessions)
        s.append("problem", f"trial {trial}")
        watch, notify = pipe(crew, cursor, command, "--always", "--window", "0",
                             "--max-per-hour", "1000000", "--log-quiet", group=True)
        if rng.random() < 0.8:
            try:
                notify.wait(moment.pick())
            except subprocess.TimeoutExpired:
                os.killpg(notify.pid, signal.SIGKILL)
                kills += 1
                moment.landed(True)
            else:
                moment.landed(False)
        finish(watch, notify)
    assert finish(*pipe(crew, cursor, command, "--always", "--window", "0",
                        "--max-per-hour", "1000000")) == (0, "")
    wait_for(lambda: all(st is None or st.gone for st in map(liveness.stat, map(
        int, pids.read_text().split()))), what="every orphaned command's end")
    want = {i for s in sessions for i in ids_of(crew, s.name).get("problem", [])}
    assert len(want) == trials
    arrived = receiver.ids()
    unmarked = [i for ids, again, _ in receiver.posts if again == "0" for i in ids]
    marked = sum(again == "1" for _, again, _ in receiver.posts)
    repeats = len(arrived) - len(set(arrived))
    print(f"{trials} trials, {kills} group kills, {len(receiver.posts)} messages, {repeats} repeated"
          f" arrivals, {marked} messages marked again")
    assert set(arrived) == want
    assert len(unmarked) == len(set(unmarked))
    assert kills >= 40


@pytest.mark.parametrize("first,again,outcome", [("sleep 600", "1", "unsure"),
                                                 ("exit 7", "0", "failed")])
def test_a_retry_is_marked_again_only_when_the_try_may_have_told(crew, tmp_path, first, again,
                                                                 outcome):
    """A CMD killed at --timeout may have delivered (curl's receiver took it,
    its answer late): the retry says so. One that exited non-zero said it
    did not: its retry is not marked."""
    cursor = str(tmp_path / "cur")
    out = tmp_path / "out"
    flag = tmp_path / "tried"
    w = register(crew, "w1")
    first_position(crew, cursor)
    w.append("problem", "x")
    cmd = (f'echo "$CREWFILE_NOTIFY_AGAIN" >> {out};'
           f' if [ ! -e {flag} ]; then : > {flag}; {first}; fi')
    code, err = finish(*pipe(crew, cursor, cmd, "--always", "--window", "0", "--timeout", "0.5",
                             "--retry", "0.01"))
    assert code == 0, err
    assert out.read_text() == f"0\n{again}\n"
    lines = journal_of(cursor)
    assert [ln[0] for ln in lines] == ["sending", outcome, "sending", "sent"]
    assert lines[0][3:] == lines[2][3:] and len(lines[0][3:]) == 1


def test_a_journal_past_4000_lines_keeps_its_newest_2000(tmp_path):
    """notify-journal.md's cleanup: the older ids are behind the cursor. A
    line torn by a crash (its time not a number) is skipped."""
    path = tmp_path / "cursor.journal"
    path.write_text("sent k0 1.0" + "0" * 10 + "torn\n" + "".join(f"sending k{i} 1.000 id{i}\nsent k{i} 1.000\n" for i in range(2001)))
    journal = tell.Journal(str(path))
    assert "id2000" in journal.sent
    lines = path.read_text().splitlines()
    assert len(lines) == 2000 and lines[-1] == "sent k2000 1.000"


def test_a_burst_of_500_is_one_message(crew, tmp_path, receiver):
    cursor = str(tmp_path / "cur")
    sessions = [register(crew, f"w{i}") for i in range(5)]
    first_position(crew, cursor)
    for n in range(500):
        sessions[n % 5].append("problem", f"burst {n}")
    code, err = finish(*pipe(crew, cursor, receiver.command(), "--always", "--window", "1"))
    assert code == 0, err
    assert len(receiver.posts) == 1
    ids, _, body = receiver.posts[0]
    assert len(set(ids)) == len(ids) == 500
    lines = body.splitlines()
    assert lines[0] == ("crewfile: 500 events need you: w0 problem, w1 problem, w2 problem"
                        " and 2 more")
    assert len(lines) == 1 + tell.SHOWN + 1 and lines[-1] == f"... and {500 - tell.SHOWN} more"


def test_a_burst_of_500_past_the_ceiling_is_told_once_when_there_is_room(crew, tmp_path,
                                                                       receiver):
    """Ten bursts of 50 (each one append): three messages (the ceiling), the
    other seven bursts held, unacknowledged, and told in one message by the
    next run with room; every one of the 500 exactly once."""
    cursor = str(tmp_path / "cur")
    w = register(crew, "w1")
    first_position(crew, cursor)
    watch, notify = pipe(crew, cursor, receiver.command(), "--always", "--window", "0.5",
                         "--max-per-hour", "3", once=False)
    try:
        for burst in range(10):
            w.append_lines([records.new_line("problem", f"burst {burst} event {n}")
                            for n in range(50)])
            if burst < 3:
                wait_for(lambda: len(receiver.ids()) == 50 * (burst + 1),
                         what=f"burst {burst} told")
        line = notify.stderr.readline()
        assert line.startswith("crew-notify: holding "), line
        assert "(the ceiling)" in line
    finally:
        notify.send_signal(signal.SIGTERM)
        watch.send_signal(signal.SIGTERM)
        notify.wait(30)
        watch.wait(30)
        notify.stderr.close()
    assert len(receiver.posts) == 3
    code, err = finish(*pipe(crew, cursor, receiver.command(), "--always", "--window", "1",
                             "--max-per-hour", "4"))
    assert code == 0, err
    assert len(receiver.posts) == 4
    ids = receiver.ids()
    assert len(ids) == len(set(ids)) == 500
    assert receiver.posts[3][2].splitlines()[0].startswith("crewfile: 350 events need you: ")


def test_the_ceiling_holds_the_rest_unacknowledged(crew, tmp_path, receiver):
    cursor = str(tmp_path / "cur")
    w = register(crew, "w1")
    first_position(crew, cursor)
    for burst in range(2):
        w.append("problem", f"burst {burst}")
        code, err = finish(*pipe(crew, cursor, receiver.command(), "--always", "--window", "0",
                                 "--max-per-hour", "2"))
        assert code == 0 and err == ""
    assert len(receiver.posts) == 2
    for n in range(3):
        w.append("blocked", f"over the ceiling {n}")
    watch, notify = pipe(crew, cursor, receiver.command(), "--always", "--window", "0",
                         "--max-per-hour", "2", once=False)
    line = notify.stderr.readline()
    assert line.startswith("crew-notify: holding 3 event(s): 2 messages in the last hour"
                           " (the ceiling), for "), line
    notify.send_signal(signal.SIGTERM)
    watch.send_signal(signal.SIGTERM)
    assert notify.wait(30) == 130 and watch.wait(30) in (0, 130, 143)
    notify.stderr.close()
    assert len(receiver.posts) == 2
    # Held, never acknowledged: with room again, the three arrive in one message.
    code, err = finish(*pipe(crew, cursor, receiver.command(), "--always", "--window", "0",
                             "--max-per-hour", "3"))
    assert code == 0, err
    assert len(receiver.posts) == 3 and len(receiver.posts[2][0]) == 3
    assert "over the ceiling 2" in receiver.posts[2][2]


def test_quiet_hours_hold_then_one_summary(crew, tmp_path, receiver):
    cursor = str(tmp_path / "cur")
    w = register(crew, "w1")
    first_position(crew, cursor)
    wait_for(lambda: time.gmtime().tm_sec < 50, timeout=15, what="room before the next minute")
    ends_at = (int(time.time()) // 60 + 1) * 60
    now = time.gmtime(ends_at - 60)
    start = (now.tm_hour * 60 + now.tm_min - 5) % 1440
    end = (now.tm_hour * 60 + now.tm_min + 1) % 1440
    quiet = f"{start // 60:02d}:{start % 60:02d}-{end // 60:02d}:{end % 60:02d}"
    env_tz = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    try:
        watch, notify = pipe(crew, cursor, receiver.command(), "--always", "--window", "0",
                             "--quiet", quiet, once=False)
        for n in range(3):
            w.append("problem", f"at night {n}")
        line = notify.stderr.readline()
        assert line.startswith("crew-notify: holding "), line
        assert len(receiver.posts) == 0
        wait_for(lambda: receiver.posts, timeout=90, what="the summary after quiet hours")
        assert time.time() >= ends_at           # told only once quiet hours ended
    finally:
        if env_tz is None:
            os.environ.pop("TZ")
        else:
            os.environ["TZ"] = env_tz
        notify.send_signal(signal.SIGTERM)
        watch.send_signal(signal.SIGTERM)
        notify.wait(30)
        watch.wait(30)
        notify.stderr.close()
    assert len(receiver.posts) == 1
    ids, _, body = receiver.posts[0]
    assert len(ids) == 3
    assert body.splitlines()[0] == ("crewfile: 3 events need you: w1 problem"
                                    " (held through quiet hours)")


def test_input_holds_the_notification_and_idle_sends_it(crew, tmp_path, receiver, tmux):
    """A real client attached through a pty: its key input in the last
    minute (--away 1m) holds the message, unacknowledged; a restart with
    --away 5 holds it too while the input is newer than that, and sends it
    once the input is older."""
    cursor = str(tmp_path / "cur")
    tmux.new_window("sleep 600", name="captain")
    client = AttachedClient(tmux)
    try:
        w = register(crew, "w1")
        first_position(crew, cursor)
        watch, notify = pipe(crew, cursor, receiver.command(), "--window", "0", "--away", "1m",
                             once=False)
        try:
            client.type_after(time.time() - 1, "x")
            w.append("paused", "awaiting captain")
            line = notify.stderr.readline()
            assert line.startswith("crew-notify: holding 1 event(s): the captain is at a terminal"
                                   " (key input "), line
        finally:
            notify.send_signal(signal.SIGTERM)
            watch.send_signal(signal.SIGTERM)
            assert notify.wait(30) == 130
            watch.wait(30)
            notify.stderr.close()
        assert receiver.posts == []
        client.type_after(time.time() - 1, "y")     # before the restart: its replay is held
        pressed = client.activity()
        watch, notify = pipe(crew, cursor, receiver.command(), "--window", "0", "--away", "5",
                             once=False)
        try:
            wait_for(lambda: receiver.posts, timeout=30, what="the message once idle")
            # It went only once the newest input was older than --away.
            assert client.activity() == pressed
            assert time.time() >= pressed + 5
        finally:
            notify.send_signal(signal.SIGTERM)
            watch.send_signal(signal.SIGTERM)
            notify.wait(30)
            watch.wait(30)
            err = notify.stderr.read()
            notify.stderr.close()
        assert err.startswith("crew-notify: holding 1 event(s): the captain is at a terminal"
                              " (key input "), err
    finally:
        client.close()
    assert len(receiver.posts) == 1 and "w1 paused: awaiting captain" in receiver.posts[0][2]


def test_a_failing_command_is_said_once_and_retried(crew, tmp_path):
    cursor = str(tmp_path / "cur")
    flag = tmp_path / "ok"
    out = tmp_path / "out"
    w = register(crew, "w1")
    first_position(crew, cursor)
    w.append("problem", "x")
    cmd = f'test -e {flag} || {{ echo "no route" >&2; exit 7; }}; cat >> {out}'
    watch, notify = pipe(crew, cursor, cmd, "--always", "--window", "0", "--retry", "0.01")
    line = notify.stderr.readline()
    assert line == ("crew-notify: the command failed (exit 7: no route); holding 1 event(s),"
                    " retrying from 0.01s, backing off to 300s\n")
    flag.write_text("")
    code, err = finish(watch, notify)
    assert code == 0
    assert err.startswith("crew-notify: the command succeeded again after ")
    assert err.count("\n") == 1
    assert out.read_text().count("w1 problem: x") == 1


def test_a_command_past_its_timeout_is_killed_and_retried(crew, tmp_path):
    cursor = str(tmp_path / "cur")
    out = tmp_path / "out"
    w = register(crew, "w1")
    first_position(crew, cursor)
    w.append("problem", "slow")
    cmd = f'if [ -e {out} ]; then cat >> {out}; else : > {out}; sleep 600; fi'
    code, err = finish(*pipe(crew, cursor, cmd, "--always", "--window", "0", "--timeout", "0.5",
                             "--retry", "0.01"))
    assert code == 0
    assert err.startswith("crew-notify: the command failed (no exit after 0.5s, killed)")
    assert out.read_text().count("w1 problem: slow") == 1


@pytest.mark.parametrize("args,why", [
    ([], "crew-notify: missing --exec CMD\nTry 'crew-notify --help'.\n"),
    (["--exec", "true", "--quiet", "22-07"],
     "crew-notify: bad --quiet '22-07': HH:MM-HH:MM such as 22:00-07:00\n"),
    (["--exec", "true", "--quiet", "07:00-07:00"],
     "crew-notify: bad --quiet '07:00-07:00': the start and the end are the same\n"),
    (["--exec", "true", "--max-per-hour", "0"],
     "crew-notify: bad --max-per-hour '0': a whole number from 1 to 1000000 (ASCII digits only)\n"),
])
def test_usage_errors(run, args, why):
    p = run("crew-notify", *args, input="")
    assert (p.returncode, p.stderr) == (2, why)


def test_a_crew_directory_others_can_write_is_refused(crew, run):
    crew.ensure()
    os.chmod(crew.root, 0o777)
    try:
        p = run("crew-notify", "--exec", "true", input="")
    finally:
        os.chmod(crew.root, 0o700)
    assert (p.returncode, p.stderr) == (1, f"crew-notify: crew directory not trusted: {crew.root}"
                                           f" is writable by group or others (fix: chmod go-w {crew.root})\n")


def test_quiet_hours_across_midnight():
    q = tell.parse_quiet("22:00-07:00")
    assert q == (1320, 420)
    os.environ["TZ"] = "UTC"
    try:
        time.tzset()
        at = time.mktime((2026, 12, 2, 23, 30, 0, 0, 0, 0)) - time.timezone
        assert tell.quiet_left(q, at) == 7.5 * 3600
        assert tell.quiet_left(q, at + 9 * 3600) == 0
    finally:
        os.environ.pop("TZ")
        time.tzset()


def test_crew_up_runs_the_notify_stage(crew, tmp_path):
    out = tmp_path / "told"
    register(crew, "boss", kind="primary")
    w = register(crew, "w1")
    log = open(tmp_path / "crew-up.out", "ab")
    proc = subprocess.Popen([sys.executable, os.path.join(BIN, "crew-up"), "boss",
                             "--notify", f"cat >> {out}", "--notify-with", "--always --window 0"],
                            env={**os.environ, "CREWFILE_DIR": crew.root}, stdout=log, stderr=log)
    try:
        wait_for(lambda: (crewup.read_state(crew).get("stages") or {}).get("notify", {})
                 .get("running"), what="the notify stage")
        w.append("turn-ended")
        w.append("blocked", "account: out of credit")
        wait_for(lambda: out.exists() and "blocked" in out.read_text(), what="the message")
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        log.close()
    text = out.read_text()
    assert text.splitlines()[1].endswith("w1 blocked: account: out of credit")
    assert "turn-ended" not in text


def test_a_pause_answered_before_it_is_told_is_not_told(crew, tmp_path):
    """The captain answered (or typed into the aside they just opened): the
    pause is over before it went, so it never goes; a problem still does."""
    cursor = str(tmp_path / "cur")
    out = tmp_path / "out"
    w = register(crew, "w1")
    a = register(crew, "a1", kind="aside")
    first_position(crew, cursor)
    w.append("paused", "awaiting captain")
    w.append("idle")                    # still waiting
    w.append("problem", "y")            # still waiting, and a problem besides
    w.append("captain", "go on")
    w.append("turn-started")
    a.append("paused", "awaiting captain")
    a.append("problem", "x")
    code, err = finish(*pipe(crew, cursor, f"cat >> {out}", "--always", "--window", "1"))
    assert code == 0 and err == ""
    lines = out.read_text().splitlines()
    assert lines[0].startswith("crewfile: 3 events need you: ")
    # Positioned events keep each session's order, not the crew's.
    assert sorted(ln.split(" ", 1)[1] for ln in lines[1:]) == [
        "a1 paused: awaiting captain", "a1 problem: x", "w1 problem: y"]


def test_crew_up_systemd_unit_keeps_the_notify_command_for_its_shell(crew, run):
    cmd = 'curl -fsS -H "Title: $CREWFILE_NOTIFY_TITLE" --data-binary @- https://ntfy.sh/x%20y'
    p = run("crew-up", "boss", "--systemd", "--notify", cmd, "--notify-with", "--always")
    assert p.returncode == 0, p.stderr
    start = [ln for ln in p.stdout.splitlines() if ln.startswith("ExecStart=")][0]
    assert start.endswith(" --notify 'curl -fsS -H \"Title: $$CREWFILE_NOTIFY_TITLE\""
                          " --data-binary @- https://ntfy.sh/x%%20y' --notify-with --always")


def test_crew_up_notify_usage(run):
    p = run("crew-up", "boss", "--notify-with", "--always")
    assert (p.returncode, p.stderr) == (2, "crew-up: --notify-with needs --notify CMD\n"
                                           "Try 'crew-up --help'.\n")
    p = run("crew-up", "boss", "--notify", "true", "--notify-with", "--cursor x")
    assert (p.returncode, p.stderr) == (2, "crew-up: bad --notify-with: --exec and --cursor"
                                           " are crew-up's to give\n")
