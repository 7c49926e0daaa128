"""Fault isolation (issue 12, findings 10-12): a stuck lock holder, inotify
exhausted or missing, a watcher whose directory is replaced. Real flock(1)
holders, real stopped processes, real inotify instances, real processes."""
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys

import pytest

from conftest import REPO, cmd, make_due, wait_for
from crewfile.background import jobs
from crewfile.core import locks, paths
from crewfile.core.locks import is_held
from crewfile.core.logfile import TailStats
from crewfile.session.sessions import Session, register
from crewfile.views import timeline
from crewfile.wake import inbox
from crewfile.wake import inbox as inboxes  # the name `inbox` is a local in one test
from test_nudge import add, agent, git_repo, nudge_records

LIB = os.path.join(REPO, "lib")


def records(sess):
    return [(r.kind, r.text) for r in sess.last_records(1000, TailStats())]


class Holder:
    """`flock LOCK sleep 600`: a shell writer that hangs with the lock held."""

    def __init__(self, path):
        self.proc = subprocess.Popen(["flock", path, "sleep", "600"], start_new_session=True)
        self.path = path
        wait_for(self._held, what=f"flock(1) holding {path}")

    def _held(self):
        return is_held(self.path)

    def stop(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)     # flock(1) and the sleep holding its fd
        except ProcessLookupError:
            pass
        self.proc.wait()


