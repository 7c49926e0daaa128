"""job-wait handed to the job's watcher (jobwait.HandOver, jobwatch.HandedWaits).

A job-wait that finds no outcome sends the watcher, through the job's
`socket`, where its answer goes, and becomes a shell awaiting its code. The
watcher answers it at the job's end; a watcher that gives no code has the
shell run job-wait again, alone. Real processes, real sockets and signals;
the requests the watcher reads are fuzzed (hypothesis).
"""
import os
import signal
import socket
import struct
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from conftest import BIN, wait_for
from crewfile import jobs, jobwait, liveness, locks
from test_jobs import (exec_, fifo, handed, handed_wait, held_job, job_notices, let_go, live_session,
                       no_job_left_running, on_cue, release, settled, started)

assert no_job_left_running          # autouse here too: a failed test leaves no job blocked


def _gone(pid):
    st_ = liveness.stat(pid)
    return st_ is None or st_.gone


def _heard_by_this_wait(waiter, h, code, rest):
    """job-wait *waiter* ends with *code*, printing the result line heard by
    this wait, then *rest* (the tail)."""
    out, _ = waiter.communicate()
    assert waiter.returncode == code
    first, tail = out.decode().split("\n", 1)
    assert first.startswith(f"{h} exited {code} after ") and first.endswith("; heard by this wait")
    assert tail == rest


def test_a_handed_job_wait_is_one_shell_and_the_watcher_answers_it(crew, run, tmp_path):
    """While it waits, job-wait is a shell blocked reading its code: no
    Python process of its own, no child, not counted in `waiters` (the
    watcher counts it); the watcher prints its answer and hands it the
    code; `heard` names the pid its caller ran."""
    go = fifo(tmp_path)
    h = exec_(run, "--", *on_cue(go, "echo done; exit 4"))
    job = jobs.Job(crew, h)
    waiter = handed_wait(h, stdout=subprocess.PIPE)
    wait_for(lambda: "pipe_read" in open(f"/proc/{waiter.pid}/wchan").read(), what="the shell to read")
    assert [p for p in map(int, filter(str.isdigit, os.listdir("/proc")))
            if getattr(liveness.stat(p), "ppid", None) == waiter.pid] == []
    assert not locks.is_held(job.waiters_path)
    release(go)
    _heard_by_this_wait(waiter, h, 4, "done\n")
    assert job.heard()["by"] == "wait" and job.heard()["pid"] == waiter.pid
    settled(crew, h)
    assert not os.path.lexists(job.socket_path)         # the watcher's, gone with it


def test_two_handed_job_waits_one_hears_and_a_reader_that_does_not_read_holds_up_no_other(
        crew, run, tmp_path):
    """Two job-waits on one job: the first hears it, the second is told it
    was heard already, both get the output and the job's code. The first's
    reader does not read (its pipe fills): the second is answered anyway."""
    live_session(crew)
    go = fifo(tmp_path)
    body = "".join(f"line {i:05d}\n" for i in range(20000))            # > a pipe's buffer
    (tmp_path / "body").write_text(body)
    h = exec_(run, "--session", "w1", "--", "sh", "-c", f'read x < "$1"; cat {tmp_path / "body"}; exit 5',
              "sh", go)
    job = jobs.Job(crew, h)
    stuck = handed_wait(h, "--all", stdout=subprocess.PIPE)
    other = handed_wait(h, stdout=subprocess.PIPE)
    release(go)
    out, _ = other.communicate()
    assert other.returncode == 5
    first, rest = out.decode().split("\n", 1)
    assert first.endswith("; heard already by wait") and rest.splitlines() == body.splitlines()[-10:]
    assert stuck.poll() is None                         # its answer is still being written
    out, _ = stuck.communicate()
    assert stuck.returncode == 5
    first, rest = out.decode().split("\n", 1)
    assert first.endswith("; heard by this wait") and rest == body
    assert job.heard()["pid"] == stuck.pid
    settled(crew, h)
    assert job_notices(crew) == []


