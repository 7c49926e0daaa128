"""The one writer and the one tail reader, under concurrency, kills and bad files."""
import gc
import os
import random
import re
import signal
import subprocess
import sys
import time

import pytest
from hypothesis import given, settings, strategies as st

from crewfile.core import logfile, logwrite, records
from crewfile.core.errors import SystemFailure

LIB = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib")


def lines_of(path):
    with open(path, "rb") as f:
        return f.read().split(b"\n")


def test_eight_writers_half_library_half_flock1_with_long_lines(tmp_path):
    log, lock = str(tmp_path / "status"), str(tmp_path / "lock")
    long_text = "L" * 5000                      # over 4 KiB: beyond PIPE_BUF
    py = ("import sys; sys.path.insert(0, %r)\n"
          "from crewfile.core import logwrite, records\n"
          "for i in range(2000):\n"
          "    t = (%r if i %% 7 == 0 else 'short') + ' w%%s-%%d' %% (sys.argv[1], i)\n"
          "    logwrite.append(%r, %r, [records.new_line('note', t)])\n") % (LIB, long_text, log, lock)
    # flock(1) on a descriptor: the documented lock path, one lock per line.
    sh = ('exec 9>"$2"; for i in $(seq 0 1999); do if [ $((i % 7)) = 0 ]; then t=' + long_text +
          '; else t=short; fi; flock 9; echo "2026-11-29T22:01:17.123Z note: $t s$1-$i" >> "$3";'
          ' flock -u 9; done')
    procs = [subprocess.Popen([sys.executable, "-c", py, str(n)]) for n in range(4)]
    procs += [subprocess.Popen(["bash", "-c", sh, "sh", str(n), lock, log]) for n in range(4)]
    assert [p.wait() for p in procs] == [0] * 8
    raw = lines_of(log)
    assert raw[-1] == b""
    recs = [records.parse(line) for line in raw[:-1]]
    assert len(recs) == 16000 and all(recs)
    tags = {r.text.rsplit(" ", 1)[1] for r in recs}
    assert tags == {f"{w}{n}-{i}" for w in "ws" for n in range(4) for i in range(2000)}
    for r in recs:
        assert r.text.startswith(long_text if int(r.text.rsplit("-", 1)[1]) % 7 == 0 else "short")


def test_sigkilled_writers_never_leave_a_torn_record(tmp_path):
    log, lock = str(tmp_path / "status"), str(tmp_path / "lock")
    py = ("import sys; sys.path.insert(0, %r)\n"
          "from crewfile.core import logwrite, records\n"
          "i = 0\n"
          "while True:\n"
          "    i += 1\n"
          "    logwrite.append(%r, %r, [records.new_line('note', 'k%%d:' %% i + 'x' * 16000)])\n"
          ) % (LIB, log, lock)
    rng = random.Random(7)
    seen_partial = 0
    for round_ in range(12):
        writers = [subprocess.Popen([sys.executable, "-c", py]) for _ in range(3)]
        deadline = time.monotonic() + rng.uniform(0.05, 0.3)
        while time.monotonic() < deadline:          # readers read while writers write
            stats = logfile.TailStats()
            for line in logfile.lines_backwards(log, stats, limit_bytes=200000):
                rec = records.parse(line)
                assert rec is not None and re.fullmatch(r"k\d+:x{16000}", rec.text)
            seen_partial += stats.partial
        for w in writers:
            w.send_signal(signal.SIGKILL)
        for w in writers:
            w.wait()
    # One more append after the kills: the file is all whole records again.
    logwrite.append(log, lock, [records.new_line("note", "after")])
    raw = lines_of(log)
    assert raw[-1] == b""
    recs = [records.parse(line) for line in raw[:-1]]
    assert all(recs)
    assert all(r.text == "after" or re.fullmatch(r"k\d+:x{16000}", r.text) for r in recs)


