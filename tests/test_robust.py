"""Issue 12: one bad file never silences the crew. One named regression test
per finding (test_finding_NN_...), each run through the real commands."""
import json
import os
import re
import shutil
import subprocess
import sys
import time

from hypothesis import given, settings, strategies as st

from conftest import BIN, cmd
from crewfile.background import sweep
from crewfile.core import errors, records, shapes
from crewfile.core.durations import MAX_SECONDS, parse_count, parse_duration
from crewfile.core.errors import BadFile, BadInput
from test_jobs import settled


def _one_line(stderr, name):
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{name}: "), stderr
    assert "Traceback" not in stderr


def test_finding_01_truncated_meta_is_named_not_a_traceback(crew):
    cmd("session-add", "a", check=True)
    cmd("session-add", "b", check=True)
    with open(os.path.join(crew.root, "sessions", "a", "meta"), "w") as f:
        f.write('{"name": "a')
    for argv in (["session-ls"], ["status-show", "a"], ["aside-say", "a", "hi"]):
        r = cmd(*argv)
        assert "Traceback" not in r.stderr and "SystemError" not in r.stderr, (argv, r.stderr)
        assert "sessions/a/meta" in r.stderr, (argv, r.stderr)
    # The watchers go on: crew-watch (its liveness probe reads every meta) and
    # wake-filter (it reads a session's meta to class its events).
    cmd("status-append", "b", "blocked", "need input", check=True)
    r = cmd("crew-watch", "--from-start", "--once", "--probe", "0.1")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    events = r.stdout
    assert " b blocked: need input" in events and " a registered" in events
    r = cmd("wake-filter", input=events)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert " b blocked: need input" in r.stdout


def test_finding_01_truncated_cursor_is_exit_2_one_line(crew, tmp_path):
    cmd("session-add", "a", check=True)
    cursor = tmp_path / "cursor"
    cursor.write_text('{"version": 1, "sessions": {"a": {"off')
    r = cmd("crew-watch", "--once", "--cursor", cursor)
    assert r.returncode == 2
    _one_line(r.stderr, "crew-watch")
    assert str(cursor) in r.stderr


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)


def test_finding_02_bad_sessions_marked_good_ones_listed(crew):
    for name in ("a", "b", "c", "d"):
        cmd("session-add", name, check=True)
    sessions = os.path.join(crew.root, "sessions")
    _write(os.path.join(sessions, "a", "meta"), "garbage")
    _write(os.path.join(sessions, "c", "meta"), '{"name": ["c"]}')
    os.rename(os.path.join(sessions, "d", "status"), os.path.join(sessions, "d", "status.real"))
    os.symlink("status.real", os.path.join(sessions, "d", "status"))
    r = cmd("session-ls")
    assert r.returncode == 5, r.stderr
    rows = {line.split()[0]: line for line in r.stdout.splitlines()[1:]}
    assert set(rows) == {"a", "b", "c", "d"}
    assert "registered" in rows["b"] and "error" not in rows["b"]
    for bad in ("a", "c", "d"):
        assert "error: " in rows[bad], rows[bad]
    assert sorted(line.split(":")[1].strip() for line in r.stderr.splitlines()) == ["a", "c", "d"]
    assert "Traceback" not in r.stderr
    r = cmd("session-ls", "--json")
    assert r.returncode == 5
    got = {row["name"]: row for row in json.loads(r.stdout)}
    assert got["b"]["kind"] == "crew" and "error" in got["a"] and "error" in got["c"]


