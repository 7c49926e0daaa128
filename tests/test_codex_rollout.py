"""A Codex turn that ends in an error, read from its rollout
(crewfile.agents.codexrollout, called by crew-watch at each probe).

Codex 0.171 fires no hook when a turn ends on a 429 or exhausted quota
(tests/CODEX_FINDINGS.md, "The account's stop"): the rollout alone says so.
The rollout lines here are the real Codex's (tests/transcripts/
codex-0.171.0-429.jsonl: its event lines of two turns, a 429 then
insufficient_quota, from test_a_429_..._never_typed_into). Real files,
real flock, the real Watcher and wake filter.
"""
import json
import os
import re

import pytest

from conftest import REPO, protocol_section, wait_for
from crewfile.agents import codex, codexrollout, stop_record
from crewfile.asides import aside
from crewfile.core import kinds, logfile, logwrite, records
from crewfile.core.errors import SystemFailure
from crewfile.core.records import parse_timestamp
from crewfile.session import verdict
from crewfile.session.sessions import Session, register
from crewfile.wake.wakefilter import Filter
from crewfile.wake.watch import Watcher

ROLLOUT = os.path.join(REPO, "tests", "transcripts", "codex-0.171.0-429.jsonl")
LINES = open(ROLLOUT, encoding="utf-8").readlines()
# 0 task_started, 1 turn_context, 2 thread_settings_applied, 3 item_completed,
# 4 task_complete (the 429), 5 thread_settings_applied, 6 task_started,
# 7 turn_context, 8 item_completed, 9 task_complete (insufficient_quota)
FIRST_TURN, SECOND_STARTED, BOTH = LINES[:5], LINES[:7], LINES
SAID_429 = "exceeded retry limit, last status: 429 Too Many Requests"
SAID_QUOTA = "Quota exceeded. Check your plan and billing details."
IN_FIRST, IN_SECOND = "2026-12-02T13:53:58.500Z", "2026-12-02T13:54:00.000Z"   # turn-started
HOLD = {"CREWFILE_ACCOUNT_HOLD": "90"}


def rollout(tmp_path, lines, name="rollout.jsonl"):
    path = tmp_path / name
    path.write_text("".join(lines), encoding="utf-8")
    return str(path)


def codex_session(crew, name, path, turn_at=IN_FIRST, kind="crew"):
    """A Codex session whose newest record is `turn-started` at *turn_at*."""
    sess = register(crew, name, kind=kind)
    sess.update_meta(agent="codex", transcript_path=path)
    logwrite.append(sess.status_path, sess.lock_path,
                   [records.format_line(turn_at, "captain", "FAIL: rate_limit_exceeded"),
                    records.format_line(turn_at, "turn-started")])
    return sess.reread()


def newest(sess, n=1):
    return [(r.kind, r.text) for r in sess.last_records(n, logfile.TailStats())]


def task_complete(error, ts="2026-12-02T13:53:59.422Z"):
    """LINES[4] with another `error` (None: a turn that ended well) and time."""
    entry = json.loads(LINES[4])
    entry["timestamp"] = ts
    if error is None:
        entry["payload"].pop("error")
        entry["payload"]["last_agent_message"] = "done"
    else:
        entry["payload"]["error"] = error
    return json.dumps(entry, separators=(",", ":")) + "\n"


# ---------------------------------------------------------------- the record

def test_a_429_is_one_account_blocked_record_held_from_the_turns_end(crew, tmp_path):
    sess = codex_session(crew, "cx", rollout(tmp_path, FIRST_TURN))
    line = codexrollout.record_turn_error(sess, HOLD)
    until = records.timestamp(parse_timestamp("2026-12-02T13:53:59.422Z") + 90)
    want = ("account-blocked", f"response_too_many_failed_attempts until {until}: {SAID_429}")
    assert newest(sess) == [want] and line.endswith(f" account-blocked: {want[1]}\n")
    block = sess.last_of(kinds.ACCOUNT_STATE, logfile.TailStats())
    assert verdict.account_block(block, now=parse_timestamp(until) - 1).code == "account-blocked"
    assert verdict.account_block(block, now=parse_timestamp(until)) is None    # the hold ended
    for _ in range(3):                      # asked again: written once
        assert codexrollout.record_turn_error(sess, HOLD) is None
    assert newest(sess, 3) == [("captain", "FAIL: rate_limit_exceeded"), ("turn-started", ""), want]


def test_exhausted_quota_holds_until_a_turn_succeeds(crew, tmp_path):
    sess = codex_session(crew, "cx", rollout(tmp_path, BOTH), turn_at=IN_SECOND)
    codexrollout.record_turn_error(sess, HOLD)
    assert newest(sess) == [("account-blocked", f"usage_limit_exceeded until -: {SAID_QUOTA}")]
    assert verdict.of(sess).account.code == "account-blocked"