def test_dead_writers_fragment_is_cut_before_the_next_record(tmp_path):
    log, lock = str(tmp_path / "status"), str(tmp_path / "lock")
    logwrite.append(log, lock, [records.new_line("idle")])
    with open(log, "ab") as f:
        f.write(b"2026-11-29T22:01:17.123Z note: cut off mid-wri")   # a killed writer
    stats = logfile.TailStats()
    assert [records.parse(l).kind for l in logfile.lines_backwards(log, stats)] == ["idle"]
    assert stats.partial == 1 and "partial" in stats.warning()
    logwrite.append(log, lock, [records.new_line("turn-ended")])
    assert [records.parse(l).kind for l in lines_of(log)[:-1]] == ["idle", "turn-ended"]


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=40).map(lambda b: b.replace(b"x", b"\n")),
       within=st.none() | st.integers(1, 45), block=st.integers(1, 9))
def test_lines_end_is_the_offset_past_the_last_newline(tmp_path_factory, data, within, block):
    """The one last-line finder (the writer's fragment cut, crew-watch's start
    at a log's end), read in blocks of any size: as rfind over the window."""
    path = tmp_path_factory.mktemp("l") / "log"
    path.write_bytes(data + b"tail after size")
    floor = 0 if within is None else max(0, len(data) - within)
    nl = data.rfind(b"\n", floor)
    want = len(data) if data.endswith(b"\n") or not data else nl + 1 if nl >= 0 else floor
    fd = os.open(path, os.O_RDONLY)
    try:
        logfile.BLOCK, old = block, logfile.BLOCK
        try:
            assert logfile.lines_end(fd, len(data), within) == want
        finally:
            logfile.BLOCK = old
    finally:
        os.close(fd)


_KINDS = ["registered", "ended", "turn-ended", "idle", "started"]


def _line(kind_or_garbage):
    """One line of a generated log: a record (some texts naming another kind),
    a line too long for a record, or garbage that names a kind."""
    what, n = kind_or_garbage
    if what == "long":
        return b"2026-11-30T08:00:00.000Z ended: " + b"x" * (records.MAX_LINE + n) + b"\n"
    if what == "garbage":
        return b"not a record ended registered\n"
    return records.new_line(what, f"the {_KINDS[n % len(_KINDS)]} one" if n % 3 else "").encode()


_LOGS = st.lists(st.tuples(st.sampled_from(_KINDS + ["long", "garbage"]), st.integers(0, 9)),
                 max_size=40)


@settings(max_examples=300, deadline=None)
@given(logs=st.lists(_LOGS, min_size=1, max_size=3), cut=st.booleans(),
       limit=st.none() | st.integers(0, 3000), block=st.integers(1, 300),
       shared=st.integers(0, 5), kinds=st.sets(st.sampled_from(_KINDS), min_size=1),
       max_line=st.sampled_from([records.MAX_LINE, None, 40]))
def test_a_question_read_on_alone_finds_what_the_shared_read_finds(
        tmp_path_factory, logs, cut, limit, block, shared, kinds, max_line):
    """Backwards.last_of past its SHARED records reads only the lines naming a
    kind asked: over rotations, a byte limit, blocks of any size, lines cut
    at a block's edge, a partial last line, overlong and garbage lines, it
    answers as the read of every record does (and counts the same)."""
    d = tmp_path_factory.mktemp("l")
    paths = [str(d / ("status" if i == 0 else f"status.{i}")) for i in range(len(logs))]
    for path, log in zip(paths, logs):
        with open(path, "wb") as f:
            f.write(b"".join(_line(x) for x in log) + (b"2026-11-30T08:00:00.000Z ended" if cut else b""))
    old = logfile.BLOCK, logfile.SHARED
    logfile.BLOCK, logfile.SHARED = block, shared
    try:
        every = logfile.Backwards(paths, logfile.TailStats(), limit)
        want = next((rec for rec in every if rec.kind in kinds), None)
        alone = logfile.Backwards(paths, logfile.TailStats(), limit)
        assert alone.last_of(kinds) == want
        marks = [f" {k}".encode() for k in kinds]
        for path in paths:
            stats, only = logfile.TailStats(), logfile.TailStats()
            lines = [x for x in logfile.lines_backwards(path, stats, limit, max_line)
                     if any(m in x for m in marks)]
            assert list(logfile.lines_backwards(path, only, limit, max_line, only=marks)) == lines
            assert (only.partial, only.garbage) == (stats.partial, stats.garbage)
    finally:
        logfile.BLOCK, logfile.SHARED = old