def test_finding_02_job_ls_and_report_ls_mark_the_bad_entry(crew):
    for i in range(2):
        cmd("job-exec", "--handle", f"j{i}", "true", check=True)
    for i in range(2):
        assert cmd("job-wait", f"j{i}").returncode == 0
    # The table reads `heard` of a heard job (what it prints is copied there),
    # --json every file: each finds its damaged file.
    _write(os.path.join(crew.root, "jobs", "j0", "result"), '{"code": 999}')
    _write(os.path.join(crew.root, "jobs", "j0", "heard"), '{"by": "nobody"}')
    r = cmd("job-ls")
    assert r.returncode == 5
    rows = {line.split()[0]: line for line in r.stdout.splitlines()[1:]}
    assert "damaged" in rows["j0"] and "exited" in rows["j1"]
    _one_line(r.stderr, "job-ls")
    assert json.loads(cmd("job-ls", "--json").stdout)[0]["handle"] in ("j0", "j1")
    new = os.path.join(crew.root, "reports", "new")
    os.makedirs(new)
    os.mkdir(os.path.join(new, "w1,1700000000.M000001P1Q1.host"))
    _write(os.path.join(new, "w1,1700000001.M000001P1Q1.host"), "a report")
    r = cmd("report-ls")
    assert r.returncode == 5
    lines = r.stdout.splitlines()[1:]
    assert len(lines) == 2 and "error: " in lines[0] and "error" not in lines[1]
    _one_line(r.stderr, "report-ls")
    r = cmd("report-ls", "--json")                  # the same, as an `error` key
    assert r.returncode == 5
    got = json.loads(r.stdout)
    assert "error" in got[0] and "error" not in got[1]


def _due_now(path):
    """Move a schedule's base an hour back, so it is due (no sleeping)."""
    with open(path) as f:
        sched = json.load(f)
    sched["base"]["wall"] -= 3600
    sched["base"]["mono"] -= 3600
    _write(path, json.dumps(sched))


def test_finding_03_nudge_tick_reports_a_wrong_shape_schedule_and_goes_on(crew):
    """A valid schedule beside a wrong-shaped one is still acted on (here: the
    session has no pane, so it is refused and disarmed: acted on, recorded)."""
    cmd("session-add", "w", check=True)
    good = cmd("nudge-add", "--session", "w", "--every", "60", "--message", "go on",
               check=True).stdout.strip()
    nudges = os.path.join(crew.root, "nudges")
    _due_now(os.path.join(nudges, good))
    _write(os.path.join(nudges, "n0000000000"), '{"id":"n0000000000","every":1,"armed":true}')
    r = cmd("nudge-tick")
    assert r.returncode == 5, (r.stdout, r.stderr)
    assert r.returncode != 1          # 1 means "another tick is running"
    _one_line(r.stderr, "nudge-tick")
    assert "nudges/n0000000000" in r.stderr
    assert f"{good} w disarmed" in r.stdout
    r = cmd("nudge-ls")
    assert r.returncode == 5
    rows = {line.split()[0]: line for line in r.stdout.splitlines()[1:]}
    assert "error: " in rows["n0000000000"] and "error" not in rows[good]
    _one_line(r.stderr, "nudge-ls")


def test_finding_04_numbers_are_ascii_digits_and_bounded(crew):
    cmd("session-add", "w", check=True)
    for every in ("9" * 400, " 60", "\u0663", "1_000", "+5", "1e3", "60 ", "367d", "1.5", "0"):
        r = cmd("nudge-add", "--session", "w", "--every", every, "--message", "go")
        assert r.returncode == 2, (every, r.stderr)
        assert r.stderr.startswith("nudge-add: bad --every "), r.stderr
        assert len(r.stderr.splitlines()[0]) < 200
    assert not os.path.exists(os.path.join(crew.root, "nudges")) or not [
        n for n in os.listdir(os.path.join(crew.root, "nudges")) if not n.startswith(".")]
    for argv in (["status-show", "w", "--last", "\u0663"], ["status-show", "w", "--last", "+1"],
                 ["session-add", "x", "--pid", "1" + "0" * 30],
                 ["nudge-add", "--session", "w", "--every", "60", "--message", "m", "--max", "0"],
                 ["crew-watch", "--once", "--probe", "1e400"], ["job-wait", "j", "--tail", "-1"]):
        r = cmd(*argv)
        assert r.returncode == (125 if argv[0] == "job-wait" else 2), (argv, r.stderr)
        assert "Traceback" not in r.stderr and f"bad {argv[-2]} " in r.stderr, (argv, r.stderr)