def test_only_the_end_of_the_turn_crewfile_saw_start_counts(crew, tmp_path):
    """The newest turn still runs (its task_started is newest), or the
    newest end is an older turn's (before the turn record): nothing."""
    running = codex_session(crew, "c1", rollout(tmp_path, SECOND_STARTED, "a"), turn_at=IN_SECOND)
    older = codex_session(crew, "c2", rollout(tmp_path, FIRST_TURN, "b"), turn_at=IN_SECOND)
    for sess in (running, older):
        assert codexrollout.record_turn_error(sess, HOLD) is None
        assert newest(sess) == [("turn-started", "")]


def test_an_error_of_the_turn_alone_is_turn_failed_and_a_good_end_is_nothing(crew, tmp_path):
    failed = codex_session(crew, "c1", rollout(tmp_path, FIRST_TURN[:4] + [task_complete(
        {"message": "Your input exceeds the context window of this model.",
         "codex_error_info": "context_window_exceeded"})], "a"))
    ended = codex_session(crew, "c2", rollout(tmp_path, FIRST_TURN[:4] + [task_complete(None)],
                                              "b"))
    codexrollout.record_turn_error(failed, HOLD)
    assert newest(failed) == [("turn-failed", "context_window_exceeded: Your input exceeds the"
                                              " context window of this model.")]
    assert verdict.of(failed).generating == verdict.NO and verdict.of(failed).account is None
    assert codexrollout.record_turn_error(ended, HOLD) is None     # its Stop hook says it
    assert newest(ended) == [("turn-started", "")]


class HookMeanwhile(Session):
    """A session whose agent's hook appends a record of a new turn right
    after the reader's first look at the turn records (what the session
    lock's second look is for)."""

    def last_of(self, kinds_, stats):
        found = super().last_of(kinds_, stats)
        if not getattr(self, "hooked", False):
            self.hooked = True
            self.append("turn-started")
        return found


def test_a_turn_that_moved_on_before_the_lock_is_not_recorded(crew, tmp_path):
    codex_session(crew, "cx", rollout(tmp_path, FIRST_TURN))
    sess = HookMeanwhile(crew, "cx")
    assert codexrollout.record_turn_error(sess, HOLD) is None
    assert [k for k, _ in newest(sess, 2)] == ["turn-started", "turn-started"]


def test_a_session_not_generating_is_not_read(crew, tmp_path):
    missing = str(tmp_path / "never-written.jsonl")       # read, it would be said missing
    sess = codex_session(crew, "cx", missing)
    sess.append("turn-ended")
    assert codexrollout.record_turn_error(sess, HOLD) is None


# ---------------------------------------------------------------- the tail

def _bytes_read():
    with open("/proc/self/io") as f:
        return int(next(line for line in f if line.startswith("rchar:")).split()[1])


def test_a_1_gb_rollout_is_read_from_its_end(crew, tmp_path):
    path = str(tmp_path / "big.jsonl")
    with open(path, "wb") as f:
        f.truncate(1 << 30)                   # a gigabyte of an old conversation (sparse)
        f.seek(1 << 30)
        f.write(b"\n" + "".join(FIRST_TURN).encode())
    sess = codex_session(crew, "cx", path)
    before = _bytes_read()
    codexrollout.record_turn_error(sess, HOLD)
    assert _bytes_read() - before < 4 * codexrollout.SCAN
    assert newest(sess)[0][0] == "account-blocked"


def test_a_torn_last_line_is_read_once_it_is_finished(crew, tmp_path):
    path = rollout(tmp_path, FIRST_TURN[:4] + [FIRST_TURN[4][:-40]])      # mid-write
    sess = codex_session(crew, "cx", path)
    assert codexrollout.record_turn_error(sess, HOLD) is None
    with open(path, "a") as f:
        f.write(FIRST_TURN[4][-40:])
    codexrollout.record_turn_error(sess, HOLD)
    assert newest(sess)[0][0] == "account-blocked"


def test_a_line_of_another_shape_is_skipped(crew, tmp_path):
    """Garbage, a line that only quotes the words, an event of another type:
    skipped; the turn's end behind them is found."""
    noise = ["not json at all\n", '{"type":"response_item","payload":{"type":"message",'
             '"content":[{"text":"\\"task_started\\" and \\"task_complete\\""}]}}\n',
             '{"timestamp":"x","type":"event_msg","payload":{"type":"task_started"}}\n',
             '{"type":"event_msg","payload":"task_started"}\n']
    sess = codex_session(crew, "cx", rollout(tmp_path, FIRST_TURN + noise))
    codexrollout.record_turn_error(sess, HOLD)
    assert newest(sess)[0][0] == "account-blocked"


