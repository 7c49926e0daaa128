"""End-to-end acknowledgement: crew-watch --resume C | wake-filter | wake-send P --cursor C.

The position a restart resumes from is the one whose wakes are in the
inbox (or were filtered out); a replayed event is recognised by its id."""
import json
import os
import random
import shutil
import signal
import subprocess
import sys

import pytest

from conftest import BIN, wait_for
from crewfile.wake import inbox
from crewfile.wake.tell import Teller
from crewfile.wake.watch import Watcher
from crewfile.session.sessions import Session, register
from crewfile.wake.wakefilter import Filter
from crewfile.wake.wakesend import Sender


def py(name):
    return f"{sys.executable} {os.path.join(BIN, name)}"


def pipeline(cursor, primary="boss", once=True, watch_args="", quiet=True):
    """The acknowledged pipe as a shell line."""
    return (f"{py('crew-watch')} --resume {cursor} {'--once' if once else ''} {watch_args}"
            f" | {py('wake-filter')} | {py('wake-send')} {primary} --cursor {cursor}"
            f" --window 0.01 --retry 0.05 {'--quiet' if quiet else ''}")


def run_pipe(crew, cursor, **kw):
    p = subprocess.run(["bash", "-c", "set -o pipefail; " + pipeline(cursor, **kw)],
                       env={**os.environ, "CREWFILE_DIR": crew.root},
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return p


def wakes(crew, name="boss"):
    """Every wake notice's event text, pending and drained, in order."""
    got = []
    for path in (Session(crew, name).dir + "/inbox.read", Session(crew, name).dir + "/inbox"):
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                got += [line.split(" ", 3)[3].rstrip("\n") for line in f if " wake: " in line]
    return got


def expected(crew):
    """What `crew-watch --from-start --once | wake-filter` lists."""
    p = subprocess.run(["bash", "-c", f"{py('crew-watch')} --from-start --once | {py('wake-filter')}"],
                       env={**os.environ, "CREWFILE_DIR": crew.root},
                       stdout=subprocess.PIPE, text=True, timeout=60, check=True)
    return p.stdout.splitlines()


def say(crew, name, kind, text=""):
    Session(crew, name).append(kind, text)


def test_positions_are_a_trailing_field_the_plain_filter_passes_on(crew, run):
    register(crew, "w1")
    say(crew, "w1", "done", "shipped")
    plain = run("crew-watch", "--from-start", "--once").stdout.splitlines()
    positioned = run("crew-watch", "--from-start", "--once", "--positions").stdout.splitlines()
    assert [l.partition("\t")[0] for l in positioned] == plain
    token = json.loads(positioned[-1].partition("\t")[2])
    assert token["s"] == "w1" and token["prev"] == "registered" and token["paused"] is False
    assert token["id"] == f"w1:{token['at']['ino']}:{token['at']['off']}"
    out = run("wake-filter", input="\n".join(positioned) + "\n").stdout.splitlines()
    # the held `registered` goes on as an acknowledgement only; the wake keeps its token
    assert out == ["\t" + positioned[0].partition("\t")[2], positioned[1]]


def test_the_issue_walkthrough_primary_registered_after_the_pipeline(crew, tmp_path):
    """wake-send before the primary exists, killed; the done wake is not lost."""
    cur = str(tmp_path / "cursor")
    register(crew, "w1")
    err = tmp_path / "err"
    with open(err, "wb") as f:
        proc = subprocess.Popen(["bash", "-c", pipeline(cur, once=False, quiet=False)],
                                env={**os.environ, "CREWFILE_DIR": crew.root}, stderr=f,
                                start_new_session=True)
    try:
        wait_for(lambda: os.path.exists(cur), what="the first position written")
        say(crew, "w1", "done", "shipped")
        say(crew, "w1", "turn-started")
        # wake-send holds the wake (no primary), so the position stays before it
        wait_for(lambda: b"not registered" in err.read_bytes(), what="wake-send holding")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    register(crew, "boss", kind="primary")
    run_pipe(crew, cur)
    assert [w.split(" ", 2)[2] for w in wakes(crew)] == ["done: shipped"]
    assert wakes(crew) == expected(crew)


def test_a_replay_after_a_crash_before_the_cursor_is_not_posted_twice(crew, tmp_path):
    cur = str(tmp_path / "cursor")
    register(crew, "boss", kind="primary")
    register(crew, "w1")
    run_pipe(crew, cur)
    before = str(tmp_path / "cursor.before")
    shutil.copy(cur, before)
    for i in range(5):
        say(crew, "w1", "blocked", f"db {i}")
        say(crew, "w1", "turn-started")
    run_pipe(crew, cur)
    assert len(wakes(crew)) == 5
    inbox.drain(crew, "boss")                     # some were even read meanwhile
    say(crew, "w1", "done")
    shutil.copy(before, cur)                      # as if killed after the append, before the cursor
    run_pipe(crew, cur)
    assert wakes(crew) == expected(crew) and len(wakes(crew)) == 6


def test_a_fold_is_kept_across_a_restart(crew, tmp_path):
    """blocked, restart, blocked again: the repeat is still folded into the first."""
    cur = str(tmp_path / "cursor")
    register(crew, "boss", kind="primary")
    register(crew, "w1")
    run_pipe(crew, cur)
    say(crew, "w1", "paused", "awaiting captain")
    say(crew, "w1", "blocked", "db")
    run_pipe(crew, cur)
    say(crew, "w1", "blocked", "db again")
    say(crew, "w1", "idle")
    run_pipe(crew, cur, watch_args="")
    assert wakes(crew) == expected(crew)
    assert [w.split(" ", 2)[2] for w in wakes(crew)] == ["blocked: db"]


def test_filtered_out_events_advance_the_cursor(crew, tmp_path):
    cur = str(tmp_path / "cursor")
    register(crew, "boss", kind="primary")
    register(crew, "w1")
    run_pipe(crew, cur)
    for _ in range(3):
        say(crew, "w1", "turn-started")
        say(crew, "boss", "turn-started")
    run_pipe(crew, cur)
    with open(cur) as f:
        state = json.load(f)["sessions"]
    assert state["w1"]["off"] == os.path.getsize(Session(crew, "w1").status_path)
    assert state["boss"]["off"] == os.path.getsize(Session(crew, "boss").status_path)
    assert wakes(crew) == []


def test_resume_and_cursor_together_is_a_usage_error(crew, run, tmp_path):
    p = run("crew-watch", "--resume", tmp_path / "a", "--cursor", tmp_path / "b")
    assert p.returncode == 2 and p.stderr.startswith("crew-watch: --cursor and --resume")


def test_hostile_position_tokens_never_crash_a_stage_nor_spoil_the_cursor(crew, tmp_path):
    """A composed pipe may feed anything: each bad token is a warning, the
    line is taken as plain text, and the cursor stays one crew-watch reads."""
    cur = str(tmp_path / "cursor")
    register(crew, "boss", kind="primary")
    register(crew, "w1")
    good = {"id": "w1:1:2", "s": "w1", "prev": None, "paused": False,
            "at": {"ino": 1, "off": 2, "n": 1}}
    rng = random.Random(4)
    bad_values = [None, 1, -1, 2 ** 70, "x", "", [], {}, "a b", "../x", True, 1.5, "\u2028"]
    lines = []
    for _ in range(300):
        tok = json.loads(json.dumps(good))
        path = rng.choice([("id",), ("s",), ("prev",), ("paused",), ("at",), ("at", "ino"),
                           ("at", "off"), ("at", "n"), ("at", "prev"), ("at", "turn")])
        where = tok
        for k in path[:-1]:
            where = where[k]
        where[path[-1]] = rng.choice(bad_values)
        body = rng.choice(["2026-11-29T22:01:17.123Z w1 done: x", ""])
        lines.append(body + "\t" + json.dumps(tok))
    lines += ["\tnot json", "2026-11-29T22:01:17.123Z w1 done\t{", "\t\t\t"]
    warnings = []
    out = Filter(crew, warn=warnings.append).feed(("\n".join(lines) + "\n").encode())
    s = Sender(crew, "boss", cursor=cur, log=warnings.append)
    for line in out.decode().splitlines():
        s.wake(line)
    s.flush()
    s.acknowledge()
    t = Teller("true", cursor=str(tmp_path / "notify-cursor"), log=warnings.append)
    worst = dict(good, at={"ino": "x", "n": 9})     # a state crew-watch cannot read back
    t.take_all(line.encode() for line in lines + ["2026-11-29T22:01:18.123Z w1 done\t"
                                                  + json.dumps(worst)])
    t.acknowledge(now=True)
    for path in (cur, t.cursor):
        w = Watcher(crew, resume=path, out=lambda data: None)
        w.start(follow=False)               # the cursor reads back
        w.close()


def test_a_filter_restarted_anywhere_judges_as_one_that_saw_everything(crew):
    """Positioned lines carry the fold and pause context, so fresh filters
    over any split of the stream pass exactly what one plain filter passes
    over the plain lines (60 random streams, 5 random splits each)."""
    register(crew, "a1", kind="aside")
    register(crew, "boss", kind="primary")
    for n in ("w1", "w2"):
        register(crew, n)
    kinds = ["done", "blocked", "blocked", "idle", "paused", "stale", "turn-started",
             "turn-ended", "error", "captain", "concluded", "problem", "waiting", "note"]
    rng = random.Random(60)
    for trial in range(60):
        for _ in range(rng.randrange(5, 40)):
            Session(crew, rng.choice(["a1", "boss", "w1", "w2"])).append(rng.choice(kinds), "t")
        chunks = []
        w = Watcher(crew, from_start=True, positions=True, out=chunks.append)
        w.run_once()
        w.close()
        lines = b"".join(chunks).split(b"\n")[:-1]
        plain = Filter(crew, warn=lambda m: None).feed(
            b"".join(l.partition(b"\t")[0] + b"\n" for l in lines))
        for _ in range(5):
            cuts = sorted(rng.sample(range(len(lines) + 1), rng.randrange(1, 6)))
            passed = b""
            for a, b in zip([0] + cuts, cuts + [len(lines)]):
                out = Filter(crew, warn=lambda m: None).feed(
                    b"".join(l + b"\n" for l in lines[a:b]))
                passed += b"".join(l.partition(b"\t")[0] + b"\n"
                                   for l in out.split(b"\n")[:-1] if not l.startswith(b"\t"))
            assert passed == plain, trial


def test_a_problem_crew_watch_says_of_a_file_does_not_fold_the_sessions_own_next(crew, tmp_path):
    """w1's status briefly another user's: crew-watch says so (one `problem`
    of its own); healed, w1's own `problem` is a wake of its own, not folded
    into crew-watch's as a repeat."""
    if os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root")
    cur = str(tmp_path / "cursor")
    register(crew, "boss", kind="primary")
    register(crew, "w1")
    run_pipe(crew, cur)
    status = Session(crew, "w1").status_path
    os.chown(status, 65534, 65534)
    run_pipe(crew, cur)
    os.chown(status, 0, 0)
    say(crew, "w1", "problem", "tests fail: cannot reach the DB")
    run_pipe(crew, cur)
    texts = [w.split(" ", 2)[2] for w in wakes(crew)]
    assert len(texts) == 2 and "owned by uid 65534" in texts[0], texts
    assert texts[1] == "problem: tests fail: cannot reach the DB", texts


def test_a_new_event_under_an_old_events_id_is_posted(crew, tmp_path):
    """An id is SESSION:INODE:OFFSET, and a rotated log's inode is reused
    (ext4 gives the new `status` the one its deleted oldest file had): a new
    record can come to an offset an old one had. A repeat is the same id
    with the same text; a new event under an old id is a wake."""
    register(crew, "boss", kind="primary")
    register(crew, "w1")
    old = "2026-11-29T22:01:17.123Z w1 blocked: db"
    inbox.post_many(crew, "boss", [("wake", "w1:4242:100", old)])
    inbox.drain(crew, "boss")
    s = Sender(crew, "boss", cursor=str(tmp_path / "cursor"))
    token = {"id": "w1:4242:100", "s": "w1", "prev": None, "paused": False,
             "at": {"ino": 4242, "off": 100, "n": 1}}
    new = "2026-12-05T07:00:00.000Z w1 problem: tests fail"
    s.wake(old + "\t" + json.dumps(token))               # a replay: not posted again
    s.wake(new + "\t" + json.dumps(token))               # another record at that place
    assert s.flush()
    assert wakes(crew) == [old, new], wakes(crew)


def test_the_captain_is_told_a_new_event_under_an_old_events_id(crew, tmp_path):
    """crew-notify's journal: an event told before a restart is not told
    again; another record that came to the same id (a reused inode) is."""
    cursor = str(tmp_path / "notify-cursor")
    old = "2026-11-29T22:01:17.123Z w1 blocked: db"
    with open(cursor + ".journal", "w") as f:
        f.write(f"sending k1 1764453677.200 w1:4242:100@{old[:24]}\nsent k1 1764453677.300\n")
    t = Teller("true", cursor=cursor)
    token = json.dumps({"id": "w1:4242:100", "s": "w1", "prev": None, "paused": False,
                        "at": {"ino": 4242, "off": 100, "n": 1}})
    t.take(old + "\t" + token)                                   # a replay: told already
    assert t.pending == []
    t.take("2026-12-05T07:00:00.000Z w1 blocked: the DB again\t" + token)
    assert [ev.line for ev in t.pending] == ["2026-12-05T07:00:00.000Z w1 blocked: the DB again"]