def test_a_killed_job_wait_lets_go_of_its_output_at_once_and_the_outcome_is_announced(
        crew, run, tmp_path):
    """job-wait killed while it waits: the watcher drops its request the
    moment its shell is gone, so a caller reading its output
    (`$(job-wait ...)`) sees the end while the job still runs; the outcome
    is announced."""
    live_session(crew)
    go = fifo(tmp_path)
    h = exec_(run, "--session", "w1", "--", *on_cue(go))
    job = jobs.Job(crew, h)
    waiter = handed_wait(h, stdout=subprocess.PIPE)
    waiter.send_signal(signal.SIGKILL)
    assert waiter.stdout.read() == b""                  # EOF: nobody holds the pipe any more
    waiter.wait()
    assert job.result() is None
    release(go)
    settled(crew, h)
    assert len(job_notices(crew)) == 1
    assert job.heard()["by"] == "notice"


def test_a_job_wait_killed_while_its_watcher_is_stopped_never_hears_the_outcome(crew, run, tmp_path):
    """The watcher is stopped while job-wait is killed and the job ends:
    when it runs again, the job's end and the news of job-wait's end come
    at once. Whichever it takes first, it must not hear the outcome (nobody
    is left to print it): under `lock`, it asks whether the shell is still
    there. It announces it, once."""
    live_session(crew)
    go = fifo(tmp_path)
    h = exec_(run, "--session", "w1", "--", *on_cue(go))
    job = started(crew, h)
    watcher = job.pids()["watcher"]
    waiter = handed_wait(h, stdout=subprocess.DEVNULL)
    os.kill(watcher, signal.SIGSTOP)
    try:
        wait_for(lambda: liveness.stat(watcher).stopped, what="the watcher to stop")
        waiter.send_signal(signal.SIGKILL)
        waiter.wait()
        release(go)
        pgid = job.pids()["pgid"]
        wait_for(lambda: _gone(pgid), what="the job to end")
    finally:
        os.kill(watcher, signal.SIGCONT)
    settled(crew, h)
    assert len(job_notices(crew)) == 1 and job.heard()["by"] == "notice"


def test_job_wait_without_a_shell_waits_for_its_answer_itself(crew, run, tmp_path):
    """The shell job-wait becomes once handed over cannot be run: the
    process waits for the watcher's code itself (slower, the same answer)."""
    go = fifo(tmp_path)
    h = exec_(run, "--", *on_cue(go, "echo done; exit 4"))
    job = jobs.Job(crew, h)
    script = tmp_path / "job-wait"
    script.write_text(f"import sys; sys.path.insert(0, {os.path.join(os.path.dirname(BIN), 'lib')!r})\n"
                      "from crewfile.cmd import job_wait; job_wait.SHELL = '/nonexistent/sh'\n"
                      "from crewfile.cli import main; main('job-wait')\n")
    wait_for(lambda: os.path.lexists(job.socket_path), what="the watcher's socket")
    waiter = subprocess.Popen([sys.executable, str(script), h], stdout=subprocess.PIPE,
                              env=dict(os.environ, CREWFILE_DIR=crew.root))

    def waits_for_its_code():
        try:
            return "pipe_read" in open(f"/proc/{waiter.pid}/wchan").read()
        except OSError:
            return False
    wait_for(waits_for_its_code, what="job-wait to wait for its code")
    assert not handed(waiter.pid)                       # still Python: no shell ran
    assert not locks.is_held(job.waiters_path)          # handed over: the watcher counts it
    release(go)
    _heard_by_this_wait(waiter, h, 4, "done\n")
    assert job.heard()["pid"] == waiter.pid


# -- a watcher that gives no code: job-wait runs again, alone -------------------------

def _fake_watcher(crew, handle):
    """A job whose watcher is this test: `alive` and `running` held by
    flock(1) (held_job), its `socket` bound here. (job, holders, socket)."""
    job, holders = held_job(crew, handle)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    sock.bind(job.socket_path)
    return job, holders, sock


def _request(sock):
    """The next request on *sock*, waited for."""
    sock.settimeout(20)
    sock.recvmsg(1, 0, socket.MSG_PEEK)
    req = jobwait.receive(sock)
    assert req
    return req


def _end(job, code, output):
    from crewfile.atomic import replace
    with open(job.output_path, "w") as f:
        f.write(output)
    result = {"code": code, "exit": code, "signal": None, "seconds": 0.5}
    with locks.acquire(job.lock_path):
        replace(job.result_path, jobs.dump_json(result))
    return result