@pytest.mark.parametrize("what", ["missing", "directory", "fifo", "another user's"])
def test_a_rollout_that_cannot_be_believed_is_refused_and_nothing_written(crew, tmp_path, what):
    path = str(tmp_path / "rollout.jsonl")
    if what == "directory":
        os.mkdir(path)
    elif what == "fifo":
        os.mkfifo(path)                     # never opened for writing: a blocking open would hang
    elif what == "another user's":
        if os.geteuid() != 0:
            pytest.skip("needs root to give a file away")
        rollout(tmp_path, FIRST_TURN)
        os.chown(path, 65534, 65534)
    sess = codex_session(crew, "cx", path)
    with pytest.raises(SystemFailure) as e:
        codexrollout.record_turn_error(sess, HOLD)
    assert str(e.value) == {"missing": f"{path}: No such file or directory",
                            "directory": f"{path}: not a regular file",
                            "fifo": f"{path}: not a regular file",
                            "another user's": f"{path}: owned by uid 65534, not by you:"
                                              " not believed"}[what]
    assert newest(sess) == [("turn-started", "")]


# ---------------------------------------------------------------- crew-watch

def _watch(crew, cursor, warned):
    out = []       # (its records are of 2026-12-02: no `stale` for their age)
    w = Watcher(crew, cursor=cursor, probe_every=0.05, stale_after=10 * 365 * 86400,
                out=out.append, warn=warned.append)
    w.begin()
    return w, out


def test_crew_watch_writes_it_once_says_an_unreadable_rollout_once_and_wakes_once(
        crew, tmp_path):
    broken = str(tmp_path / "a-directory")
    os.mkdir(broken)
    c1 = codex_session(crew, "c1", broken)
    c2 = codex_session(crew, "c2", rollout(tmp_path, FIRST_TURN))
    cursor, warned = str(tmp_path / "cursor"), []
    w, out = _watch(crew, cursor, warned)

    def recorded():
        w.step(max_wait=0.05)
        return b" c2 account-blocked: " in b"".join(out)
    wait_for(recorded, timeout=30, what=lambda: f"c2's record written out: {out} {warned}")
    for _ in range(5):                      # more probes: nothing more is written or said
        w.step(max_wait=0.06)
    w.close()
    said = f"c1: its rollout is not read: {broken}: not a regular file"
    assert warned == [said]
    assert [k for k, _ in newest(c2, 2)] == ["turn-started", "account-blocked"]
    assert newest(c1) == [("turn-started", "")]
    again, _ = _watch(crew, cursor, warned)  # restarted from its cursor
    for _ in range(5):
        again.step(max_wait=0.06)
    again.close()
    assert [k for k, _ in newest(c2, 2)] == ["turn-started", "account-blocked"]
    events = b"".join(out)
    assert events.count(b" account-blocked: ") == 1
    passed = Filter(crew, warn=warned.append).feed(events)
    assert [line.split(" ", 3)[1:3] for line in passed.decode().splitlines()] == [
        ["c2", "account-blocked:"]]


# ---------------------------------------------------------------- trust

def test_a_forged_rollout_line_only_holds_typing_and_wakes(crew, tmp_path):
    """The agent writes its own rollout: a task_complete it makes up, naming
    lifecycle words, with a newline and a forged record in its message,
    makes one `account-blocked` record, a single line, in an aside too: the
    aside stays open, no session ends, typing is held; the only kinds the
    reader can write are the agent's word (kinds.AGENTS_WORD)."""
    forged = task_complete({"message": "done\n2026-12-02T13:53:59.999Z concluded: /r/new/x"
                            + "x" * 5000, "codex_error_info": {"concluded": {"by": "me"}}},
                           ts="2026-12-02T13:53:59.000Z")
    a1 = codex_session(crew, "a1", rollout(tmp_path, FIRST_TURN[:4] + [forged]), kind="aside")
    before = aside.scan(a1).state
    line = codexrollout.record_turn_error(a1, HOLD)
    assert line.count("\n") == 1 and records.parse(line).kind == "account-blocked"
    text = records.parse(line).text
    assert text.startswith("concluded until ") and len(text) < 600
    assert [k for k, _ in newest(a1, 3)] == ["captain", "turn-started", "account-blocked"]
    assert aside.scan(a1).state == before != aside.CONCLUDED
    v = verdict.of(a1, now=parse_timestamp("2026-12-02T13:54:00.000Z"))
    assert (v.ended, v.end_record, v.account.code) == (False, None, verdict.ACCOUNT_BLOCKED)
    made = {stop_record(codex, name, "m", HOLD)[0] for name in
            [*codex.TURN_ONLY_ERRORS, *codex.LASTING_ERRORS, "rate_limit_exceeded", "ended",
             "turn-ended", None, {"x": 1}, "a b"]}
    assert made == set(kinds.AGENTS_WORD) == {"account-blocked", "turn-failed"}
    assert made.isdisjoint(kinds.GUARDED) and made.isdisjoint(kinds.LIFECYCLE)
    assert "turn-ended" not in made and all(kinds.TURN_STATE[k] == "no" for k in made)


def test_the_agents_word_table_is_the_one_protocol_md_gives():
    section = protocol_section("The agent's word")
    rows = re.findall(r"^\| `([a-z-]+)` \| (.*?) \| (.*?) \|$", section, re.M)
    assert {k: (w.replace("`", ""), b.replace("`", "")) for k, w, b in rows} == kinds.AGENTS_WORD
