"""A full disk never stops the crew (issue 30, item 6).

The crew directory lies on a small tmpfs of its own (1 MB), filled to the
last page by a filler file and freed again. crew-up must live through it:
a write of its own state or log that fails is said once on its stderr and
tried again; a stage killed meanwhile is restarted without crew-up's
bookkeeping; a wake held by wake-send while the primary's inbox cannot
grow is delivered, exactly once, as soon as there is room again.

The same for EROFS (crew-up/ bind-mounted read-only). The fuzz one level up: random rounds of filling, freeing, killing a stage
of the running pipeline and appending a healthy session's record; at the
end of each example the space is freed and every record written reached
the primary's inbox exactly once. CREWFILE_FUZZ_EXAMPLES sets the number
of examples (default 10 here: each drives real processes).

Mounting needs CAP_SYS_ADMIN (root, or a user and mount namespace where
the machine allows it); without it these tests are skipped, saying why.
"""
import contextlib
import errno
import os
import signal
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import BIN, wait_for
from crewfile.core.errors import CrewfileError
from crewfile.core.locks import is_held
from crewfile.core.paths import Crew
from crewfile.crew import crewup
from crewfile.session.sessions import Session, register
from crewfile.wake import inbox

EXAMPLES = int(os.environ.get("CREWFILE_FUZZ_EXAMPLES", "10"))
PIPE = ("crew-watch", "wake-filter", "wake-send")


@contextlib.contextmanager
def mounted_small_fs(where):
    """A 1 MB tmpfs on the fresh directory *where*, unmounted after: both fixtures' disk."""
    where.mkdir()
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", str(where)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {p.stderr.strip() or p.returncode}")
    try:
        yield str(where)
    finally:
        subprocess.run(["umount", str(where)], check=True)


@pytest.fixture
def small_fs(tmp_path):
    """A 1 MB tmpfs mounted on a fresh directory, unmounted afterwards."""
    with mounted_small_fs(tmp_path / "fs") as where:
        yield where


@pytest.fixture
def disk_crew(small_fs, monkeypatch):
    root = os.path.join(small_fs, "crew")
    monkeypatch.setenv("CREWFILE_DIR", root)
    monkeypatch.delenv("TMUX", raising=False)
    crew = Crew(root)
    register(crew, "boss", kind="primary")
    register(crew, "w1")
    return crew


class Filler:
    """Fills the file system to its last byte, and frees it again."""

    def __init__(self, fs):
        self.path = os.path.join(fs, "filler")

    def fill(self):
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            for size in (1 << 16, 4096, 1):
                while True:
                    try:
                        os.write(fd, b"\0" * size)
                    except OSError as e:
                        assert e.errno == errno.ENOSPC, e
                        break
        finally:
            os.close(fd)

    def free(self):
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


def children(pid):
    """{pid: command name} of *pid*'s children (its stages' processes)."""
    out = {}
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            kids = [int(k) for k in f.read().split()]
    except OSError:
        return out
    for k in kids:
        try:
            with open(f"/proc/{k}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        names = [os.path.basename(a.decode()) for a in argv[:2]]
        for name in PIPE + ("nudge-tick", "job-sweep"):
            if name in names:
                out[k] = name
    return out


class CrewUp:
    """crew-up running for the crew on the small file system; its output
    goes to a file outside it (that must never be the one that fills)."""

    def __init__(self, crew, out_path, wait=True):
        self.crew, self.out_path = crew, out_path
        self.out = open(out_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(BIN, "crew-up"), "boss", "--backoff-max", "0.5s"],
            env={**os.environ, "CREWFILE_DIR": crew.root}, stdout=self.out, stderr=self.out)
        if wait:
            self.wait_running()

    def wait_running(self):
        wait_for(lambda: self.alive() and {"nudge-tick", *PIPE} <= set(children(self.proc.pid).values()),
                 what="every stage running")

    def alive(self):
        assert self.proc.poll() is None, f"crew-up exited {self.proc.returncode}: {self.said()}"
        return True

    def said(self):
        with open(self.out_path, "rb") as f:
            return f.read().decode()

    def log(self):
        try:
            with open(crewup.files(self.crew)["log"]) as f:
                return f.read()
        except OSError as e:
            return str(e)

    def pid_of(self, name):
        found = [p for p, n in children(self.proc.pid).items() if n == name]
        return found[0] if found else None

    def kill_and_see_restarted(self, name):
        victim = wait_for(lambda: self.pid_of(name), what=f"{name} running")
        os.kill(victim, signal.SIGKILL)
        wait_for(lambda: self.alive() and self.pid_of(name) not in (None, victim),
                 what=f"{name} restarted")
        return victim

    def stop(self):
        try:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                assert self.proc.wait(30) == 0
        finally:
            self.out.close()