def test_a_watcher_that_heard_it_for_a_job_wait_but_gave_no_code_has_it_said_by_job_wait(crew):
    """The watcher wrote `heard` naming the job-wait and died before it
    answered: the shell runs job-wait again, which finds `heard` naming
    its own pid: heard by this wait, with the output and the code."""
    job, (alive, running), sock = _fake_watcher(crew, "j-fake1")
    waiter = handed_wait(job.handle, stdout=subprocess.PIPE)
    req = _request(sock)
    assert req.pid == waiter.pid and req.tail == 10 and not req.all_kept and req.deadline is None
    result = _end(job, 6, "one\ntwo\n")
    from crewfile.atomic import replace
    with locks.acquire(job.lock_path):
        replace(job.heard_path, jobs.dump_json(jobs.heard_record("wait", job.spec(), result,
                                                                  pid=req.pid)))
    req.close()                                         # no code: as a watcher killed here
    let_go(running)
    out, _ = waiter.communicate()
    assert waiter.returncode == 6
    assert out == b"j-fake1 exited 6 after 0.50s; heard by this wait\none\ntwo\n"
    let_go(alive)


def test_a_watcher_that_gives_no_code_has_job_wait_wait_alone(crew):
    """The watcher closes the request unanswered (it could not take it):
    job-wait, run again, does not hand itself over again (it would loop):
    it counts itself in and waits alone, and hears the outcome."""
    job, (alive, running), sock = _fake_watcher(crew, "j-fake2")
    waiter = handed_wait(job.handle, "--tail", "1", stdout=subprocess.PIPE)
    req = _request(sock)
    assert req.tail == 1
    req.close()
    wait_for(lambda: locks.is_held(job.waiters_path), what="job-wait to count itself in, alone")
    with open(f"/proc/{waiter.pid}/environ", "rb") as f:
        assert b"CREWFILE_JOB_WAIT_ALONE=1" in f.read().split(b"\0")
    _end(job, 3, "a\nb\n")
    let_go(running)
    out, _ = waiter.communicate()
    assert waiter.returncode == 3 and out == b"j-fake2 exited 3 after 0.50s; heard by this wait\nb\n"
    sock.setblocking(False)
    assert jobwait.receive(sock) is None                # it never handed itself over again
    let_go(alive)


# -- what the watcher reads from its socket ---------------------------------------------

def _sent(data, fds, sender):
    sender.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack(f"{len(fds)}i", *fds))]
                   if fds else [])


def _open_fds():
    return sorted(int(fd) for fd in os.listdir("/proc/self/fd"))


def _a_request(words):
    """protocol.md's request words, restated: `job-wait 1 TAIL ALL T0
    DEADLINE`, a newline last, at most 128 bytes."""
    import math

    def moment(w):
        try:
            return math.isfinite(float(w))
        except ValueError:
            return False
    parts = words[:-1].split(b" ")
    return (len(words) <= 128 and words.endswith(b"\n") and len(parts) == 6
            and parts[:2] == [b"job-wait", b"1"] and parts[2].isdigit() and int(parts[2]) <= 1000000
            and parts[3] in (b"0", b"1") and moment(parts[4]) and (parts[5] == b"-" or moment(parts[5])))