def test_issue_14_one_duration_grammar_for_every_time_flag(crew):
    cmd("session-add", "w", check=True)
    sid = cmd("nudge-add", "--session", "w", "--every", "1h30m", "--message", "go",
              check=True).stdout.strip()
    with open(os.path.join(crew.root, "nudges", sid)) as f:
        assert json.load(f)["every"] == 5400
    assert cmd("nudge-add", "--session", "w", "--every", "2d", "--message", "go",
               "--replace").returncode == 0
    assert cmd("crew-watch", "--once", "--stale", "30m", "--probe", "90s", "--poll", "1.5").returncode == 0
    assert cmd("job-sweep", "--older-than", "1h30m", "--unheard-older-than", "2d").returncode == 0
    h = cmd("job-exec", "true", check=True).stdout.strip()
    assert cmd("job-wait", h, "--timeout", "1m30s").returncode == 0
    r = cmd("wake-send", "nobody", "--window", "1m", "--retry", "2s", input="")
    assert "bad --" not in r.stderr


def test_an_empty_duration_is_refused_not_read_as_the_default(crew):
    """protocol.md, "Durations and numbers": anything else is exit 2, the empty word too."""
    for argv in (["crew-down", "--timeout", ""], ["crew-up", "p", "--systemd", "--sweep", ""],
                 ["crew-up", "p", "--systemd", "--backoff-max", ""]):
        r = cmd(*argv)
        assert r.returncode == 2 and f"bad {argv[-2]} ''" in r.stderr, (argv, r.stderr)

HOSTILE = "a\nFAKE row\x1b[31m\x9b2J\u2028\tz"


def _clean(out):
    """No control character but the newline ending each line, no C1, no U+2028."""
    bad = [c for c in out if (ord(c) < 32 and c != "\n") or 0x7F <= ord(c) < 0xA0
           or c in "\u2028\u2029"]
    return not bad


def test_finding_05_human_output_is_escaped_everywhere(crew, tmp_path):
    cmd("session-add", "x", "--cwd", str(tmp_path), check=True)
    cmd("status-append", "x", "note", HOSTILE, check=True)
    # A hand-written line (the shell recipe allows any writer) with raw controls.
    with open(os.path.join(crew.root, "sessions", "x", "status"), "a") as f:
        f.write("2026-11-30T10:00:00.000Z note: raw\x1b]0;title\x07 \x9b end\n")
    r = cmd("session-ls")
    assert r.returncode == 0 and _clean(r.stdout) and len(r.stdout.splitlines()) == 2, r.stdout
    for argv in (["status-show", "x", "--last", "5"], ["crew-watch", "--from-start", "--once"]):
        r = cmd(*argv)
        assert r.returncode == 0 and _clean(r.stdout), (argv, r.stdout)
        assert "FAKE" not in "".join(line.split(" ", 1)[0] for line in r.stdout.splitlines())
    events = cmd("crew-watch", "--from-start", "--once").stdout.splitlines()
    assert [e.split(" ")[1] for e in events] == ["x"] * 3
    assert any(e.endswith("note: raw\\x1b]0;title\\x07 \\x9b end") for e in events), events
    # The escaped event still says the same: unescaping gives the writer's text.
    texts = [records.parse(e.replace(" x ", " ", 1)).text for e in events]
    assert HOSTILE in texts
    cmd("job-exec", "--session", "x", "--label", "l\x1bab", "--", "true")
    sid = cmd("nudge-add", "--session", "x", "--every", "60", "--message", "go",
              check=True).stdout.strip()
    _write(os.path.join(crew.root, "nudges", "n\x1b[2Jbad"), "{}")
    new = os.path.join(crew.root, "reports", "new")
    os.makedirs(new)
    _write(os.path.join(new, "x,1700000000.M000001P1Q1.h\x1b[2J"), "r")
    for argv in (["job-ls"], ["nudge-ls"], ["report-ls"], ["inbox-drain", "x"]):
        r = cmd(*argv)
        assert _clean(r.stdout) and _clean(r.stderr), (argv, r.stdout, r.stderr)
    assert sid in cmd("nudge-ls").stdout


