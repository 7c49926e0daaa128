"""What supervision costs: tokens per transcript, the primary's share of wake
turns, and crew-status's total kept in tokens.cache.

tests/transcripts/claude-primary.jsonl is a real Claude Code 2.1.197
transcript of a primary (tests/test_tokens_e2e.py makes one like it): turns
typed by the captain, a tool call, a captain's prompt that carried wakes
as context (not a wake turn), wake-send's announcement typed as a prompt
(a wake turn), and a turn that its Stop hook continued with wakes (the
rest is a wake turn). The stand-in model reports 12 tokens a message:
8 messages, 2 of them in wake turns."""
import json
import os
import random
import re
import shutil

import pytest

from conftest import cmd
from crewfile.core import paths
from crewfile.views import tokens
from crewfile.wake import words
from crewfile.session.sessions import register

HERE = os.path.dirname(os.path.abspath(__file__))
REAL = os.path.join(HERE, "transcripts", "claude-primary.jsonl")
TOTAL, WAKE = 96, 24


def msg(mid, n, wake_turn=None):
    """An assistant line of Claude Code's shape using *n* tokens."""
    return json.dumps({"type": "assistant", "message": {
        "id": mid, "role": "assistant", "content": [{"type": "text", "text": "ok"}],
        "usage": {"input_tokens": n - 1, "cache_creation_input_tokens": 0,
                  "cache_read_input_tokens": 0, "output_tokens": 1}}}, separators=(",", ":"))


def prompt(text):
    return json.dumps({"type": "user", "message": {"role": "user", "content": text}},
                      separators=(",", ":"))


def stop_wake():
    return json.dumps({"type": "attachment", "attachment": {
        "type": "hook_additional_context", "hookEvent": "Stop",
        "content": [words.WAKE_HEADER + "\ncrewfile notice: wake ..."]}}, separators=(",", ":"))


SAY = words.DEFAULT_SAY.format(n="3 wakes", count=3, primary="firstmate", **{"from": "w1, w2"})


def primary(crew, tmp_path, lines=None, name="firstmate"):
    path = tmp_path / f"{name}.jsonl"
    if lines is None:
        shutil.copy(REAL, path)
    else:
        path.write_text("".join(line + "\n" for line in lines))
    sess = register(crew, name, kind="primary")
    sess.update_meta(transcript_path=str(path))
    return sess, path


def top_lines():
    r = cmd("crew-top", "--once")
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


def test_the_real_transcript(crew, tmp_path):
    t = tokens.read(REAL)
    assert (t.total, t.wake) == (TOTAL, WAKE)
    primary(crew, tmp_path)
    out = top_lines()
    assert "wake turns: 25% of firstmate's tokens (24 of 96)" in out
    assert out[1].split()[7] == "96"
    assert cmd("crew-status").stdout == "1 idle 96 tok\n"     # no record yet: no state word
    assert "#[fg=colour244]96 tok#[default]" in cmd("crew-status", "--tmux").stdout


def test_what_starts_and_ends_a_wake_turn(tmp_path):
    path = tmp_path / "t.jsonl"
    lines = [prompt("hello"), msg("a", 100),
             prompt(SAY), msg("b", 10),                             # the announcement
             json.dumps({"type": "user", "message": {"role": "user", "content": [
                 {"type": "tool_result", "content": "x", "tool_use_id": "t"}]}}),
             msg("c", 20),                                           # a tool result goes on
             prompt("captain again"), msg("d", 1000),               # the captain's next prompt
             stop_wake(), msg("e", 3),                               # continued at Stop
             prompt("Stop hook feedback:\n" + words.WAKE_HEADER + "\nx"), msg("f", 4),
             prompt("crewfile: something else"), msg("g", 5000),    # not the announcement
             ]
    path.write_text("\n".join(lines) + "\n")
    t = tokens.read(str(path))
    assert (t.total, t.wake) == (6137, 37)


def test_every_cut_reads_on_to_the_same_count(tmp_path):
    """Read a growing transcript at many points, mid-line too: the same
    figures as one read of the whole."""
    data = open(REAL, "rb").read()
    path = tmp_path / "t.jsonl"
    cuts = sorted(set(range(0, len(data), 397)) | {len(data)})
    t = None
    with open(path, "wb") as f:
        last = 0
        for cut in cuts:
            f.write(data[last:cut])
            f.flush()
            last = cut
            t = tokens.read(str(path), t)
            assert t is not None and t.offset <= cut
    assert (t.total, t.wake, t.offset) == (TOTAL, WAKE, len(data))