def test_a_long_life_is_read_once_for_its_registration(tmp_path):
    """A live session's newest `registered` lies as far back as its log
    goes: the question reads on alone, parsing the few lines that name it,
    and the records the shared read parsed stay SHARED at most."""
    log = str(tmp_path / "status")
    with open(log, "wb") as f:
        f.write(records.new_line("registered").encode())
        f.write(b"".join(records.new_line(k).encode() for k in ("turn-started", "turn-ended")) * 9000)
    scan = logfile.Backwards([log, log + ".1"], logfile.TailStats(), 1 << 20)
    assert scan.last_of(("registered", "ended", "closed")).kind == "registered"
    assert len(scan._seen) == logfile.SHARED
    assert scan.last_of(("turn-ended",)) is scan._seen[0]


def test_full_disk_leaves_no_half_record(tmp_path):
    """A write cut short by the file-size limit (as by a full disk) is undone."""
    log, lock = str(tmp_path / "status"), str(tmp_path / "lock")
    logwrite.append(log, lock, [records.new_line("idle")])
    size = os.path.getsize(log)
    py = ("import sys, signal, resource; sys.path.insert(0, %r)\n"
          "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
          "resource.setrlimit(resource.RLIMIT_FSIZE, (%d, %d))\n"
          "from crewfile.core import logwrite, records\n"
          "from crewfile.core.errors import SystemFailure\n"
          "try:\n"
          "    logwrite.append(%r, %r, [records.new_line('note', 'y' * 10000)])\n"
          "except SystemFailure as e:\n"
          "    print(e); sys.exit(111)\n") % (LIB, size + 4096, size + 4096, log, lock)
    proc = subprocess.run([sys.executable, "-c", py], capture_output=True, text=True)
    assert proc.returncode == 111, proc.stderr
    assert "cannot append" in proc.stdout
    assert os.path.getsize(log) == size
    assert [records.parse(l).kind for l in lines_of(log)[:-1]] == ["idle"]


def test_reader_skips_garbage_and_invalid_utf8_and_keeps_good_lines(tmp_path):
    log = tmp_path / "status"
    log.write_bytes(b"2026-11-29T22:01:17.123Z turn-started\n"
                    b"garbage line\n"
                    b"2026-11-29T22:01:18.123Z paused: caf\xe9\n"
                    b"\n"
                    b"2026-11-29T22:01:19.123Z turn-ended: ok\n"
                    b"2026-11-29T22:01:20.123Z idle")
    stats = logfile.TailStats()
    recs = list(logfile.records_backwards([str(log)], stats))
    assert [r.kind for r in recs] == ["turn-ended", "turn-started"]
    assert stats.partial == 1 and stats.garbage == 3


def test_tail_reader_crosses_block_boundaries_and_huge_lines(tmp_path):
    log, lock = str(tmp_path / "status"), str(tmp_path / "lock")
    want = [records.new_line("note", f"{i} " + "z" * (i * 37 % 9000)) for i in range(300)]
    logwrite.append(log, lock, want[:150])
    with open(log, "ab") as f:
        f.write(b"G" * (3 * logfile.BLOCK) + b"\n")         # an overlong garbage line
    logwrite.append(log, lock, want[150:])
    stats = logfile.TailStats()
    got = [r.line() for r in logfile.records_backwards([log], stats)]
    assert got[::-1] == want and stats.garbage == 1
    assert [r.line() for r in logfile.last_records([log], 3, logfile.TailStats())] == want[-3:]