def test_finding_09_year_0000_record_gives_well_formed_events(crew):
    cmd("session-add", "a", check=True)
    with open(os.path.join(crew.root, "sessions", "a", "status"), "a") as f:
        f.write("0000-01-01T00:00:00.000Z turn-started\n0000-01-01T00:00:01.000Z note: x\n")
    r = cmd("crew-watch", "--from-start", "--once")
    assert r.returncode == 0
    for line in r.stdout.splitlines():
        ts, name, rest = line.split(" ", 2)
        assert records.is_timestamp(ts) and name == "a", line
    assert "0000-01-01T00:10:01.000Z a stale: silent for 10m since note" in r.stdout.splitlines()
    assert records.timestamp(-1e15) == "0000-01-01T00:00:00.000Z"
    assert records.timestamp(1e15) == "9999-12-31T23:59:59.999Z"


# Every file and directory of the protocol, made a symlink (to an identical
# copy, so only the link itself is wrong), and a command that uses it: the
# same answer everywhere. (path under the crew, command, exit code)
SYMLINKED = [
    ("sessions", ["status-append", "x", "note", "hi"], 111),
    ("sessions", ["status-show", "x"], 111),
    ("sessions", ["session-ls"], 111),
    ("sessions", ["session-add", "y"], 111),
    ("sessions", ["crew-watch", "--once"], 111),
    ("sessions/x", ["status-append", "x", "note", "hi"], 111),
    ("sessions/x", ["status-show", "x"], 111),
    ("sessions/x", ["session-ls"], 5),
    ("sessions/x", ["inbox-drain", "x"], 111),
    ("sessions/x/meta", ["status-append", "x", "note", "hi"], 111),
    ("sessions/x/meta", ["status-show", "x"], 111),
    ("sessions/x/meta", ["session-ls"], 5),
    ("sessions/x/status", ["status-append", "x", "note", "hi"], 111),
    ("sessions/x/status", ["status-show", "x"], 111),
    ("sessions/x/status", ["session-ls"], 5),
    ("sessions/x/lock", ["status-append", "x", "note", "hi"], 111),
    ("sessions/x/inbox", ["inbox-drain", "x"], 111),
    ("nudges", ["nudge-ls"], 111),
    ("nudges", ["nudge-add", "--session", "x", "--every", "60", "--message", "m", "--replace"], 111),
    ("nudges/ID", ["nudge-ls"], 5),
    ("nudges/ID", ["nudge-tick"], 5),
    ("locks", ["nudge-tick"], 111),
    ("locks/nudges", ["nudge-rm", "ID"], 111),
    ("locks/nudge-tick", ["nudge-tick"], 111),
    ("jobs", ["job-ls"], 111),
    ("jobs", ["job-exec", "true"], 111),
    ("jobs/j1", ["job-wait", "j1"], 125),
    ("jobs/j1/spec", ["job-ls", "--json"], 5),      # (the table reads `heard` of a heard job)
    ("jobs/j1/result", ["job-ls", "--json"], 5),
    ("jobs/j1/result", ["job-wait", "j1"], 125),
    ("jobs/j1/heard", ["job-ls"], 5),
    ("reports", ["report-ls"], 111),
    ("reports/new", ["report-ls"], 111),
    ("reports/new/REPORT", ["report-ls"], 5),
]


def _symlink_crew(crew):
    cmd("session-add", "x", check=True)
    cmd("status-append", "x", "note", "hello", check=True)
    os.makedirs(os.path.join(crew.root, "locks"), exist_ok=True)
    sid = cmd("nudge-add", "--session", "x", "--every", "60", "--message", "m",
              check=True).stdout.strip()
    cmd("job-exec", "--handle", "j1", "true", check=True)
    assert cmd("job-wait", "j1").returncode == 0
    new = os.path.join(crew.root, "reports", "new")
    os.makedirs(new)
    report = "x,1700000000.M000001P1Q1.host"
    _write(os.path.join(new, report), "report")
    with open(os.path.join(crew.root, "sessions", "x", "inbox"), "w") as f:
        f.write("2026-11-30T10:00:00.000Z wake: 1-1-1 hi\n")
    for name in ("nudge-tick", "nudges"):
        open(os.path.join(crew.root, "locks", name), "a").close()
    return {"ID": sid, "REPORT": report}


