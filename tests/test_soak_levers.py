"""tests/soak/levers.py on a small soak root written here (no agent CLI): each
lever's rule replayed on requests whose figures are worked out by hand below.

The primary: three rounds of three requests each (the drain, the action, the
reply that ends the turn), the first two 5 s apart, the third 100 s later;
each round shown its wakes by the hook, then runs inbox-drain anyway. Its
inputs grow by what each request adds: 1000 (the first request), then the
drain's result 50, the action's result 40, the next round's wakes 100, ...
The worker: three requests of 500, 600, 700, the third 390 s after the
second (past the cache's lifetime).
"""
import json
import os
import subprocess
import sys

from claude_harness import REPO

SOAK = os.path.join(REPO, "tests", "soak")
sys.path.insert(0, SOAK)
import levers  # noqa: E402  (tests/soak/levers.py)

LEVERS = os.path.join(SOAK, "levers.py")
DAY = "2026-12-02T00:"


def ts(seconds):
    return f"{DAY}{int(seconds // 60):02d}:{seconds % 60:06.3f}Z"


def notice(at, who, kind, event):
    return {"type": "attachment", "timestamp": ts(at), "attachment": {
        "type": "hook_additional_context", "hookName": "UserPromptSubmit",
        "content": ["crewfile notices (machine reports from the crew's tools):\n"
                    f"crewfile notice: wake {ts(event)} {who} {kind} (posted {ts(at)}, id x)"]}}


def reply(at, n, inp, out, command=None):
    content = ([{"type": "tool_use", "id": f"toolu_{n}", "name": "Bash",
                 "input": {"command": command}}] if command
               else [{"type": "text", "text": "ok"}])
    return {"type": "assistant", "timestamp": ts(at), "message": {
        "id": f"msg_{n}", "role": "assistant", "content": content,
        "stop_reason": "tool_use" if command else "end_turn",
        "usage": {"input_tokens": inp, "cache_creation_input_tokens": 0,
                  "cache_read_input_tokens": 0, "output_tokens": out}}}


def result(at, n):
    return {"type": "user", "timestamp": ts(at), "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": "(no output)"}]}}


def agent(root, name, lines, logged):
    d = root / name / "home" / ".claude" / "projects" / "p"
    d.mkdir(parents=True)
    (d / "s.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines) + "{torn")
    (root / name / "requests.log").write_text('{"main": true}\n' * logged)


def soak_root(root):
    p, n = [], 0
    for start, inp, (who, kind, at) in ((10, 1000, ("w1", "done", 9.5)),
                                        (15, 1125, ("w1", "turn-ended", 14)),
                                        (115, 1350, ("w1", "turn-ended", 113))):
        p.append(notice(start - 0.2, who, kind, at))
        p.append(reply(start, n, inp + (100 if start > 10 else 0), 10, "inbox-drain firstmate"))
        p.append(result(start + 0.5, n))
        first = inp + (100 if start > 10 else 0)
        p.append(reply(start + 1, n + 1, first + 10 + 50, 20, "nudge-add --session w1"))
        p.append(result(start + 1.5, n + 1))
        p.append(reply(start + 2, n + 2, first + 10 + 50 + 20 + 40, 5))
        n += 3
    agent(root, "firstmate", p, 9)
    agent(root, "w1", [reply(0, 100, 500, 10, "true"), reply(10, 101, 600, 10, "true"),
                       reply(400, 102, 700, 10)], 3)
    status = root / "crew" / "sessions" / "w1"
    status.mkdir(parents=True)
    # the second round's turn-ended comes 4.5 s after a done: not within the
    # settle time; the third's 1 s after one: a bare turn-ended
    (status / "status").write_text("".join(f"{ts(t)} {k}\n" for t, k in (
        (9.5, "done: task 1"), (14, "turn-ended"), (112, "done: task 2"), (113, "turn-ended"))))


def test_each_lever_replays_the_same_requests_by_its_rule(tmp_path):
    soak_root(tmp_path)
    day = levers.Day(str(tmp_path))
    p = day.agents["firstmate"]
    assert [r.input for r in p] == [1000, 1060, 1120, 1225, 1285, 1345, 1450, 1510, 1570]
    assert [r.new for r in p] == [1000, 50, 40, 100, 50, 40, 100, 50, 40]
    assert levers.rounds(p) == [(0, 2), (3, 5), (6, 8)]
    # measured: 3215 + 3890 + 4565 for the primary, 1830 for the worker
    assert day.share() == (11670, 1830, 11670 / 13500)
    # no drain round trip: the drains' results (requests 1, 4, 7) not sent,
    # their content shown next; each drain call replaced by the action:
    # 1020 + 1115 + 1235 + 1330 + 1450 + 1545
    assert levers.drains(p) == {1, 4, 7}
    assert day.share(drain=True)[0] == 7695
    # coalescing over 10 s: the second round (5 s after the first) answered in
    # the first: 1010 + 1080 + 1125 + (1415 + 10) + 1495 + 1540
    assert levers.coalesced(p, 10) == {3, 4, 5}
    assert day.share(window=10)[0] == 7675
    assert levers.coalesced(p, 4) == set()
    # no bare turn-ended within 2 s: the third round is not woken at all
    assert levers.bare_turn_ends(p, day.news, 2) == {6, 7, 8}
    assert day.share(settle=2)[0] == 7105
    assert levers.bare_turn_ends(p, day.news, 0.5) == set()
    # a cap of 1300: compacted before requests 5 and 7 (a request of the whole
    # conversation and the CLI's prompt, a summary of 100), then from the
    # first request's 1000 and the summary again
    sent = levers.replay(p, cap=1300, summary=100)
    assert [inp for _, inp, _, _ in sent] == [1000, 1060, 1120, 1225, 1285,
                                              1305 + levers.COMPACT_PROMPT, 1140, 1245,
                                              1255 + levers.COMPACT_PROMPT, 1150, 1210]
    assert levers.counted(sent) == 16900
    # billed: the worker's second request reads its first's 500 from the
    # cache; its third comes 390 s later, past the cache's lifetime
    w = levers.replay(day.agents["w1"])
    assert levers.billed(w) == (1.25 * 500 + 50) + (0.1 * 500 + 1.25 * 100 + 50) + (1.25 * 700 + 50)


def test_the_command_prints_every_lever_and_what_reaches_ten_percent(tmp_path):
    soak_root(tmp_path)
    r = subprocess.run([sys.executable, LEVERS, str(tmp_path), "--settle", "2"],
                       capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stderr) == (0, "")
    lines = r.stdout.splitlines()
    assert lines[0] == ("requests (transcripts / logs): firstmate 9 / 9, workers 3 / 3;"
                        " primary rounds 3, its largest request 1.57k")
    assert lines[1] == ("measured: 86.4 % (primary 11.7k, workers 1.83k;"
                        " usage as reported, every request)")
    assert lines[4].startswith("no inbox-drain round trip: 80.8 % (primary 7.7k,"
                               " workers 1.83k; 3 drain results not sent)")
    assert lines[6].startswith("no bare turn-ended (2 s): 79.5 % (primary 7.11k,")
    assert lines[8] == ("turn-ended wakes shown: 2; within the settle time after their"
                        " session's done/blocked: 1; followed by one within it: 0")
    assert lines[-1].startswith("to reach 10 %: not reached by these levers")


def test_a_root_that_is_not_a_directory_is_refused(tmp_path):
    r = subprocess.run([sys.executable, LEVERS, str(tmp_path / "nope")],
                       capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout, r.stderr) == (
        2, "", f"levers: {tmp_path / 'nope'}: not a directory\n")