def blocked(crew, text):
    """A wake-worthy record of w1's: after a turn started, so that
    wake-filter does not fold it into the blocked before it."""
    w1 = Session(crew, "w1")
    w1.append("turn-started")
    w1.append("blocked", text)


def delivered(crew, want, got):
    """Wait until the wake of each text in *want* is in boss's inbox; drain
    it into *got* (wake texts, in order)."""
    def seen():
        texts = [n.text for n in inbox.pending(crew, "boss")]
        return all(any(w in t for t in texts) for w in want)
    wait_for(seen, what=lambda: f"wakes for {want} (pending: "
             f"{[n.text for n in inbox.pending(crew, 'boss')]})")
    taken, garbage = inbox.drain(crew, "boss")
    assert garbage == 0
    got += [n.text for n in taken]


def test_crew_up_lives_through_a_full_disk_filled_and_freed_three_times(disk_crew, tmp_path):
    crew, filler = disk_crew, Filler(os.path.dirname(disk_crew.root))
    up = CrewUp(crew, str(tmp_path / "crew-up.out"))
    got, victims = [], []
    try:
        inbox_path = os.path.join(crew.session_dir("boss"), "inbox")
        for k in (1, 2, 3):
            filler.fill()
            # crew-up's bookkeeping of a restart fails: it must restart anyway.
            victims.append(up.kill_and_see_restarted("nudge-tick"))
            blocked(crew, f"round {k}")
            # wake-send tried: the inbox it made has no room for the line.
            wait_for(lambda: os.path.exists(inbox_path) and up.alive(),
                     what=lambda: f"wake-send trying to post ({up.said()}; {up.log()})")
            assert os.path.getsize(inbox_path) == 0
            up.alive()
            filler.free()
            delivered(crew, [f"round {k}"], got)
        blocked(crew, "the last")
        delivered(crew, ["the last"], got)
        up.alive()
        # every wake exactly once, in order
        assert [t.split(" ", 3)[-1] for t in got] == [f"round {k}" for k in (1, 2, 3)] + ["the last"], got
        # crew-up's log got the lines it held, its state is written again
        wait_for(lambda: not up.said().endswith("retrying\n"), what="crew-up writing again")
        with open(crewup.files(crew)["log"]) as f:
            log = f.read()
        for v in victims:
            assert f"nudge-tick pid {v} killed by SIGKILL" in log
        wait_for(lambda: up.pid_of("nudge-tick") in crewup.read_state(crew)["stages"]["nudge"]["pids"].values(),
                 what="the state naming the restarted nudge-tick")
        said = up.said()
        state = crewup.files(crew)["state"]
        assert f"crew-up: cannot write {state}: No space left on device; the stages go on, retrying\n" in said
        assert f"crew-up: {state} is written again\n" in said
        # said once per time the disk filled, not once per retry
        assert said.count(f"cannot write {state}") <= 3, said
    finally:
        up.stop()
        filler.free()


def test_crew_up_started_on_a_full_disk_runs_and_delivers_once_there_is_room(disk_crew, tmp_path):
    """Nothing of crew-up's own can be written, not even the wake pipe's
    first position: it says so and goes on; once there is room the pipe
    runs and a record appended then is a wake."""
    crew, filler = disk_crew, Filler(os.path.dirname(disk_crew.root))
    filler.fill()
    up = CrewUp(crew, str(tmp_path / "crew-up.out"), wait=False)
    try:
        state = crewup.files(crew)["state"]
        wait_for(lambda: up.alive() and f"cannot write {state}" in up.said(),
                 what=lambda: f"crew-up saying it cannot write its state ({up.said()})")
        wait_for(lambda: up.alive() and "first position" in up.said(),
                 what=lambda: f"crew-up saying the pipe positions itself ({up.said()})")
        up.kill_and_see_restarted("nudge-tick")      # restarts still work
        filler.free()
        up.wait_running()
        wait_for(lambda: os.path.exists(crewup.files(crew)["cursor"]) and up.alive(),
                 what="the pipe's first position")
        got = []
        blocked(crew, "after the space came back")
        delivered(crew, ["after the space came back"], got)
        assert len(got) == 1
        wait_for(lambda: f"crew-up: {state} is written again\n" in up.said(),
                 what=lambda: f"crew-up writing its state again ({up.said()})")
        up.alive()
    finally:
        up.stop()
        filler.free()