def test_finding_06_one_symlink_rule_for_every_file_and_directory(crew):
    names = _symlink_crew(crew)
    for rel, argv, code in SYMLINKED:
        rel = "/".join(names.get(p, p) for p in rel.split("/"))
        argv = [names.get(a, a) for a in argv]
        path = os.path.join(crew.root, rel)
        real = path + ".real"
        os.rename(path, os.path.join(os.path.dirname(path), ".hidden-real"))
        real = os.path.join(os.path.dirname(path), ".hidden-real")
        os.symlink(real, path)
        try:
            r = cmd(*argv)
            where = (rel, argv, r.returncode, r.stdout, r.stderr)
            assert r.returncode == code, where
            assert "Traceback" not in r.stderr, where
            said = [line for line in r.stderr.splitlines() if "symlink is not followed" in line]
            assert len(said) == 1 and said[0].startswith(argv[0] + ": "), where
            assert rel in said[0], where
        finally:
            os.unlink(path)
            os.rename(real, path)


def test_finding_06_crew_watch_refuses_a_symlinked_session_once_and_goes_on(crew):
    cmd("session-add", "a", check=True)
    cmd("session-add", "b", check=True)
    sessions = os.path.join(crew.root, "sessions")
    os.rename(os.path.join(sessions, "a"), os.path.join(sessions, ".a-real"))
    os.symlink(".a-real", os.path.join(sessions, "a"))
    r = cmd("crew-watch", "--from-start", "--once")
    assert r.returncode == 0
    assert [line.split()[1:3] for line in r.stdout.splitlines()] == [["b", "registered:"],
                                                                      ["a", "problem:"]]
    assert len(r.stderr.splitlines()) == 1 and "sessions/a: a symlink is not followed" in r.stderr


