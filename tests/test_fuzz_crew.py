"""One bad file never silences the crew (issue 12, "What it must show").

A crew of several sessions, with schedules, a finished job, a report, a
cursor and long-running watchers. Each example damages one file of the
protocol (arbitrary bytes, valid JSON of the wrong shape, a cut-off copy,
empty, a symlink, a directory, a FIFO, no permissions), runs every command
against it, then puts the file back. Invariants:

- no traceback, ever; every exit code is a documented one;
- no command names the damaged file on more than one line (not once per
  record, not once per poll);
- every record of every good session still comes out of
  `crew-watch --from-start --once | wake-filter`;
- the long-running commands (crew-watch | wake-filter | wake-send, and
  nudge-tick --watch) are still running at the end, and said each bad file
  a bounded number of times.

Commands run in a forked child of this process (the command layer exactly
as bin/ runs it, without the interpreter's start-up per command), each
with a deadline: a command that hangs (a FIFO opened for reading) fails the
test. CREWFILE_FUZZ_EXAMPLES sets the number of examples (default 30); the
number run is printed.
"""
import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
import time
import traceback

from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import BIN, bound_by_modes, cmd, drop_mode_overrides, wait_for
from crewfile import cli
from crewfile.asides import reports
from crewfile.session.sessions import Session, register

EXAMPLES = int(os.environ.get("CREWFILE_FUZZ_EXAMPLES", "30"))
CODES = {0, 1, 2, 3, 4, 5, 6, 111}
JOB_WAIT_CODES = {0, 122, 124, 125}
GOOD_KINDS = ("done", "blocked", "problem")     # each passes wake-filter for a crew session
SESSIONS = ("a", "b", "c")
SEEDS = 4


def run_forked(name, argv, stdin=b"", env=None, timeout=30):
    """Run command NAME as bin/NAME would, in a forked child: (rc, out, err)."""
    module = __import__(f"crewfile.cmd.{name.replace('-', '_')}", fromlist=["run"])
    with tempfile.TemporaryFile() as fin, tempfile.TemporaryFile() as fout, \
            tempfile.TemporaryFile() as ferr:
        fin.write(stdin)
        fin.seek(0)
        pid = os.fork()
        if pid == 0:
            rc = 98
            try:
                drop_mode_overrides()       # an unreadable file is one, as root too
                os.dup2(fin.fileno(), 0)
                os.dup2(fout.fileno(), 1)
                os.dup2(ferr.fileno(), 2)
                sys.stdin = open(0, "r", closefd=False)
                sys.stdout = open(1, "w", closefd=False)
                sys.stderr = open(2, "w", closefd=False)
                os.environ.update(env or {})
                sys.argv = [os.path.join(BIN, name), *argv]
                try:
                    rc = cli.dispatch(name, module, argv)
                except SystemExit as e:
                    rc = e.code if isinstance(e.code, int) else 1
                except BaseException:
                    traceback.print_exc()
                    rc = 99
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(rc if isinstance(rc, int) else 97)
        deadline = time.monotonic() + timeout
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                raise AssertionError(f"{name} {argv} hung (more than {timeout} s)")
            time.sleep(0.005)
        fout.seek(0)
        ferr.seek(0)
        return os.waitstatus_to_exitcode(status), fout.read(), ferr.read()