WORDS = st.one_of(
    st.binary(max_size=200),
    st.builds(lambda tail, all_, t0, dl: b"job-wait 1 %s %s %s %s\n" % (tail, all_, t0, dl),
              st.sampled_from([b"0", b"10", b"1000000", b"1000001", b"-1", b"x", b"", b"9" * 30]),
              st.sampled_from([b"0", b"1", b"2", b""]),
              st.sampled_from([b"12.5", b"nan", b"inf", b"-", b"1e308", b"x"]),
              st.sampled_from([b"-", b"13.0", b"nan", b"-inf", b"", b"1 2"])),
)
KINDS = st.lists(st.sampled_from(["pipe-w", "pipe-r", "null", "socket"]), max_size=5)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(WORDS, KINDS)
@example(b"job-wait 1 10 0 12.5 -\n", ["null", "null", "pipe-w"])      # a request
@example(b"job-wait 1 0 0 0 -\n", ["pipe-w", "pipe-w", "pipe-r"])      # its pipe's read end: none
def test_anything_sent_to_the_socket_is_a_request_or_refused_with_every_descriptor_closed(words, kinds):
    """Whatever arrives (any bytes, any descriptors): receive() never raises;
    it is a Request only in the exact format with three descriptors, the
    third a pipe's write end; refused, every descriptor that came with it is closed (a
    job-wait that sent it sees its pipe end, and waits on its own). Nothing
    leaks."""
    before = _open_fds()
    sender, receiver = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    receiver.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    mine, readers = [], []
    for kind in kinds:
        if kind.startswith("pipe"):
            r, w = os.pipe()
            mine.append(w if kind == "pipe-w" else r)
            if kind == "pipe-w":
                readers.append(r)
            else:
                os.close(w)
        elif kind == "null":
            mine.append(os.open(os.devnull, os.O_WRONLY))
        else:
            a, b = socket.socketpair()
            b.close()
            mine.append(a.detach())
    try:
        _sent(words, mine, sender)
    except OSError:
        pass                        # too long for a datagram: nothing arrives
    for fd in mine:
        os.close(fd)
    req = jobwait.receive(receiver)
    valid = len(kinds) == 3 and kinds[2] == "pipe-w" and _a_request(words)
    assert bool(req) == valid
    if req:
        assert 0 <= req.tail <= 1000000 and req.pid == os.getpid()
        req.close()
    else:
        assert req is False or req is None
    for r in readers:
        assert os.read(r, 1) == b""     # nobody holds its write end any more
        os.close(r)
    assert jobwait.receive(receiver) is None
    sender.close()
    receiver.close()
    assert _open_fds() == before


def test_a_watcher_given_garbage_closes_it_and_still_answers_a_job_wait(crew, run, tmp_path):
    """Datagrams that are no request, sent to a live watcher: each is closed
    (the pipe sent with it reads its end), the watcher lives on, and a real
    job-wait is answered."""
    go = fifo(tmp_path)
    h = exec_(run, "--", *on_cue(go, "echo done; exit 2"))
    job = started(crew, h)
    sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    readers = []
    for words in (b"", b"job-wait 1 10 0 1.0 -\n", b"job-wait 2 10 0 1.0 -\n", b"x" * 100,
                  b"job-wait 1 10 0 nan -\n", b"job-wait 1 10 0 1.0 -\n"):
        r, w = os.pipe()
        fds = [w] if words != b"job-wait 1 10 0 nan -\n" else [1, 2, w]
        sender.sendmsg([words], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                  struct.pack(f"{len(fds)}i", *fds))], 0, job.socket_path)
        os.close(w)
        readers.append(r)
    for r in readers:
        assert os.read(r, 1) == b""
        os.close(r)
    assert job.watcher_alive()
    waiter = handed_wait(h, stdout=subprocess.PIPE)
    release(go)
    out, _ = waiter.communicate()
    assert waiter.returncode == 2 and out.endswith(b"; heard by this wait\ndone\n")


# -- a damaged or long `socket` path ----------------------------------------------------------

@pytest.mark.parametrize("damage", ["file", "link"])
def test_a_socket_that_is_not_one_is_not_followed_and_job_wait_waits_alone(crew, run, tmp_path, damage):
    go = fifo(tmp_path)
    h = exec_(run, "--", *on_cue(go, "echo done; exit 2"))
    job = started(crew, h)
    os.rename(job.socket_path, str(tmp_path / "moved"))
    if damage == "file":
        open(job.socket_path, "w").close()
    else:
        os.symlink(str(tmp_path / "moved"), job.socket_path)
    waiter = subprocess.Popen([sys.executable, f"{BIN}/job-wait", h], stdout=subprocess.PIPE)
    wait_for(lambda: locks.is_held(job.waiters_path), what="job-wait to count itself in, alone")
    assert not handed(waiter.pid)
    release(go)
    out, _ = waiter.communicate()
    assert waiter.returncode == 2 and out.endswith(b"; heard by this wait\ndone\n")