def test_a_replaced_or_rewritten_transcript_is_counted_again(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(msg("a", 50) + "\n" + msg("b", 50) + "\n")
    t = tokens.read(str(path))
    assert t.total == 100
    # rewritten in place, longer: the bytes before the old offset differ
    path.write_text(msg("x", 7) + "\n" + msg("y", 7) + "\n" + msg("z", 7) + "\n")
    assert tokens.read(str(path), t).total == 21
    # truncated
    path.write_text(msg("x", 7) + "\n")
    assert tokens.read(str(path), t).total == 7
    # rotated: a new file in its place
    os.rename(path, tmp_path / "old")
    path.write_text(msg("n", 3) + "\n")
    assert tokens.read(str(path), t).total == 3
    assert t.total == 100                # the tally given is never changed


def test_hostile_lines_are_skipped(tmp_path):
    path = tmp_path / "t.jsonl"
    big = '{"type":"user","message":{"content":"' + "x" * (tokens.MAX_LINE + 10) + '"}}'
    path.write_bytes(b"\n".join(x.encode() for x in [
        msg("a", 10), "not json \"usage\"", '{"message": {"usage": "not a dict"}}',
        '{"message": {"id": 5, "usage": {"input_tokens": true, "output_tokens": -4}}}',
        '["usage"]', big, msg("b", 20), big.replace("user", "usage"), msg("c", 30)])
        + b"\n\xff\xfe\"usage\"\n" + big.encode())    # the last line: no newline yet
    t = tokens.read(str(path))
    assert t.total == 60 and t.skipping and t.offset == os.path.getsize(path)
    with open(path, "a") as f:
        f.write("\n" + msg("d", 40) + "\n")
    assert tokens.read(str(path), t).total == 100


def test_links_fifos_and_no_transcript(crew, tmp_path):
    sess, path = primary(crew, tmp_path)
    os.mkfifo(tmp_path / "fifo")
    link = tmp_path / "link"
    link.symlink_to(path)           # the user's layout (a dotfiles link): followed, as evidence does
    sess.update_meta(transcript_path=str(link))
    assert tokens.read(str(link)).total == tokens.read(str(path)).total > 0
    for hostile in ("/dev/zero", str(tmp_path / "fifo")):
        if link.exists() or link.is_symlink():
            link.unlink()
        link.symlink_to(hostile)
        sess.update_meta(transcript_path=str(link))
        assert tokens.read(str(link)) is None
        out = top_lines()
        assert out[1].split()[7] == "-"
        assert "wake turns: firstmate names no transcript that can be read" in out
        r = cmd("crew-status", timeout=20)
        assert r.returncode == 0 and "tok" not in r.stdout, r.stdout
    sess.update_meta(transcript_path=str(tmp_path / "fifo"))
    assert tokens.read(str(tmp_path / "fifo")) is None
    assert "tok" not in cmd("crew-status", timeout=20).stdout
    old_gemini = tmp_path / "session.json"
    old_gemini.write_text(json.dumps({"messages": [{"type": "gemini", "tokens": {"total": 5}}]},
                                     indent=2))
    assert tokens.read(str(old_gemini)) is None
    for bad in (None, "", "relative.jsonl", 5, ["x"]):
        sess.update_meta(transcript_path=bad)
        assert "tok" not in cmd("crew-status").stdout


def test_crew_status_reads_on_from_its_cache(crew, tmp_path):
    _, path = primary(crew, tmp_path)
    cache = os.path.join(crew.root, paths.TOKENS_CACHE)
    assert cmd("crew-status").stdout == "1 idle 96 tok\n"
    assert json.load(open(cache))["transcripts"][str(path)]["offset"] == os.path.getsize(path)
    with open(path, "a") as f:
        f.write(msg("new", 1000) + "\n")
    assert cmd("crew-status").stdout == "1 idle 1.1k tok\n"
    # the cache is what counts: a forged total there is believed while the
    # file's identity holds (it is the captain's own file), ...
    forged = json.load(open(cache))
    forged["transcripts"][str(path)]["total"] = 5000
    open(cache, "w").write(json.dumps(forged))
    assert cmd("crew-status").stdout == "1 idle 5.0k tok\n"
    # ... and every damaged form of it is a recount
    entry = json.load(open(cache))["transcripts"][str(path)]

    def doc(value=None, **fields):
        return json.dumps({"version": 1, "transcripts": {
            str(path): dict(entry, **fields) if value is None else value}})
    for damaged in ["", "{", "null", "[]", '{"version": 1}', '{"version": 2, "transcripts": {}}',
                    doc("x"), doc(offset=-1), doc(wake=10**9), doc(tail="zz"),
                    doc(tail="00" * 8, total=1), doc(recent=[[1, 2, 3]]), doc(offset=10**12),
                    doc(in_wake="yes"), doc(dev=None)]:
        open(cache, "w").write(damaged)
        assert cmd("crew-status").stdout == "1 idle 1.1k tok\n", damaged
    # a cache that is a link: not read, replaced by a file
    os.unlink(cache)
    os.symlink("/etc/passwd", cache)
    assert cmd("crew-status").stdout == "1 idle 1.1k tok\n"
    assert not os.path.islink(cache)


def sidechain(mid, n, agent):
    """An assistant line as Claude Code 2.1 writes it in a subagent's transcript."""
    line = json.loads(msg(mid, n))
    line.update(isSidechain=True, agentId=agent, sessionId="5f0c2a4e")
    return json.dumps(line, separators=(",", ":"))


def test_subagents_count_in_the_session_s_total(crew, tmp_path):
    """Claude Code 2.1.197 (its binary: the path of a subagent's transcript)
    writes a subagent's messages to <stem>/subagents/agent-ID.jsonl beside
    the session's <stem>.jsonl, with agent-ID.meta.json, and a workflow's
    agents under subagents/workflows/RUN/. They add to the session's total,
    not to its wake share; files of other sessions and other names do not."""
    sess, path = primary(crew, tmp_path)        # 96 tokens, 24 in wake turns
    sub = tmp_path / "firstmate" / "subagents"
    (sub / "workflows" / "run-1").mkdir(parents=True)
    (sub / "agent-a1.jsonl").write_text(sidechain("s1", 1000, "a1") + "\n"
                                        + sidechain("s1", 1000, "a1") + "\n"    # one message
                                        + sidechain("s2", 200, "a1") + "\n")
    (sub / "agent-a1.meta.json").write_text('{"agentType":"general-purpose","spawnDepth":1}')
    (sub / "workflows" / "run-1" / "agent-w1.jsonl").write_text(sidechain("s3", 4, "w1") + "\n")
    other = tmp_path / "someone-else" / "subagents"
    other.mkdir(parents=True)
    (other / "agent-x.jsonl").write_text(sidechain("x", 50000, "x") + "\n")
    (tmp_path / "agent-old.jsonl").write_text(sidechain("o", 70000, "o") + "\n")
    os.symlink(str(other), str(sub / "linked"))              # a link to a directory: not followed
    assert tokens.subagents(str(path)) == [str(sub / "agent-a1.jsonl"),
                                           str(sub / "workflows" / "run-1" / "agent-w1.jsonl")]
    assert tokens.session_used(str(path), tokens.read).total == TOTAL + 1204
    assert cmd("crew-status").stdout == "1 idle 1.3k tok\n"
    out = top_lines()
    assert out[1].split()[7] == "1k"
    assert "wake turns: 2% of firstmate's tokens (24 of 1.3k)" in out
    # a subagent's transcript grows: read on from the cache, like the session's
    with open(sub / "agent-a1.jsonl", "a") as f:
        f.write(sidechain("s4", 2000, "a1") + "\n")
    assert cmd("crew-status").stdout == "1 idle 3.3k tok\n"
    cache = json.load(open(os.path.join(crew.root, paths.TOKENS_CACHE)))["transcripts"]
    assert sorted(cache) == sorted([str(path), str(sub / "agent-a1.jsonl"),
                                    str(sub / "workflows" / "run-1" / "agent-w1.jsonl")])
    # no subagents directory, or a file where it would be: the session alone
    shutil.rmtree(tmp_path / "firstmate")
    (tmp_path / "firstmate").write_text("")
    assert tokens.subagents(str(path)) == []
    assert cmd("crew-status").stdout == "1 idle 96 tok\n"


def test_crew_status_total_over_sessions(crew, tmp_path):
    register(crew, "w1").append("turn-started")
    primary(crew, tmp_path)
    w2 = register(crew, "w2")
    w2.append("turn-started")
    w2.append("turn-ended")
    w2.update_meta(transcript_path=str(tmp_path / "firstmate.jsonl"))   # the same file: once
    t3 = tmp_path / "w3.jsonl"
    t3.write_text(msg("z", 12000) + "\n")
    register(crew, "w3").update_meta(transcript_path=str(t3))
    assert cmd("crew-status").stdout == "1 working 3 idle 12.1k tok\n"
    t3.unlink()
    assert cmd("crew-status").stdout == "1 working 3 idle 96 tok\n"


def test_a_read_only_crew_directory_still_shows_the_total(crew, tmp_path):
    """The cache write really fails (as root too: bound=True) and the figure stays."""
    primary(crew, tmp_path)
    cache = crew.sub(paths.TOKENS_CACHE)
    os.chmod(crew.root, 0o500)
    try:
        r = cmd("crew-status", bound=True)
        assert (r.returncode, r.stdout, r.stderr) == (0, "1 idle 96 tok\n", "")
        assert not os.path.exists(cache)
    finally:
        os.chmod(crew.root, 0o700)
    assert cmd("crew-status", bound=True).stdout == "1 idle 96 tok\n"
    assert os.path.exists(cache)                    # writable again: the cache is kept


def test_codex_token_counts(tmp_path):
    path = tmp_path / "rollout.jsonl"

    def count(total):
        return json.dumps({"timestamp": "x", "type": "event_msg", "payload": {
            "type": "token_count", "info": {"total_token_usage": {
                "input_tokens": total - 2, "output_tokens": 2, "total_tokens": total}}}},
            separators=(",", ":"))

    def user(text):
        return json.dumps({"type": "event_msg", "payload": {"type": "user_message",
                                                            "message": text}},
                          separators=(",", ":"))
    path.write_text("\n".join([user("hi"), count(100), count(100), count(250), user(SAY),
                               count(300), user(words.WAKE_HEADER + "\nwake ..."), count(310),
                               user("go on"), count(400)]) + "\n")
    t = tokens.read(str(path))
    assert (t.total, t.wake) == (400, 60)


@pytest.mark.parametrize("name,total,woken", [("gemini-primary.jsonl", 24, 12),
                                               ("codex-primary.jsonl", 24, 12)])
def test_real_gemini_and_codex_files(name, total, woken):
    """Captured from the real CLIs (tests/test_tokens_e2e.py runs them): a
    prompt, then a wake at the turn's end that its hook continued it with."""
    t = tokens.read(os.path.join(HERE, "transcripts", name))
    assert (t.total, t.wake) == (total, woken)


def test_formats():
    assert [tokens.short(n) for n in (0, 950, 1000, 12345, 999_999, 3_400_000)] == [
        "0", "950", "1.0k", "12.3k", "1.0M", "3.4M"]
    assert tokens.share(0, 0) == "-" and tokens.share(58, 100) == "58%"


def test_the_announcement_match_is_re_s():
    """tokens._fits (no re import on crew-status's path) against the regular
    expression it stands for, on random joins of the template's pieces."""
    template = words.DEFAULT_SAY
    rx = re.compile(".+".join(map(re.escape, re.split(r"\{\w+\}", template))))
    parts = tokens._literals(template)
    pieces = parts + ["x", " ", "{n}", "ü", "\n"]
    rnd = random.Random(17)
    for _ in range(20000):
        s = "".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 8)))
        assert (rx.fullmatch(s) is not None) == tokens._fits(parts, s), s
    assert tokens._fits(parts, SAY)