def test_finding_07_job_exec_failing_early_leaves_no_job_directory(crew):
    os.makedirs(os.path.join(crew.root, "jobs"), mode=0o700, exist_ok=True)
    r = subprocess.run(["sh", "-c", f'ulimit -f 0; exec "$0" "$1" --handle early -- true',
                        sys.executable, os.path.join(BIN, "job-exec")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 111 and "Traceback" not in r.stderr, r.stderr
    assert [e for e in os.listdir(os.path.join(crew.root, "jobs"))] == []
    assert cmd("job-exec", "--handle", "early", "true").returncode == 0     # the handle is free
    assert cmd("job-wait", "early").returncode == 0


def test_finding_07_abandoned_job_directory_is_swept(crew):
    orphan = os.path.join(crew.root, "jobs", "j-dead00")
    os.makedirs(orphan)
    open(os.path.join(orphan, "alive"), "w").close()
    assert cmd("job-ls").stdout.count("\n") == 1            # never listed
    assert sweep.sweep(crew, now=time.time()) == []          # too young: may be mid-creation
    old = time.time() - sweep.ORPHAN_AGE - 60
    os.utime(orphan, (old, old))
    sweep.sweep(crew)
    assert not os.path.exists(orphan)


def test_finding_08_status_append_reads_stdin_lines_in_constant_memory(crew):
    """A 64 MB line without a newline, then a good line: the long one is
    skipped as it is read (peak memory far below its size), the good one kept."""
    cmd("session-add", "w", check=True)
    code = (
        "import resource, subprocess, sys, threading\n"
        "p = subprocess.Popen([sys.executable, sys.argv[1], 'w', 'log', '-'],"
        " stdin=subprocess.PIPE, stderr=subprocess.PIPE)\n"
        "def feed():\n"
        "    chunk = b'x' * (1 << 20)\n"
        "    for _ in range(64):\n"
        "        p.stdin.write(chunk)\n"
        "    p.stdin.write(b'\\nafter the long one\\n')\n"
        "    p.stdin.close()\n"
        "t = threading.Thread(target=feed); t.start()\n"
        "err = p.stderr.read(); p.wait(); t.join()\n"
        "print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
        "sys.stderr.write(err.decode())\n")
    r = subprocess.run([sys.executable, "-c", code, os.path.join(BIN, "status-append")],
                       capture_output=True, text=True, timeout=300)
    rc, peak_kb = map(int, r.stdout.split())
    assert rc == 2 and "stdin line 1: longer than 16384 bytes" in r.stderr, r.stderr
    assert peak_kb < 48 * 1024, f"peak {peak_kb} kB for a 64 MB line"
    assert cmd("status-show", "w").stdout.count("log: after the long one") == 1


def test_finding_08_crew_hook_reads_an_oversized_payload_in_bounded_memory(crew):
    """A 96 MB hook payload: read to its end (the agent's write never fails
    on a closed pipe), ignored with one line, exit 0, peak memory far below
    its size, nothing recorded."""
    cmd("session-add", "w", check=True)
    before = open(os.path.join(crew.root, "sessions", "w", "status"), "rb").read()
    code = (
        "import resource, subprocess, sys, threading\n"
        "p = subprocess.Popen([sys.executable, sys.argv[1]],"
        " stdin=subprocess.PIPE, stderr=subprocess.PIPE)\n"
        "wrote = []\n"
        "def feed():\n"
        "    chunk = b'{\"session_id\": \"' + b'x' * (1 << 20)\n"
        "    for _ in range(96):\n"
        "        p.stdin.write(chunk)\n"
        "    p.stdin.close(); wrote.append(1)\n"
        "t = threading.Thread(target=feed); t.start()\n"
        "err = p.stderr.read(); p.wait(); t.join()\n"
        "print(p.returncode, len(wrote), resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
        "sys.stderr.write(err.decode())\n")
    r = subprocess.run([sys.executable, "-c", code, os.path.join(BIN, "crew-hook")],
                       capture_output=True, text=True, timeout=300)
    rc, fed, peak_kb = map(int, r.stdout.split())
    assert rc == 0 and fed == 1, r.stderr
    assert r.stderr.count("\n") == 1 and "malformed payload: over" in r.stderr, r.stderr
    assert peak_kb < 64 * 1024, f"peak {peak_kb} kB for a 96 MB payload"
    assert open(os.path.join(crew.root, "sessions", "w", "status"), "rb").read() == before


def test_finding_08_wake_filter_drops_an_overlong_line_in_bounded_memory(crew):
    cmd("session-add", "w", check=True)
    good = "2026-11-30T10:00:00.000Z w blocked: need input\n"
    r = cmd("wake-filter", input="x" * (4 << 20) + "\n" + good)
    assert r.stdout == good
    assert "longer than" in r.stderr and len(r.stderr.splitlines()) == 1


def _recipe():
    """protocol.md's shell writer (the indented block after `# append-record`)."""
    text = open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                             "protocol.md")).read()
    start = text.index("    # append-record DIR LINE")
    block = []
    for line in text[start:].splitlines():
        if line and not line.startswith("    "):
            break
        block.append(line[4:])
    return "\n".join(block).strip() + "\n"


def test_finding_13_shell_recipe_cuts_a_fragment_and_writes_once(crew, tmp_path):
    """A killed writer's fragment is cut, not glued onto; a 16 KB record is
    one write(2) (counted with strace when it is installed)."""
    cmd("session-add", "w", check=True)
    sdir = os.path.join(crew.root, "sessions", "w")
    script = tmp_path / "append-record"
    script.write_text(_recipe())
    with open(os.path.join(sdir, "status"), "a") as f:
        f.write("2026-11-30T10:00:01.000Z turn-started: half a rec")        # killed mid-write
    big = "x" * 16000
    argv = ["dash", str(script), sdir, f"2026-11-30T10:00:02.000Z note: {big}"]
    if shutil.which("strace"):
        # -ff: one trace file per process, so a write is never split into
        # "<unfinished ...>" and "<... write resumed>" lines by another
        # process's call (seen once under load with -f: no whole line matched)
        trace = tmp_path / "trace"
        subprocess.run(["strace", "-ff", "-e", "trace=write", "-o", str(trace), *argv], check=True)
        text = "".join(p.read_text() for p in sorted(tmp_path.glob("trace.*")))
        writes = [line for line in text.splitlines()
                  if line.startswith("write(") and line.endswith("= 16032")]
        assert len(writes) == 1, text[-2000:]
    else:
        subprocess.run(argv, check=True)
    subprocess.run(["dash", str(script), sdir, "2026-11-30T10:00:03.000Z idle"], check=True)
    with open(os.path.join(sdir, "status"), "rb") as f:
        lines = f.read().split(b"\n")
    assert lines[-1] == b"" and b"half a rec" not in b"".join(lines)
    assert lines[-3] == f"2026-11-30T10:00:02.000Z note: {big}".encode()
    assert lines[-2] == b"2026-11-30T10:00:03.000Z idle"
    st = cmd("status-show", "w")
    assert "generating: no" in st.stdout and st.stderr == ""