@contextlib.contextmanager
def python_holding(lock_path, code):
    """`python -c CODE LOCK`, once it printed `held`: a holder flock(1) cannot be (stopped, named)."""
    proc = subprocess.Popen([sys.executable, "-c", code, lock_path], stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"held\n"
        yield proc
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
def holders():
    made = []

    def hold(path):
        h = Holder(path)
        made.append(h)
        return h
    yield hold
    for h in made:
        h.stop()


def hook(event, session, timeout=15, **fields):
    payload = {"hook_event_name": event, "session_id": "agent-1", **fields}
    return cmd("crew-hook", input=json.dumps(payload), env={"CREWFILE_SESSION": session},
               timeout=timeout)


def test_finding10_stuck_lock_hook_appends_its_records_without_it_in_order(crew, holders):
    """A hook whose session lock is held by a hung shell writer returns (well
    within Claude Code's 10 s hook timeout: the subprocess timeout fails the
    test otherwise), names the holder in one line, and loses nothing: its
    records are in the log at once, whole, in order, once; the next writer
    under the lock appends after them."""
    sess = register(crew, "a")
    holder = holders(sess.lock_path)
    out = hook("UserPromptSubmit", "a", prompt="first")
    assert out.returncode == 0
    assert f"held by pid {holder.proc.pid} (flock)" in out.stderr
    assert "without it, not rotated" in out.stderr
    assert len(out.stderr.splitlines()) == 1
    assert hook("Stop", "a").returncode == 0
    assert hook("UserPromptSubmit", "a", prompt="second").returncode == 0
    want = [("registered", "kind=crew"), ("captain", "first"), ("turn-started", ""),
            ("turn-ended", ""), ("captain", "second"), ("turn-started", "")]
    assert records(sess) == want
    holder.stop()
    sess.append("idle")
    assert records(sess) == want + [("idle", "")]


def test_nudge_tick_names_the_holder_of_a_session_lock_it_wrote_past(crew, holders):
    """nudge-tick bounds its lock waits too: a record it appends to a session's
    log past the bound, without the lock, is said in one stderr line naming
    the holder, even with --quiet (once, it was kept on the session object
    and never said)."""
    sess = register(crew, "a")
    sid = cmd("nudge-add", "--session", "a", "--every", "1m", "--message", "hi").stdout.strip()
    make_due(crew, sid)
    holder = holders(sess.lock_path)
    out = cmd("nudge-tick", "--quiet")
    assert out.returncode == 0, out.stderr
    assert out.stdout == ""
    said = out.stderr.splitlines()
    assert len(said) == 1, said
    assert said[0].startswith("nudge-tick: ") and f"held by pid {holder.proc.pid} (flock)" in said[0]
    assert said[0].endswith(f"appended to {sess.status_path} without it, not rotated")
    assert records(sess)[-1][0] == "nudge-disarmed"


def test_a_job_watcher_keeps_the_holder_of_a_lock_it_posted_past_in_its_notice(crew, holders):
    """A job's watcher bounds its wait for the owning session's lock too; it
    posts its notice without it past the bound, and having no stderr (it is
    detached) it keeps the line naming the holder in `notice` (without_lock)."""
    sess = register(crew, "w1", pid=os.getpid())
    holder = holders(sess.lock_path)
    notice = job_notice(crew, "w1")
    assert notice["posted"] is True and len(notice["without_lock"]) == 1, notice
    said = notice["without_lock"][0]
    assert f"held by pid {holder.proc.pid} (flock)" in said
    assert said.endswith(f"posted to {os.path.join(sess.dir, 'inbox')} without it")
    holder.stop()
    assert [n.id for n in inbox.pending(crew, "w1") if n.kind == "job"] == [notice["id"]]


def test_a_job_notice_posted_under_the_lock_says_nothing_of_it(crew):
    register(crew, "w1", pid=os.getpid())
    notice = job_notice(crew, "w1")
    assert notice["posted"] is True and "without_lock" not in notice


def job_notice(crew, session):
    """The `notice` of a job of *session* run to its end, once its watcher is done."""
    job = jobs.Job(crew, cmd("job-exec", "--session", session, "--", "true").stdout.strip())
    wait_for(lambda: job.notice() is not None and not job.watcher_alive(),
             what="the watcher to post its notice")
    return job.notice()


def test_finding10_stopped_holder_is_named_and_the_record_is_written(crew, tmp_path):
    sess = register(crew, "a")
    code = ("import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR);"
            " fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); os.kill(os.getpid(), 19)")
    with python_holding(sess.lock_path, code) as proc:
        out = hook("Stop", "a")
        assert out.returncode == 0
        assert f"held by pid {proc.pid} (python" in out.stderr and ", stopped)" in out.stderr
        assert records(sess)[-1] == ("turn-ended", "")


def test_finding10_a_holder_s_name_reaches_the_terminal_escaped(crew, holders):
    """A process names itself (prctl PR_SET_NAME) with a control sequence
    and holds the lock: the hook's and wake-send's line name it escaped."""
    register(crew, "boss", kind="primary")
    sess = Session(crew, "boss")
    code = ("import ctypes, fcntl, os, sys, time\n"
            "ctypes.CDLL(None).prctl(15, b'\\x1b[31mevil', 0, 0, 0)\n"
            "fd = os.open(sys.argv[1], os.O_RDWR); fcntl.flock(fd, fcntl.LOCK_EX)\n"
            "print('held', flush=True); time.sleep(600)\n")
    with python_holding(sess.lock_path, code) as proc:
        out = hook("Stop", "boss")
        assert out.returncode == 0
        assert f"held by pid {proc.pid} (\\x1b[31mevil)" in out.stderr and "\x1b" not in out.stderr
        line = "2026-11-30T10:00:00.000Z w1 turn-ended: n\n"
        out = cmd("wake-send", "boss", "--quiet", "--window", "0.01", input=line, timeout=30)
        assert out.returncode == 0
        assert f"held by pid {proc.pid} (\\x1b[31mevil)" in out.stderr and "\x1b" not in out.stderr


def test_finding10_a_stuck_lock_skips_rotation_that_once_and_closes_a_fragment(crew, holders,
                                                                              monkeypatch):
    """Rotation needs the lock: a writer that gave up waiting appends past the
    limit, and the next writer under the lock rotates. A dead writer's
    unfinished line (only a holder may cut it) is closed with a newline ahead
    of the record, which stays whole."""
    monkeypatch.setenv("CREWFILE_ROTATE_BYTES", "16384")
    sess = register(crew, "a")
    with open(sess.status_path, "ab") as f:
        f.write(b"2026-11-30T10:00:00.000Z note: " + b"x" * 16300 + b"\n")
        f.write(b"2026-11-30T10:00:01.000Z note: cut sh")       # a writer killed mid-write
    holder = holders(sess.lock_path)
    out = hook("Stop", "a")
    assert out.returncode == 0 and "not rotated" in out.stderr
    assert not os.path.exists(sess.status_path + ".1")
    with open(sess.status_path, "rb") as f:
        tail = f.read().splitlines()[-2:]
    assert tail[0] == b"2026-11-30T10:00:01.000Z note: cut sh"
    assert tail[1].endswith(b" turn-ended")
    holder.stop()
    sess.append("idle")
    assert os.path.exists(sess.status_path + ".1")
    assert [k for k, _ in records(sess)][-3:] == ["note", "turn-ended", "idle"]


def test_finding10_a_stuck_lock_leaves_the_metadata_alone_and_says_so(crew, holders):
    sess = register(crew, "a")
    holder = holders(sess.lock_path)
    out = hook("SessionStart", "a", cwd=str(crew.root), source="startup")
    assert out.returncode == 0
    assert f"held by pid {holder.proc.pid} (flock)" in out.stderr
    assert f"{sess.meta_path} not updated (agent, agent_session_id, cwd)" in out.stderr
    assert len(out.stderr.splitlines()) == 1
    assert "agent_session_id" not in Session(crew, "a").meta
    assert records(sess)[-1] == ("started", "startup")


def _live_agent(crew, tmux, name, cwd):
    return agent(crew, tmux, name, cwd=cwd)


def test_finding10_nudge_tick_skips_a_stuck_session_and_goes_on(crew, tmux, tmp_path, holders):
    # Two trees of their own (each a git top level), whatever lies above the
    # temp directory: a stray /tmp/.git made both one tree ("b refused:
    # other-session: a is live in /tmp", seen once in a loaded run).
    a, _ = _live_agent(crew, tmux, "a", git_repo(str(tmp_path / "ta")))
    b, _ = _live_agent(crew, tmux, "b", git_repo(str(tmp_path / "tb")))
    sa = add("--session", "a", "--every", "600", "--message", "go on")
    sb = add("--session", "b", "--every", "600", "--message", "go on")
    make_due(crew, sa)
    make_due(crew, sb)
    holder = holders(a.lock_path)
    out = cmd("nudge-tick", timeout=30)
    assert out.returncode == 0, out.stderr
    lines = {line.split()[1]: line for line in out.stdout.splitlines()}
    assert f"a refused: lock-stuck: {a.lock_path} is held by pid {holder.proc.pid}" in lines[sa]
    assert "b delivered" in lines[sb]
    assert nudge_records(b) == [("nudge", f"{sb} attempt 1/100: delivered")]
    assert out.stderr == ""
    assert [k for k, _ in nudge_records(a)] == ["nudge-refused"]   # written without the lock


def test_finding10_wake_send_posts_wakes_while_the_primary_lock_is_stuck(crew, holders):
    register(crew, "boss", kind="primary")
    register(crew, "w1")
    boss = Session(crew, "boss")
    holder = holders(boss.lock_path)
    lines = "".join(f"2026-11-30T10:00:0{i}.000Z w1 turn-ended: n{i}\n" for i in range(5))
    out = cmd("wake-send", "boss", "--quiet", "--window", "0.01", input=lines, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("\n") == 1 and f"held by pid {holder.proc.pid}" in out.stderr
    assert "posted to" in out.stderr and "without it" in out.stderr
    inbox = os.path.join(boss.dir, "inbox")
    texts = [line.split(" ", 3)[3] for line in open(inbox).read().splitlines()]
    assert texts == [line for line in lines.splitlines()]
    holder.stop()
    taken, garbage = inboxes.drain(crew, "boss")
    assert [n.text for n in taken] == texts and garbage == 0


# A drain stopped between its rename and its removal, and a poster that gave
# up waiting for the lock it holds: the poster's notice is never lost.
STOPPED_DRAIN = """
import os, signal, sys
sys.path.insert(0, sys.argv[2])
from crewfile.wake import inbox; from crewfile.core import paths
from crewfile.core.paths import Crew
real = inbox._whole_lines
def stop_after_the_read(path):
    data = real(path)
    if path.endswith(inbox.TAKING):
        print("read", flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)
    return data
inbox._whole_lines = stop_after_the_read
taken, _ = inbox.drain(Crew(sys.argv[1]), "boss")
print(" ".join(n.id for n in taken), flush=True)
"""


@pytest.mark.parametrize("opened_before_the_rename", [False, True])
def test_finding10_a_notice_posted_without_the_lock_survives_a_stopped_drain(
        crew, monkeypatch, opened_before_the_rename):
    """A drain holding the lock is stopped after reading what it took; a
    poster gives up waiting and appends without the lock. Its write lands in
    the new inbox, or (its descriptor opened before the drain's rename) in
    the file the drain took, which is then no longer named inbox: it posts
    again. Either way a later drain hands the notice over."""
    register(crew, "boss", kind="primary")
    first = inbox.post(crew, "boss", "wake", "before the drain")
    path = os.path.join(Session(crew, "boss").dir, "inbox")
    opened = os.open(path, os.O_RDWR | os.O_APPEND)
    if opened_before_the_rename:
        real = paths.open_file
        stale = [opened]

        def open_file(p, *a, **kw):         # the first open of the inbox: the stale one
            return os.dup(stale.pop()) if p == path and stale else real(p, *a, **kw)
        monkeypatch.setattr(paths, "open_file", open_file)
    drain = subprocess.Popen([sys.executable, "-c", STOPPED_DRAIN, crew.root, LIB],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert drain.stdout.readline() == "read\n"
        old = locks.bound_waits(0.1)
        try:
            late = inbox.post_many(crew, "boss", [("wake", None, "during the drain")])[0]
        finally:
            locks.restore_waits(old)
        notes = locks.take_notes()
        assert len(notes) == 1 and f"held by pid {drain.pid} (python" in notes[0]
        assert ", stopped)" in notes[0] and notes[0].endswith(f"posted to {path} without it")
        in_taken = b"during the drain" in os.pread(opened, 1 << 16, 0)
        assert in_taken == opened_before_the_rename
    finally:
        drain.send_signal(signal.SIGCONT)
        out, _ = drain.communicate(timeout=30)
        os.close(opened)
    assert drain.returncode == 0
    assert out.split() == [first]
    assert [n.id for n in inbox.drain(crew, "boss")[0]] == [late]
    assert not os.path.exists(path + ".taking")


def test_finding10_notices_a_drain_leaves_come_first_and_a_crashed_drain_s_are_not_lost(crew):
    """What a partial drain leaves waits in inbox.taking, ahead of what is
    posted after; an inbox.moving a drain left when it died (after its
    rename, before its append) is handed over first by the next one."""
    register(crew, "boss", kind="primary")
    path = os.path.join(Session(crew, "boss").dir, "inbox")
    ids = [inbox.post(crew, "boss", "wake", f"n{i}") for i in range(3)]
    taken, rest, garbage = inbox.drain_part(crew, "boss", lambda pending: 1)
    assert [n.id for n in taken] == ids[:1] and [n.id for n in rest] == ids[1:]
    assert not os.path.exists(path) and os.path.exists(path + ".taking")
    ids.append(inbox.post(crew, "boss", "wake", "n3"))
    assert [n.id for n in inbox.pending(crew, "boss")] == ids[1:]
    assert set(ids) <= inbox.ids(crew, "boss")
    assert len(timeline.wakes(crew, "boss", TailStats())) == 4
    # A drain that died after renaming the inbox to inbox.moving.
    with open(path, "rb") as f:
        moved = f.read()
    os.rename(path, path + ".moving")
    ids.append(inbox.post(crew, "boss", "wake", "n4"))
    assert [n.id for n in inbox.pending(crew, "boss")] == ids[1:]
    assert [n.id for n in inbox.drain(crew, "boss")[0]] == ids[1:4]    # then the new inbox
    assert not os.path.exists(path + ".moving") and moved
    assert [n.id for n in inbox.drain(crew, "boss")[0]] == ids[4:]
    assert inbox.pending(crew, "boss") == [] and inbox.drain(crew, "boss") == ([], 0)


RACE_POSTER = """
import sys
sys.path.insert(0, sys.argv[2])
from crewfile.wake import inbox; from crewfile.core import locks
from crewfile.core.paths import Crew
locks.bound_waits(0)            # one try: a busy lock means posting without it
crew, unlocked = Crew(sys.argv[1]), 0
for i in range(int(sys.argv[4])):
    inbox.post_many(crew, "boss", [("wake", f"{sys.argv[3]}-{i}", "x")])
    unlocked += bool(locks.take_notes())
print(unlocked, flush=True)
"""
RACE_DRAINER = """
import sys
sys.path.insert(0, sys.argv[2])
from crewfile.wake import inbox
from crewfile.core.paths import Crew
crew, out = Crew(sys.argv[1]), open(sys.argv[3], "w")
while sys.stdin.readline():      # one drain per line; EOF: done
    taken, rest, _ = inbox.drain_part(crew, "boss", lambda pending: (len(pending) + 1) // 2)
    out.write("".join(n.id + "\\n" for n in taken))
    out.flush()
"""


def test_finding10_posters_without_the_lock_and_drains_racing_lose_no_notice(crew, tmp_path):
    """Posters that take the lock when it is free and post without it when
    it is not, against a drainer that drains half of what waits again and
    again: every notice is handed over or still pending, none is lost."""
    register(crew, "boss", kind="primary")
    taken_path = str(tmp_path / "taken")
    drainer = subprocess.Popen([sys.executable, "-c", RACE_DRAINER, crew.root, LIB, taken_path],
                               stdin=subprocess.PIPE, text=True)
    posters = [subprocess.Popen([sys.executable, "-c", RACE_POSTER, crew.root, LIB, f"p{k}",
                                 "300"], stdout=subprocess.PIPE, text=True) for k in range(3)]
    try:
        while any(p.poll() is None for p in posters):
            drainer.stdin.write("drain\n")
            drainer.stdin.flush()
        unlocked = sum(int(p.communicate(timeout=120)[0]) for p in posters)
    finally:
        drainer.stdin.close()
        drainer.wait(timeout=120)
        for p in posters:
            p.kill()
            p.wait()
    assert all(p.returncode == 0 for p in posters) and drainer.returncode == 0
    with open(taken_path) as f:
        taken = f.read().split()
    left = [n.id for n in inbox.drain(crew, "boss")[0]]
    posted = {f"p{k}-{i}" for k in range(3) for i in range(300)}
    assert set(taken) | set(left) == posted
    print(f"{unlocked} of 900 posted without the lock; {len(taken) - len(set(taken))} repeats")


# -- finding 11: inotify exhausted or missing ------------------------------------

HOG = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
fds = []
while len(fds) < 100000:
    fd = libc.inotify_init1(os.O_CLOEXEC)
    if fd < 0:
        break
    fds.append(fd)
print(len(fds), ctypes.get_errno(), flush=True)
sys.stdin.read()
"""
HOG_LIMIT = 8


class Proc:
    """A long-running command: its stdout and stderr read line by line."""

    def __init__(self, *argv, env=None, prefix=()):
        full = dict(os.environ, **(env or {}))
        self.p = subprocess.Popen([*prefix, sys.executable, os.path.join(REPO, "bin", argv[0]),
                                   *argv[1:]],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=full)
        os.set_blocking(self.p.stdout.fileno(), False)
        os.set_blocking(self.p.stderr.fileno(), False)
        self.out, self.err = b"", b""

    def _pump(self):
        for name, f in (("out", self.p.stdout), ("err", self.p.stderr)):
            try:
                data = f.read()
            except (BlockingIOError, ValueError):
                data = None
            if data:
                setattr(self, name, getattr(self, name) + data)

    def wait_out(self, text, what=None):
        def found():
            self._pump()
            return text.encode() in self.out
        wait_for(found, what=what or f"{text!r} on stdout")

    def wait_err(self, text, what=None):
        def found():
            self._pump()
            return text.encode() in self.err
        wait_for(found, what=what or f"{text!r} on stderr")

    def running(self):
        return self.p.poll() is None

    def exit_code(self, timeout=20):
        rc = self.p.wait(timeout=timeout)
        self._pump()
        return rc

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self._pump()


@pytest.fixture
def procs():
    made = []

    def start(*argv, env=None, prefix=()):
        p = Proc(*argv, env=env, prefix=prefix)
        made.append(p)
        return p
    yield start
    for p in made:
        p.stop()


@pytest.fixture
def inotify_exhausted():
    """A user namespace whose inotify instances are all in use: its limit
    (/proc/sys/user/max_inotify_instances, per user namespace) set to
    HOG_LIMIT and every one of them taken by a child process. Commands run
    in it through the prefix this yields (nsenter); the rest of the machine
    keeps its instances."""
    hog = subprocess.Popen(["unshare", "-U", "-r", "sh", "-c",
                            f"echo {HOG_LIMIT} > /proc/sys/user/max_inotify_instances"
                            f" && exec {sys.executable} -c '{HOG}'"],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        count, err = hog.stdout.readline().split()
        assert (int(count), int(err)) == (HOG_LIMIT, 24), (count, err)   # EMFILE at the limit
        yield ["nsenter", "-t", str(hog.pid), "-U", "--preserve-credentials"]
    finally:
        hog.stdin.close()
        hog.wait()


def test_finding11_inotify_exhausted_the_watchers_poll_and_job_wait_needs_none(crew, procs, inotify_exhausted,
                                                                 tmp_path):
    register(crew, "a")
    go = tmp_path / "go"
    handle = cmd("job-exec", "--", "sh", "-c", f"while [ ! -e {go} ]; do sleep 0.05; done",
                 check=True).stdout.strip()
    try:
        _exhausted_run(crew, procs, inotify_exhausted, handle, go)
    finally:
        go.write_text("")                  # never leave the job running


def _exhausted_run(crew, procs, inotify_exhausted, handle, go):
    ns = inotify_exhausted
    probe = subprocess.run([*ns, sys.executable, "-c", "import inotify_simple as i; i.INotify()"],
                           capture_output=True, text=True)
    assert "Too many open files" in probe.stderr           # the condition is real
    wait = procs("job-wait", handle, prefix=ns)
    watch = procs("crew-watch", "--from-start", prefix=ns)
    tick = procs("nudge-tick", "--watch", prefix=ns)
    for p, name in ((watch, "crew-watch"), (tick, "nudge-tick")):
        p.wait_err(f"{name}: inotify instances are exhausted", what=f"{name}'s fallback line")
        assert b"fs.inotify.max_user_instances" in p.err and b"polling every 1 s" in p.err
        assert b"sysctl fs.inotify.max_user_instances=" in p.err
    Session(crew, "a").append("note", "heard by polling")
    watch.wait_out(" a note: heard by polling")
    sid = cmd("nudge-add", "--session", "a", "--every", "600", "--message", "hi",
              check=True).stdout.strip()
    make_due(crew, sid)
    tick.wait_out(f"{sid} a disarmed")
    go.write_text("")
    assert wait.exit_code() == 0, wait.err
    assert b"exited 0" in wait.out and wait.err == b""    # job-wait waits on a flock: no inotify
    for p in (watch, tick):
        assert p.running()
        assert p.err.count(b"\n") == 1, p.err         # said once, not once per poll


def test_finding11_inotify_simple_missing_polls(crew, procs, tmp_path):
    fake = tmp_path / "noinotify"
    fake.mkdir()
    (fake / "inotify_simple.py").write_text("raise ImportError('not here')\n")
    env = {"PYTHONPATH": str(fake)}
    register(crew, "a")
    watch = procs("crew-watch", "--from-start", env=env)
    watch.wait_err("crew-watch: inotify is not available (the inotify_simple package is not"
                   " installed); polling every 1 s instead")
    Session(crew, "a").append("note", "polled")
    watch.wait_out(" a note: polled")
    handle = cmd("job-exec", "--", "sh", "-c", "exit 3", check=True).stdout.strip()
    out = cmd("job-wait", handle, env=env)
    assert out.returncode == 3
    assert watch.running()


# -- finding 12: a watcher that goes deaf ------------------------------------------

def test_finding12_crew_directory_replaced_is_followed_and_gone_exits_6(crew, procs):
    register(crew, "a")
    watch = procs("crew-watch", "--from-start", "--probe", "0.2")
    Session(crew, "a").append("note", "before")
    watch.wait_out(" a note: before")
    os.rename(crew.root, crew.root + ".old")
    register(crew, "b")
    Session(crew, "b").append("note", "after")
    watch.wait_err("was replaced; following the new one")
    watch.wait_out(" b note: after")
    assert b" b registered: kind=crew\n" in watch.out       # the new crew from its start
    # A session directory replaced under it: followed from its first record.
    os.rename(os.path.join(crew.root, "sessions", "b"), os.path.join(crew.root, "b.old"))
    register(crew, "b")
    Session(crew, "b").append("note", "third")
    watch.wait_out(" b note: third")
    assert watch.out.count(b" b registered: kind=crew\n") == 2
    shutil.rmtree(crew.root)
    assert watch.exit_code() == 6
    assert watch.err.decode().splitlines()[-1] == (
        f"crew-watch: the crew directory {crew.root} is gone (deleted or unmounted, or its"
        " sessions/ removed); exiting so that a supervisor restarts crew-watch")


def test_finding12_nudge_watch_follows_a_replaced_crew(crew, procs):
    register(crew, "a")
    tick = procs("nudge-tick", "--watch")
    # Its first tick has begun (it takes locks/nudge-tick): by then it has
    # taken note of the directories it follows. (nudges/ alone is made
    # before that: a directory replaced in between is simply the one it
    # follows from the start, and says nothing.)
    wait_for(lambda: os.path.exists(os.path.join(crew.root, "locks", "nudge-tick")),
             what="the first tick")
    os.rename(crew.root, crew.root + ".old")
    register(crew, "a")
    tick.wait_err("nudge-tick: the crew directory", what="the replaced line")
    sid = cmd("nudge-add", "--session", "a", "--every", "600", "--message", "hi",
              check=True).stdout.strip()
    make_due(crew, sid)
    tick.wait_out(f"{sid} a disarmed")
    assert tick.running()


def test_finding11_inotify_watches_exhausted_crew_watch_polls(crew, procs):
    """One watch allowed (this user namespace's max_inotify_watches): sessions/
    takes it, session a's directory finds none left."""
    register(crew, "a")
    watch = procs("crew-watch", "--from-start", prefix=[
        "unshare", "-U", "-r", "sh", "-c",
        'echo 1 > /proc/sys/user/max_inotify_watches && exec "$0" "$@"'])
    watch.wait_err("crew-watch: inotify watches are exhausted")
    assert b"sysctl fs.inotify.max_user_watches=" in watch.err
    Session(crew, "a").append("note", "polled")
    watch.wait_out(" a note: polled")
    assert watch.err.count(b"\n") == 1 and watch.running()


# -- the job watcher: a file damaged while the job runs -----------------------------

@pytest.mark.parametrize("victim", ["spec", "output", "heard"])
def test_job_watcher_still_announces_with_a_damaged_file(crew, tmp_path, victim):
    """The watcher announces from the spec it ran, whatever the file says now."""
    register(crew, "a")
    go = tmp_path / "go"
    handle = cmd("job-exec", "--session", "a", "--", "sh", "-c",
                 f"while [ ! -e {go} ]; do sleep 0.05; done", check=True).stdout.strip()
    path = os.path.join(crew.root, "jobs", handle, victim)
    if os.path.exists(path):
        os.unlink(path)
    os.mkdir(path) if victim != "spec" else open(path, "wb").write(b'{"argv": 3')
    go.write_text("")
    inbox = os.path.join(crew.root, "sessions", "a", "inbox")
    try:
        wait_for(lambda: os.path.exists(inbox) and f"job {handle} exited 0" in open(inbox).read(),
                 what="the job's notice in a's inbox")
    except AssertionError:
        d = os.path.join(crew.root, "jobs", handle)
        raise AssertionError(f"{os.listdir(d)}; notice: {cmd('job-ls').stdout}") from None


def test_wake_send_posts_despite_a_damaged_inbox_read(crew):
    """inbox.read only serves the check for repeats: damaged, it holds nothing back."""
    register(crew, "boss", kind="primary")
    register(crew, "w1")
    os.mkdir(os.path.join(crew.root, "sessions", "boss", "inbox.read"))
    out = cmd("wake-send", "boss", "--window", "0.01",
              input="2026-11-30T10:00:00.000Z w1 done: x\n", timeout=30)
    assert out.returncode == 0, out.stderr
    assert "posting without that check" in out.stderr
    inbox = open(os.path.join(crew.root, "sessions", "boss", "inbox")).read()
    assert inbox.endswith(" 2026-11-30T10:00:00.000Z w1 done: x\n")


def test_wake_send_goes_on_when_the_primary_meta_is_damaged(crew):
    register(crew, "boss", kind="primary")
    register(crew, "w1")
    meta = os.path.join(crew.root, "sessions", "boss", "meta")
    p = subprocess.Popen([sys.executable, os.path.join(REPO, "bin", "wake-send"), "boss",
                          "--window", "0.01", "--retry", "0.1"],
                         stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        os.unlink(meta)
        os.mkdir(meta)
        p.stdin.write(b"2026-11-30T10:00:00.000Z w1 done: x\n")
        p.stdin.flush()
        inbox = os.path.join(crew.root, "sessions", "boss", "inbox")
        wait_for(lambda: os.path.exists(inbox) and "w1 done: x" in open(inbox).read(),
                 what="the wake posted")
        p.stdin.close()
        assert p.wait(timeout=30) == 0
        err = p.stderr.read().decode()
        assert err.count("not a regular file") == 1, err
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_the_ids_already_posted_are_read_under_the_inbox_lock(crew, holders):
    """wake-send's check for repeats reads the inbox's files under the
    session lock: a drain holding it is waited for (here, past the bound,
    refused and said), never read half-way through its moves."""
    register(crew, "boss", kind="primary")
    nid = inbox.post(crew, "boss", "wake", "n0")
    holders(os.path.join(Session(crew, "boss").dir, "lock"))
    with pytest.raises(locks.LockBusy, match="held by pid"):
        inbox.ids(crew, "boss", timeout=0.2)
    assert nid in [n.id for n in inbox.pending(crew, "boss")]


def test_a_drain_running_beside_the_check_for_repeats_hides_no_notice(crew):
    """A real drainer process takes the inbox again and again while this
    one posts and asks for the ids: every id posted before the question is
    in its answer (read unlocked, a notice renamed to inbox.taking after
    that file was read, and moved to inbox.read after that one was, was in
    none of them)."""
    register(crew, "boss", kind="primary")
    stop = os.path.join(crew.root, "stop-draining")
    drainer = subprocess.Popen(
        [sys.executable, "-c",
         "import os, sys\n"
         "from crewfile.core.paths import Crew\n"
         "from crewfile.wake import inbox\n"
         "crew = Crew(os.environ['CREWFILE_DIR'])\n"
         "n = 0\n"
         "while not os.path.exists(sys.argv[1]):\n"
         "    n += len(inbox.drain(crew, 'boss')[0])\n"
         "print(n)\n", stop],
        env={**os.environ, "PYTHONPATH": LIB}, stdout=subprocess.PIPE, text=True)
    posted = []
    try:
        for i in range(400):
            posted.append(inbox.post(crew, "boss", "wake", f"n{i}"))
            missing = set(posted) - inbox.ids(crew, "boss")
            assert not missing, f"round {i}: {sorted(missing)} in no file"
    finally:
        open(stop, "w").close()
        out, _ = drainer.communicate(timeout=60)
    assert drainer.returncode == 0 and int(out) > 0