def test_rotation_keeps_every_record_once(tmp_path, monkeypatch):
    monkeypatch.setenv("CREWFILE_ROTATE_BYTES", str(records.MAX_LINE))
    monkeypatch.setenv("CREWFILE_ROTATE_KEEP", "50")
    log, lock = str(tmp_path / "status"), str(tmp_path / "lock")
    want = [records.new_line("note", f"{i} " + "r" * 1000) for i in range(100)]
    for line in want:
        logwrite.append(log, lock, [line], rotate=logfile.rotate_limits())
    files = [logfile.rotated(log, i) for i in range(51)]
    assert os.path.exists(logfile.rotated(log, 3))
    assert all(os.path.getsize(f) <= records.MAX_LINE for f in files if os.path.exists(f))
    got = [r.line() for r in logfile.records_backwards(files, logfile.TailStats())]
    assert got[::-1] == want


def test_a_planted_symlink_is_not_followed(tmp_path):
    target = tmp_path / "victim"
    target.write_text("precious\n")
    log = tmp_path / "status"
    os.symlink(target, log)
    with pytest.raises(SystemFailure):
        logwrite.append(str(log), str(tmp_path / "lock"), [records.new_line("idle")])
    assert target.read_text() == "precious\n"


def test_a_state_query_reads_the_last_mib_of_the_log_over_its_rotations(tmp_path):
    """The limit counts the current file and its rotations together: a
    long-lived log costs a query no more than 1 MiB (protocol.md)."""
    log = str(tmp_path / "status")
    note = b"2026-11-30T08:00:00.000Z note: " + b"x" * 480 + b"\n"      # 512 bytes
    with open(log + ".1", "wb") as f:
        f.write(b"2026-11-30T07:00:00.000Z ended\n" + note * 1200)          # 600 KiB after it
    with open(log, "wb") as f:
        f.write(b"2026-11-30T08:59:00.000Z turn-started\n" + note * 1200)
    paths = [log, log + ".1", log + ".2"]
    scan = logfile.Backwards(paths, logfile.TailStats(), 1 << 20)
    assert scan.last_of({"turn-started"}).kind == "turn-started"      # 600 KiB back
    assert scan.last_of({"ended"}) is None                             # 1.2 MiB back: beyond
    assert logfile.Backwards(paths, logfile.TailStats(), 1 << 20).last_of({"ended"}) is None
    assert logfile.Backwards(paths, logfile.TailStats(), 2 << 20).last_of({"ended"}).kind == "ended"
    assert scan.last().text.startswith("xxx")


def test_last_record_behind_a_mib_of_garbage_is_still_found(tmp_path):
    """last() has no byte limit: the newest record is found behind garbage
    the state scan gave up on."""
    log = str(tmp_path / "status")
    with open(log, "wb") as f:
        f.write(b"2026-11-30T08:00:00.000Z idle\n" + (b"garbage " * 100 + b"\n") * 1400)
    scan = logfile.Backwards([log, log + ".1"], logfile.TailStats(), 1 << 20)
    assert scan.last_of({"idle"}) is None
    assert scan.last().kind == "idle"


def test_a_dropped_reader_closes_its_file_without_the_cyclic_collector(tmp_path):
    """crew-status turns the cyclic collector off: a reader left half-read must
    close its file when dropped, or every session's log stays open."""
    log = str(tmp_path / "status")
    with open(log, "wb") as f:
        f.write(b"2026-11-30T08:00:00.000Z turn-started\n2026-11-30T08:01:00.000Z idle\n")

    def open_on_log():
        return [fd for fd in os.listdir("/proc/self/fd")
                if os.path.realpath(f"/proc/self/fd/{fd}") == log]

    gc.disable()
    try:
        scan = logfile.Backwards([log, log + ".1"], logfile.TailStats(), 1 << 20)
        assert scan.last_of({"idle"}).kind == "idle"        # the read stops halfway
        assert open_on_log()
        del scan
        assert open_on_log() == []
    finally:
        gc.enable()