def test_exit_codes_protocol_table_is_errors_py():
    """Issue 12: every exit code comes from errors.py, and protocol.md's table
    lists exactly those codes; no command module returns a literal code."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    text = open(os.path.join(root, "protocol.md")).read()
    section = text[text.index("\n## Exit codes\n"):]
    section = section[:section.index("\n## ", 5)]
    documented = {int(m) for m in re.findall(r"^\| (\d+) \|", section, re.M)}
    defined = {v for k, v in vars(errors).items() if k.isupper() and type(v) is int}
    assert documented == defined
    literal = re.compile(r"(return|_exit\(|exit\()\s*(?!0\b)\d+|return \d+ if|(EXIT|CODE)\s*=\s*\d+")
    for d in ("lib/crewfile", "lib/crewfile/cmd"):
        for name in os.listdir(os.path.join(root, d)):
            if name.endswith(".py") and name != "errors.py":
                src = open(os.path.join(root, d, name)).read()
                assert not literal.search(src), (name, literal.search(src).group(0))


def test_issue_14_moments_until_and_since(crew):
    cmd("session-add", "w", check=True)
    status = os.path.join(crew.root, "sessions", "w", "status")
    with open(status, "a") as f:
        f.write("2026-01-01T08:00:00.000Z note: old\n2026-01-02T08:00:00.000Z note: newer\n")
    r = cmd("status-show", "w", "--since", "2026-01-02 00:00")
    assert r.returncode == 0
    assert "note: newer" in r.stdout and "note: old" not in r.stdout
    # Read back from the newest record to the first older one.
    records = r.stdout.split("\ntmux: ", 1)[1].splitlines()[1:]
    assert records[-1].endswith("note: newer") and not [x for x in records if "registered" in x]
    cmd("status-append", "w", "note", "now", check=True)
    assert [line.split(" ", 1)[1] for line in json.loads(
        cmd("status-show", "w", "--json", "--since", "1h").stdout)["records"]] == ["note: now"]
    events = cmd("crew-watch", "--once", "--since", "2026-01-01T12:00Z").stdout.splitlines()
    assert [e.split(" ", 2)[2] for e in events] == ["note: newer", "registered: kind=crew",
                                                    "note: now"]
    assert cmd("crew-watch", "--once", "--since", "1h", "--cursor", "c").returncode == 2
    for bad in ("tomorrowish", "2026-13-01", "99999-01-01"):
        r = cmd("status-show", "w", "--since", bad)
        assert r.returncode == 2 and r.stderr.startswith("status-show: bad --since"), r.stderr
    sid = cmd("nudge-add", "--session", "w", "--every", "60", "--message", "go",
              "--until", "2099-01-01 08:00", check=True).stdout.strip()
    path = os.path.join(crew.root, "nudges", sid)
    with open(path) as f:
        sched = json.load(f)
    assert sched["until"] > 4e9
    assert cmd("nudge-add", "--session", "w", "--every", "60", "--message", "go", "--replace",
               "--until", "2020-01-01").returncode == 2          # already past
    sched["until"] = 1.0                                       # the captain is back
    _write(path, json.dumps(sched))
    r = cmd("nudge-tick")
    assert r.returncode == 0 and f"{sid} - disarmed: until:" in r.stdout, r.stdout
    with open(path) as f:
        assert json.load(f)["armed"] is False


def test_issue_14_dateutil_only_imported_when_a_moment_is_given():
    code = ("import sys; sys.path.insert(0, 'lib'); from crewfile.cli import parse; "
            "from crewfile.cmd import nudge_add, status_show, crew_watch; "
            "print('dateutil' in sys.modules)")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root)
    assert r.stdout.strip() == "False", r.stderr


# -- property tests of the checkers themselves ---------------------------------------


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner,
                                                                  max_size=6),
    max_leaves=25)
_KINDS = ["meta", "schedule", "job-spec", "job-pids", "job-result", "job-heard", "job-notice",
          "cursor", "cursor-entry"]


@settings(max_examples=2000)
@given(st.sampled_from(_KINDS), _json_values, st.data())
def test_shape_check_raises_only_badfile(kind, value, data):
    """Any JSON value, also objects made of the kind's own keys with values
    of any type: the answer is the value itself or BadFile, nothing else."""
    keys = list(shapes.SHAPES[kind])
    if data.draw(st.booleans()):
        value = data.draw(st.dictionaries(st.sampled_from(keys), _json_values, max_size=len(keys)))
    try:
        assert shapes.check(kind, value, "/x") is value
    except BadFile as e:
        assert e.path == "/x" and "\n" not in str(e)


@settings(max_examples=3000)
@given(st.text(alphabet=st.sampled_from(list("0123456789.dhms +-_e\u0663 ")), max_size=14)
       | st.text(max_size=14))
def test_duration_and_count_parsers_raise_only_badinput(text):
    try:
        v = parse_duration(text, "--x", positive=False)
        assert 0 <= v <= MAX_SECONDS and set(text) <= set("0123456789.dhms")
    except BadInput:
        pass
    try:
        n = parse_count(text, "--n")
        assert 0 <= n <= 10 ** 6 and text.isascii() and text.isdigit()
    except BadInput:
        pass


def test_finding_02_inbox_drain_delivers_the_good_notices_and_says_exit_5(crew):
    cmd("session-add", "p", check=True)
    with open(os.path.join(crew.root, "sessions", "p", "inbox"), "w") as f:
        f.write("2026-11-30T10:00:00.000Z wake: 1-1-1 first\ngarbage\x1b[2J\n"
                "2026-11-30T10:00:01.000Z wake: 1-1-2 second\n")
    r = cmd("inbox-drain", "p")
    assert r.returncode == 5
    assert [line.split(" ", 3)[3] for line in r.stdout.splitlines()] == ["first", "second"]
    _one_line(r.stderr, "inbox-drain")
    assert cmd("inbox-drain", "p").returncode == 0


def test_a_command_started_with_a_standard_descriptor_closed_says_so_in_one_line(crew, run, tmp_path):
    """stdout or stdin closed when a command starts (`>&-`, `<&-`): one line
    on stderr and the system code, no traceback; the number stays taken
    (/dev/null, the wrong way round), so no file opened later becomes the
    command's stdout. job-wait refuses before it hears anything: the
    outcome stays for a notice or another wait."""

    def closed(argv, fd):
        return subprocess.run(["sh", "-c", f'"$@" {fd}>&-', "sh", sys.executable,
                               os.path.join(BIN, argv[0]), *argv[1:]],
                              capture_output=True, text=True, env=dict(os.environ, CREWFILE_DIR=crew.root))
    for name in ("job-ls", "session-ls", "nudge-ls"):
        proc = closed([name], 1)
        assert (proc.returncode, proc.stderr) == (111, f"{name}: standard output is closed\n")
    proc = closed(["wake-filter"], 0)
    assert proc.returncode == 111 and proc.stderr.count("\n") == 1
    h = run("job-exec", "--", "sh", "-c", "echo hi; exit 3").stdout.strip()
    job = settled(crew, h)
    proc = closed(["job-wait", h], 1)
    assert (proc.returncode, proc.stderr) == (
        125, "job-wait: standard output is not open for writing: nothing heard\n")
    assert job.heard() is None
    assert run("job-wait", h).returncode == 3
    assert job.heard()["by"] == "wait"