class Crew:
    """The crew under test, its files, and how to damage and restore one."""

    def __init__(self, crew, tmp):
        self.crew, self.tmp = crew, tmp
        self.seeds = {}
        for name in SESSIONS:
            sess = register(crew, name)
            self.seeds[name] = []
            for i in range(SEEDS):
                text = f"seed-{name}-{i}"
                sess.append(GOOD_KINDS[i % len(GOOD_KINDS)], text)
                self.seeds[name].append(text)
        register(crew, "boss", kind="primary")
        self.sched = cmd("nudge-add", "--session", "a", "--every", "600", "--message", "go",
                         check=True).stdout.strip()
        cmd("nudge-add", "--session", "b", "--every", "600", "--message", "go", check=True)
        self.job = cmd("job-exec", "--session", "a", "--label", "t", "--", "true",
                       check=True).stdout.strip()
        wait_for(lambda: os.path.exists(os.path.join(crew.root, "jobs", self.job, "notice")),
                 what="the job's outcome")
        self.report = reports.deliver(crew, "c", b"a report\n")
        self.cursor = os.path.join(tmp, "cursor")
        cmd("crew-watch", "--from-start", "--once", "--cursor", self.cursor, check=True)
        self.fifo = os.path.join(tmp, "fifo")
        os.mkfifo(self.fifo)
        b = os.path.join(crew.root, "sessions", "b")
        with open(os.path.join(b, "status.1"), "wb") as f:      # a rotated log, older
            f.write(b"2026-11-30T09:00:00.000Z done: rotated-b\n")
        cmd("inbox-drain", "boss", check=True)                  # an inbox.read
        self.victims = []
        for name in SESSIONS:
            for f in ("meta", "status", "inbox", "lock"):
                self.victims.append(os.path.join(crew.root, "sessions", name, f))
        self.victims += [os.path.join(b, "status.1"), os.path.join(b, "inbox.read"),
                         os.path.join(crew.root, "sessions", "boss", "inbox.read"),
                         os.path.join(crew.root, "sessions", "boss", "meta"),
                         os.path.join(crew.root, "locks", "nudges")]
        self.victims += [os.path.join(crew.root, "nudges", self.sched),
                         self.cursor, self.report]
        self.victims += [os.path.join(crew.root, "jobs", self.job, f)
                         for f in ("spec", "pids", "result", "heard", "notice")]
        self.saved = {}
        for path in self.victims:
            try:
                with open(path, "rb") as f:
                    self.saved[path] = f.read()
            except FileNotFoundError:
                self.saved[path] = None

    def session_of(self, path):
        parts = os.path.relpath(path, self.crew.root).split(os.sep)
        return parts[1] if parts[0] == "sessions" else None

    def _clear(self, path):
        try:
            st_ = os.lstat(path)
        except FileNotFoundError:
            return
        if stat.S_ISDIR(st_.st_mode):
            os.chmod(path, 0o700)
            os.rmdir(path)
        else:
            os.unlink(path)

    def damage(self, path, how):
        kind = how[0]
        original = self.saved[path] or b""
        self._clear(path)
        if kind == "bytes":
            data = how[1]
        elif kind == "json":
            data = json.dumps(how[1]).encode()
        elif kind == "cut":
            data = original[:int(len(original) * how[1])]
        elif kind == "empty":
            data = b""
        else:
            data = None
        if data is not None:
            with open(path, "wb") as f:
                f.write(data)
            return
        if kind == "symlink":
            targets = {"meta": os.path.join(self.crew.root, "sessions", "b", "meta"),
                       "zero": "/dev/zero", "none": os.path.join(self.tmp, "nothing"),
                       "fifo": self.fifo}
            os.symlink(targets[how[1]], path)
        elif kind == "dir":
            os.mkdir(path)
        elif kind == "fifo":
            os.mkfifo(path)
        elif kind == "unreadable":
            with open(path, "wb") as f:
                f.write(original)
            os.chmod(path, 0)

    def restore(self, path):
        self._clear(path)
        data = self.saved[path]
        if data is not None:
            with open(path, "wb") as f:
                f.write(data)
        for name in SESSIONS:       # what the commands appended goes: the next example starts alike
            sess = Session(self.crew, name)
            if path == sess.status_path:
                continue


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
                    | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.sampled_from(["name", "kind", "id", "every", "armed",
                                                       "sessions", "exit", "code", "ino", "off",
                                                       "by", "watcher", "pgid", "x"]),
                                      inner, max_size=5),
                    max_leaves=10)