def test_random_transcripts_read_in_random_pieces(tmp_path, monkeypatch):
    """Random lines (messages repeated over adjacent lines, prompts, wake
    marks, garbage, lines over MAX_LINE), written in random pieces, each
    piece read on from the last Tally: always the figures of one read of
    the whole. Small chunks and MAX_LINE make every boundary case common."""
    monkeypatch.setattr(tokens, "_CHUNK", 61)
    monkeypatch.setattr(tokens, "MAX_LINE", 300)
    rnd = random.Random(2718)
    for round_ in range(300):
        lines, mid = [], 0
        for _ in range(rnd.randint(0, 60)):
            r = rnd.random()
            if r < 0.35:
                mid += 1
                for _ in range(rnd.randint(1, 3)):        # one message over adjacent lines
                    lines.append(msg(f"m{mid}", rnd.randint(1, 500)))
            elif r < 0.5:
                lines.append(prompt(rnd.choice(["go on", SAY, "crewfile: x"])))
            elif r < 0.6:
                lines.append(stop_wake())
            elif r < 0.7:
                lines.append('{"type":"user","message":{"content":"' + "y" * 400 + '"}}')
            elif r < 0.8:
                pad = "z" * rnd.choice([10, 100, 120, 140, 400])     # about MAX_LINE
                lines.append(msg(f"long{mid}", 7)[:-1] + ',"pad":"' + pad + '"}')
            else:
                lines.append(rnd.choice(['{"usage"', "", "[]", "\"usage\" \xff", "{}"]))
        data = "".join(line + "\n" for line in lines).encode("utf-8", "surrogateescape")
        if rnd.random() < 0.5:
            data += b'{"type":"assistant"'           # a line still being written
        path = tmp_path / f"t{round_}.jsonl"
        whole_path = tmp_path / f"w{round_}.jsonl"
        whole_path.write_bytes(data)
        whole = tokens.read(str(whole_path))
        t, at = None, 0
        with open(path, "wb") as f:
            while True:
                step = rnd.choice([1, 7, 50, 301, 2000])
                f.write(data[at:at + step])
                f.flush()
                at = min(len(data), at + step)
                t = tokens.read(str(path), t)
                if at == len(data):
                    break
        assert (t.total, t.wake, t.offset, t.in_wake) == (
            whole.total, whole.wake, whole.offset, whole.in_wake), round_
        # the same through the cache's own form
        assert tokens.read(str(path), tokens.Tally.from_json(t.to_json())).total == whole.total