def test_a_job_whose_socket_path_is_too_long_for_an_address_is_still_handed_over(tmp_path, monkeypatch, run):
    """A socket address holds at most 108 bytes; a longer path is reached
    through a descriptor on the job's directory (/proc/self/fd/N/socket)."""
    from crewfile.paths import Crew
    root = tmp_path / ("d" * 70) / ("e" * 70) / "crew"
    monkeypatch.setenv("CREWFILE_DIR", str(root))
    crew = Crew(str(root))
    go = fifo(tmp_path)
    h = exec_(run, "--", *on_cue(go, "echo done; exit 2"))
    job = started(crew, h)
    assert len(job.socket_path) > 108
    wait_for(lambda: os.path.lexists(job.socket_path), what="the watcher's socket")
    waiter = handed_wait(h, stdout=subprocess.PIPE)
    release(go)
    out, _ = waiter.communicate()
    assert waiter.returncode == 2 and out.endswith(b"; heard by this wait\ndone\n")


def test_an_output_file_turned_into_a_link_is_not_followed_into_a_job_waits_answer(crew, run, tmp_path):
    """`output` replaced by a link to another file while the job runs: the
    watcher answering job-wait does not follow it (nothing of that file is
    printed): job-wait says why on stderr, prints nothing, exits 125."""
    go = fifo(tmp_path)
    h = exec_(run, "--", *on_cue(go, "echo done; exit 2"))
    job = started(crew, h)
    (tmp_path / "secret").write_text("not for the caller\n")
    os.unlink(job.output_path)
    os.symlink(str(tmp_path / "secret"), job.output_path)
    waiter = handed_wait(h, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    release(go)
    out, err = waiter.communicate()
    assert waiter.returncode == 125 and out == b""
    assert err == f"job-wait: {job.output_path}: a symlink is not followed\n".encode()


def test_a_handed_job_wait_whose_reader_went_away_exits_141(crew, run, tmp_path):
    """The reader of job-wait's output is gone when the watcher answers:
    job-wait exits 141, as it would printing the answer itself."""
    go = fifo(tmp_path)
    h = exec_(run, "--", *on_cue(go, "echo done; exit 2"))
    r, w = os.pipe()
    waiter = handed_wait(h, stdout=w)
    os.close(w)
    os.close(r)                                         # the reader goes away
    release(go)
    assert waiter.wait() == 141


def test_more_job_waits_than_the_watcher_has_descriptors_for_are_all_answered(crew, run, tmp_path):
    """The watcher may hold 40 descriptors; 30 job-waits (3 descriptors
    each) hand themselves over: those it cannot take (their descriptors
    refused by the kernel, closed) wait on their own. Each is answered with
    the job's code and output, and one only hears it."""
    import resource
    go = fifo(tmp_path)

    def few_descriptors():
        resource.setrlimit(resource.RLIMIT_NOFILE, (40, 40))
    h = subprocess.run([sys.executable, f"{BIN}/job-exec", "--", *on_cue(go, "echo done; exit 4")],
                       capture_output=True, text=True, preexec_fn=few_descriptors).stdout.strip()
    job = started(crew, h)
    wait_for(lambda: os.path.lexists(job.socket_path), what="the watcher's socket")
    waiters = [subprocess.Popen([sys.executable, f"{BIN}/job-wait", h], stdout=subprocess.PIPE)
               for _ in range(30)]

    watcher = job.pids()["watcher"]

    def waiting(pid):
        """Taken by the watcher (it holds the other end of the shell's code
        pipe), or waiting on its own (run again: blocked in flock)."""
        try:
            if handed(pid):
                return os.readlink(f"/proc/{pid}/fd/3") in {
                    os.readlink(f"/proc/{watcher}/fd/{fd}") for fd in os.listdir(f"/proc/{watcher}/fd")}
            with open(f"/proc/{pid}/wchan") as f:
                return "lock" in f.read()
        except OSError:
            return False
    wait_for(lambda: all(waiting(w.pid) for w in waiters), what="30 job-waits waiting", every=0.05)
    on_their_own = sum(not handed(w.pid) for w in waiters)
    release(go)
    firsts = []
    for w in waiters:
        out, _ = w.communicate()
        assert w.returncode == 4
        first, rest = out.decode().split("\n", 1)
        assert rest == "done\n"
        firsts.append(first.split("; ", 1)[1])
    assert sorted(firsts) == ["heard already by wait"] * 29 + ["heard by this wait"]
    assert on_their_own > 0                             # the watcher could not take them all