DAMAGE = st.one_of(
    st.tuples(st.just("bytes"), st.binary(max_size=300)),
    st.tuples(st.just("bytes"), st.lists(st.sampled_from(
        [b"garbage", b"\xff\xfe", b"2026-11-30T10:00:00.000Z", b" note: x", b"\x1b[31m", b"\n",
         b"{", b"}", b'"', b"\x00"]), max_size=30).map(b"".join)),
    st.tuples(st.just("bytes"), st.lists(st.sampled_from(
        [b"garbage", b"2026-11-30T10:00:00.000Z note: fine", b"2026-11-30T10:00:00.000Z done",
         b"0000-01-01T00:00:00.000Z done: year 0", b"2026-11-30T10:00:00.000Z \x1b[2J: x",
         b"2026-11-30T10:00:00.000Z note: \xff\xfe", b"x" * 20000, b"", b"\x00" * 10,
         b'{"name": "a"}', b"2026-11-30T10:00:00.000Z wake: id text"]),
        min_size=1, max_size=8).map(lambda lines: b"\n".join(lines) + b"\n")),
    st.tuples(st.just("json"), JSON),
    st.tuples(st.just("cut"), st.floats(0.0, 0.99)),
    st.tuples(st.just("empty")),
    st.tuples(st.just("symlink"), st.sampled_from(["meta", "zero", "none", "fifo"])),
    st.tuples(st.just("dir")),
    st.tuples(st.just("fifo")),
    st.tuples(st.just("unreadable")),
)


class LongRunning:
    """crew-watch | wake-filter | wake-send boss, and nudge-tick --watch."""

    def __init__(self, tmp):
        self.errs = {n: open(os.path.join(tmp, f"{n}.err"), "wb+")
                     for n in ("crew-watch", "wake-filter", "wake-send", "nudge-tick")}

        def start(name, *args, stdin=None, stdout=subprocess.DEVNULL):
            return subprocess.Popen([*bound_by_modes(), sys.executable, os.path.join(BIN, name),
                                     *args],
                                    stdin=stdin, stdout=stdout, stderr=self.errs[name])
        self.watch = start("crew-watch", "--probe", "0.2", stdout=subprocess.PIPE)
        self.filter = start("wake-filter", stdin=self.watch.stdout, stdout=subprocess.PIPE)
        self.send = start("wake-send", "boss", "--quiet", "--window", "0.05",
                          stdin=self.filter.stdout)
        self.watch.stdout.close()
        self.filter.stdout.close()
        self.tick = start("nudge-tick", "--watch", "--quiet")
        self.procs = [self.watch, self.filter, self.send, self.tick]

    def running(self):
        return [p.args[p.args.index(sys.executable) + 1] for p in self.procs
                if p.poll() is not None]

    def stderr(self, name):
        f = self.errs[name]
        f.seek(0)
        return f.read().decode("utf-8", "replace")

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def check_run(name, rc, out, err, victim, allowed=CODES):
    text = err.decode("utf-8", "replace")
    assert "Traceback" not in text and rc != 99, f"{name}: a traceback:\n{text}"
    assert rc in allowed, f"{name}: exit {rc} is not documented:\n{text}"
    naming = [line for line in text.splitlines() if victim in line]
    assert len(naming) <= 1, f"{name}: {len(naming)} lines name {victim}:\n{text}"