def test_crew_up_lives_through_a_read_only_file_system(disk_crew, tmp_path):
    """EROFS as ENOSPC: crew-up/ made read-only (a read-only bind mount over
    it: a file system with files open for writing cannot be remounted
    read-only whole), a stage killed is restarted, and once it is writable
    again the state is written and a wake goes through."""
    crew = disk_crew
    fs = crew.sub(crewup.DIR)
    up = CrewUp(crew, str(tmp_path / "crew-up.out"))
    try:
        # wake-send holds its cursor's lock (a lock file cannot be opened
        # for writing on a read-only mount: a wake-send started then exits
        # 111 and is restarted until it can be)
        wait_for(lambda: is_held(crewup.files(crew)["cursor"] + ".lock"), what="wake-send running")
        subprocess.run(["mount", "--bind", fs, fs], check=True)
        try:
            subprocess.run(["mount", "-o", "remount,bind,ro", fs], check=True)
            up.kill_and_see_restarted("nudge-tick")
            state = crewup.files(crew)["state"]
            wait_for(lambda: up.alive() and f"cannot write {state}: Read-only file system" in up.said(),
                     what=lambda: f"crew-up saying its state cannot be written ({up.said()})")
            got = []    # the inbox is elsewhere: the wake goes through, its cursor waits
            blocked(crew, "while read-only")
            delivered(crew, ["while read-only"], got)
        finally:
            subprocess.run(["umount", fs], check=True)
        blocked(crew, "after the remount")
        delivered(crew, ["after the remount"], got)
        assert [t.split(" ", 3)[-1] for t in got] == ["while read-only", "after the remount"]
        wait_for(lambda: f"crew-up: {state} is written again\n" in up.said(),
                 what=lambda: f"crew-up writing its state again ({up.said()})")
        up.alive()
    finally:
        up.stop()


@settings(max_examples=EXAMPLES, deadline=None, derandomize=False,
          suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_fuzz_a_full_disk_never_loses_nor_repeats_a_healthy_sessions_wake(data, disk_crew_up):
    crew, filler, up, seq = disk_crew_up
    ops = data.draw(st.lists(st.sampled_from(["fill", "free", "append", "kill"]),
                             min_size=1, max_size=8))
    written = []
    for op in ops:
        if op == "fill":
            filler.fill()
        elif op == "free":
            filler.free()
        elif op == "append":
            seq[0] += 1
            text = f"record {seq[0]}"
            try:
                blocked(crew, text)
            except CrewfileError as e:     # no room for the record itself: not written
                assert "No space left on device" in str(e), e
                continue
            written.append(text)
        else:
            up.kill_and_see_restarted(data.draw(st.sampled_from(PIPE + ("nudge-tick",))))
        up.alive()
    filler.free()
    seq[0] += 1
    last = f"record {seq[0]} the last"
    blocked(crew, last)
    got = []
    delivered(crew, written + [last], got)
    texts = [t.split(" ", 3)[-1] for t in got]
    for w in written + [last]:
        assert sum(1 for t in texts if t == w) == 1, (w, texts)
    up.alive()


@pytest.fixture(scope="module")
def disk_crew_up(tmp_path_factory):
    """One crew-up on one small file system for every example of the fuzz."""
    tmp = tmp_path_factory.mktemp("fuzz")
    with mounted_small_fs(tmp / "fs") as where:
        filler = Filler(where)
        up = None
        old = os.environ.get("CREWFILE_DIR")
        try:
            crew = Crew(os.path.join(where, "crew"))
            os.environ["CREWFILE_DIR"] = crew.root
            register(crew, "boss", kind="primary")
            register(crew, "w1")
            up = CrewUp(crew, str(tmp / "crew-up.out"))
            yield crew, filler, up, [0]
        finally:
            if up is not None:
                up.stop()
            filler.free()
            if old is None:
                os.environ.pop("CREWFILE_DIR", None)
            else:
                os.environ["CREWFILE_DIR"] = old


def test_the_log_held_in_memory_is_bounded_and_says_what_it_lost(disk_crew, monkeypatch, capsys):
    crew, filler = disk_crew, Filler(os.path.dirname(disk_crew.root))
    monkeypatch.setattr(crewup, "MAX_UNLOGGED", 5)
    sup = crewup.Supervisor(crew, "boss")
    os.makedirs(crew.sub(crewup.DIR), exist_ok=True)
    filler.fill()
    try:
        for i in range(8):
            sup.log("said", f"line {i}")
        log = crewup.files(crew)["log"]
        assert not os.path.exists(log) or os.path.getsize(log) == 0
        err = capsys.readouterr().err
        assert err == (f"crew-up: cannot append to {log}: No space left on device;"
                       " the stages go on, retrying; its lines are held until then\n")
        sup.retry_writes()                  # before its backoff is over: not tried
        assert capsys.readouterr().err == ""
    finally:
        filler.free()
    wait_for(lambda: (sup.retry_writes() or True) and not sup.unlogged, what="the log written")
    with open(log) as f:
        texts = [line.split(" ", 1)[1] for line in f]
    assert texts == ["said: crew-up: 3 line(s) of this log lost while it could not be written\n"] \
        + [f"said: line {i}\n" for i in range(3, 8)]
    assert capsys.readouterr().err == f"crew-up: {log} is written again\n"