def test_every_command_survives_any_damaged_file(crew, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CREWFILE_TMUX", str(tmp_path / "no-tmux-server"))
    world = Crew(crew, str(tmp_path))
    long = LongRunning(str(tmp_path))
    damaged = {}
    examples = [0]
    kinds = {}

    @settings(max_examples=EXAMPLES, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(victim=st.sampled_from(world.victims), how=DAMAGE)
    def one(victim, how):
        examples[0] += 1
        damaged[victim] = damaged.get(victim, 0) + 1
        kinds[how[0]] = kinds.get(how[0], 0) + 1
        world.damage(victim, how)
        try:
            runs = [("session-ls", []), ("nudge-ls", []), ("job-ls", []), ("report-ls", []),
                    ("nudge-tick", []), ("job-sweep", ["--dry-run"]) if False else ("job-ls", []),
                    ("crew-watch", ["--once", "--cursor", world.cursor]),
                    ("status-append", ["c", "note", "fuzz"]),
                    ("inbox-drain", ["boss"])]
            runs += [("status-show", [n]) for n in SESSIONS]
            for name, argv in runs:
                rc, out, err = run_forked(name, argv)
                check_run(name, rc, out, err, victim)
            rc, out, err = run_forked("job-wait", [world.job, "--timeout", "1"])
            check_run("job-wait", rc, out, err, victim, JOB_WAIT_CODES)
            payload = json.dumps({"hook_event_name": "Stop", "session_id": "s"}).encode()
            rc, out, err = run_forked("crew-hook", [], stdin=payload,
                                      env={"CREWFILE_SESSION": "a"})
            check_run("crew-hook", rc, out, err, victim, {0})
            rc, events, err = run_forked("crew-watch", ["--from-start", "--once"])
            check_run("crew-watch", rc, events, err, victim)
            rc, passed, err = run_forked("wake-filter", [], stdin=events)
            check_run("wake-filter", rc, passed, err, victim)
            rc, out, err = run_forked("wake-send", ["boss", "--quiet", "--window", "0.01"],
                                      stdin=passed[:2000].rpartition(b"\n")[0] + b"\n")
            check_run("wake-send", rc, out, err, victim)
            bad = world.session_of(victim) if victim.endswith("/status") else None
            text = passed.decode("utf-8", "replace")
            for name in SESSIONS:
                if name == bad:
                    continue
                missing = [s for s in world.seeds[name] if f" {name} " not in text
                           or f": {s}\n" not in text]
                assert not missing, f"good session {name} lost {missing} ({victim} {how[0]})"
        finally:
            world.restore(victim)

    try:
        one()
        stopped = long.running()
        assert not stopped, f"long-running commands died: {stopped}"
        for name in long.errs:
            text = long.stderr(name)
            assert "Traceback" not in text, f"{name}:\n{text}"
            for victim, times in damaged.items():
                naming = sum(victim in line for line in text.splitlines())
                assert naming <= 3 * times, (f"{name} named {victim} {naming} times for"
                                             f" {times} damages:\n{text[-3000:]}")
    finally:
        long.stop()
        with capsys.disabled():
            print(f"\ntest_fuzz_crew: {examples[0]} examples run; damages:"
                  f" {sorted(kinds.items())}; files: {len(damaged)} of {len(world.victims)}")


EVENT_PART = st.sampled_from([b"2026-11-30T10:00:00.000Z", b"0000-01-01T00:00:00.000Z", b"a",
                              b"boss", b"nobody", b"../x", b"done", b"done:", b"registered",
                              b"paused", b"idle", b"\x1b[2J", b"\xff", b"", b"\t{}", b"x" * 9000])
LINE = st.one_of(st.binary(max_size=120),
                 st.lists(EVENT_PART, min_size=1, max_size=6).map(b" ".join))


def test_wake_filter_and_wake_send_survive_any_input_line(crew):
    register(crew, "a")
    register(crew, "boss", kind="primary")
    examples = [0]

    @settings(max_examples=EXAMPLES, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(lines=st.lists(LINE, max_size=12), end=st.sampled_from([b"", b"\n"]))
    def one(lines, end):
        examples[0] += 1
        data = b"\n".join(lines) + end
        rc, passed, err = run_forked("wake-filter", [], stdin=data)
        check_run("wake-filter", rc, passed, err, "\0", {0})
        rc, out, err = run_forked("wake-send", ["boss", "--quiet", "--window", "0.01"], stdin=data)
        check_run("wake-send", rc, out, err, "\0", {0})
    one()
    print(f"\ntest_fuzz_crew: {examples[0]} input examples run")
