"""The soak's 2-minute day (make soak, docs/soak.md), so that a change which
breaks the day is caught by `make test`: a primary and two workers, each the
real Claude Code against the stand-in model, with every disturbance of the
long day (a stage, an agent and the tmux server killed, an aside concluded
by the captain, crew-up restarted); the run exits 0 only when every
invariant held, and its report says so.

Without the CLI (make claude-code) this test is skipped loudly.

Gemini workers (--gemini) are held here by their argument checks and the
stand-in's day alone: a 2-minute day with one took 212 s at load 35, its
resumed Gemini slower to start than the day's last quarter (docs/soak.md,
"Gemini workers").
"""
import http.client
import json
import os
import select
import signal
import subprocess
import sys
import time

import model_server
from agent_rigs import stand_in_ends_quietly
from claude_harness import REPO, require_real_claude
from crewfile.hooks import hook

SOAK = os.path.join(REPO, "tests", "soak", "soak.py")
sys.path.insert(0, os.path.dirname(SOAK))
import checks  # noqa: E402  (tests/soak/checks.py)
import day  # noqa: E402  (tests/soak/day.py)
import soak as soak_py  # noqa: E402  (tests/soak/soak.py)
import workerrig  # noqa: E402  (tests/soak/workerrig.py)


def test_a_two_minute_day_keeps_every_promise(tmp_path):
    require_real_claude()
    root = tmp_path / "soak"
    r = subprocess.run([sys.executable, SOAK, "--duration", "2m", "--workers", "2",
                        "--seed", "7", "--root", str(root)],
                       capture_output=True, text=True, timeout=1200)
    report = (root / "report.txt").read_text()
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert f"soak: report: {root / 'report.txt'}\n" in r.stdout
    assert "\nViolations: 0\n" in report
    for figure in ("wakes shown to the model", "primary's share of the crew's tokens",
                   "primary turns per worker task", "event -> model latency", "nudges",
                   "peak RSS per command", "per session-hour", "timeline"):
        assert f"  {figure}" in report or figure in report, figure
    assert (root / "timeline.svg").read_text().startswith("<svg")
    # the same seed, the same day: the report names the day by its script
    turns = max(40, int(120 / 60 * 30))
    digest = day.digest({n: day.script(7, n, turns) for n in ("w1", "w2")})
    assert f"(day {digest})" in report.splitlines()[0]


def test_the_same_seed_draws_the_same_day_and_another_seed_another():
    assert day.script(1, "w1", 200) == day.script(1, "w1", 200)
    assert day.script(1, "w1", 200) != day.script(2, "w1", 200)
    assert day.script(1, "w1", 200) != day.script(1, "w2", 200)
    kinds = {line.split(":", 1)[0] for line in day.script(1, "w1", 200)}
    assert kinds == {"RUN", "SLOW", "SAY"}


def test_a_sigterm_ends_the_day_torn_down_and_reported(tmp_path):
    """SIGTERM mid-day: the same teardown as the day's end, the report of
    what ran, and nothing that carries the soak's mark left alive."""
    require_real_claude()
    root = tmp_path / "soak"
    p = subprocess.Popen([sys.executable, SOAK, "--duration", "2m", "--workers", "1",
                          "--seed", "3", "--root", str(root)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = ""
    try:
        deadline = time.monotonic() + 300
        while "w1 spawned" not in seen:      # the primary up, the worker too
            assert time.monotonic() < deadline and p.poll() is None, seen
            ready, _, _ = select.select([p.stdout], [], [], 1.0)
            if ready:
                seen += p.stdout.readline()
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=600)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    out = seen + out
    assert p.returncode == 128 + signal.SIGTERM, out[-4000:] + err[-4000:]
    assert "stopped by SIGTERM: the day ends here" in out
    assert f"soak: report: {root / 'report.txt'}\n" in out
    report = (root / "report.txt").read_text()
    assert "stopped by SIGTERM" in report and "w1 spawned" in report
    assert "left alive after the run" not in report
    mark = f"CREWFILE_SOAK_RUN={p.pid}-".encode()
    left = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if any(v.startswith(mark) for v in f.read().split(b"\0")):
                    left.append(pid)
        except OSError:
            continue
    assert left == []
    tmux = subprocess.run(["tmux", "-S", str(root / "tmux.sock"), "has-session"],
                          capture_output=True, text=True)
    assert tmux.returncode != 0


COMPACT = {"tools": [{"name": "Bash"}], "messages": [
    {"role": "user", "content": "go on"}, {"role": "assistant", "content": "ok"},
    {"role": "user", "content": "CRITICAL: Respond with TEXT ONLY. Do NOT call any tools.\n..."}]}


def test_the_soak_stand_ins_answer_a_compaction_with_a_summary_and_keep_their_script(tmp_path):
    """The CLI's auto-compact request (tests/CLAUDE_FINDINGS.md): answered
    with <summary> tags (taken at once), and no line of a worker's day spent."""
    script = tmp_path / "script"
    script.write_text("RUN: echo one\n")
    worker = model_server.SoakModel(script=str(script))
    call, text, delay = worker.answer(COMPACT)
    assert call is None and delay == 0.0
    assert "<summary>" in text and "</summary>" in text
    assert script.read_text() == "RUN: echo one\n"
    call, _, _ = worker.answer({"tools": [{"name": "Bash"}],
                                "messages": [{"role": "user", "content": "go on"}]})
    assert call["input"]["command"] == "echo one" and script.read_text() == ""
    primary = model_server.SoakPrimary("firstmate")
    call, text, _ = primary.answer(COMPACT)
    assert call is None and "<summary>1. Primary Request and Intent: firstmate's" in text
    # mid-turn, the compaction prompt follows a tool's result in one user message
    mid = {"tools": [{"name": "Bash"}], "messages": [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_000001", "content": "hi"},
        {"type": "text", "text": COMPACT["messages"][-1]["content"]}]}]}
    call, text, _ = primary.answer(mid)
    assert call is None and "<summary>" in text


def test_the_soak_primary_acts_at_once_on_wakes_handed_over_without_a_drain():
    assert model_server.HANDED_OVER in hook.NOTICE_HEADER
    wake = "crewfile notice: wake 2026-12-02T05:46:53.554Z w2 turn-ended (posted x, id y)"
    ask = {"tools": [{"name": "Bash"}], "messages": [{"role": "user", "content": [
        {"type": "text", "text": "crewfile: 1 wake waiting from w2; run: inbox-drain firstmate"},
        {"type": "text", "text": hook.NOTICE_HEADER + "\n" + wake}]}]}
    call, _, _ = model_server.SoakPrimary("firstmate").answer(ask)
    assert call["input"]["command"].startswith("nudge-add --session w2 ")
    # the old header, or no hand-over at all: the drain first
    old = json.loads(json.dumps(ask).replace(model_server.HANDED_OVER, "not written by you"))
    call, _, _ = model_server.SoakPrimary("firstmate").answer(old)
    assert call["input"]["command"] == "inbox-drain firstmate"


def test_gemini_workers_come_after_the_codex_ones_and_fit_in_the_crew(tmp_path):
    """--gemini N: the last N workers are Gemini, after the Codex ones; the
    two together no more than --workers (exit 2, said, before anything starts)."""
    s = soak_py.Soak(str(tmp_path), 1, 4, 60.0, codex=1, gemini=2)
    assert (s.names, s.codex, s.gemini) == (["w1", "w2", "w3", "w4"], {"w2"}, {"w3", "w4"})
    s = soak_py.Soak(str(tmp_path), 1, 2, 60.0, gemini=2)
    assert (s.codex, s.gemini) == (set(), {"w1", "w2"})
    assert soak_py.Soak(str(tmp_path), 1, 2, 60.0, codex=1).codex == {"w2"}
    for args, said in ((["--workers", "2", "--codex", "1", "--gemini", "2"],
                        "soak: --gemini 2: between 0 and --workers less --codex (1)\n"),
                       (["--workers", "2", "--gemini", "-1"],
                        "soak: --gemini -1: between 0 and --workers less --codex (2)\n")):
        r = subprocess.run([sys.executable, SOAK, *args, "--root", str(tmp_path / "never")],
                           capture_output=True, text=True, timeout=120)
        assert (r.returncode, r.stderr, r.stdout) == (2, said, "")
    assert not (tmp_path / "never").exists()


def test_the_gemini_stand_in_follows_a_day_a_line_per_turn(tmp_path):
    """Gemini's own turn (streamed, run_shell_command offered, its newest
    content the user's) takes the script's next line; a function response
    and a side request (the model router's JSON, no tools) take none. The
    log keeps what was new in each request, a function response as a
    tool_result block, as the Claude stand-in's soak log does; usage is by
    text; a SLOW line streams its text, then its end."""
    log, script = tmp_path / "log", tmp_path / "script"
    script.write_text("RUN: echo hi\nSLOW: 0.1\nSAY: said\n")
    tools = [{"functionDeclarations": [{"name": "run_shell_command"}]}]

    def ask(port, contents, stream=True):
        path = "/v1beta/models/m:" + ("streamGenerateContent?alt=sse" if stream
                                      else "generateContent")
        body = {"contents": contents, "systemInstruction": {"parts": [{"text": "be brief"}]}}
        if stream:
            body["tools"] = tools
        else:
            body["generationConfig"] = {"responseMimeType": "application/json",
                                        "responseJsonSchema": {"type": "object"}}
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        raw = conn.getresponse().read().decode()
        conn.close()
        chunks = ([json.loads(line[6:]) for line in raw.splitlines() if line.startswith("data: ")]
                  if stream else [json.loads(raw)])
        return [c["candidates"][0]["content"]["parts"] for c in chunks], chunks[-1]

    go = {"role": "user", "parts": [{"text": "go"}, {"text": "crewfile notice: job j-1 ended"}]}
    with stand_in_ends_quietly("gemini_server.py", "--soak", "--log", log,
                               "--script", script) as (proc, port):
        assert ask(port, [go], stream=False)[0] == [[{"text": "{}"}]]      # the router's
        parts, last = ask(port, [go])
        call = parts[0][0]["functionCall"]
        assert call["name"] == "run_shell_command" and call["args"]["command"] == "echo hi"
        sent = [go]
        seen = (len(json.dumps({"parts": [{"text": "be brief"}]})) + len(json.dumps(sent))) // 4
        out = len(json.dumps(parts[0])) // 4
        assert last["usageMetadata"] == {"promptTokenCount": seen, "candidatesTokenCount": out,
                                         "totalTokenCount": seen + out}
        response = {"role": "user", "parts": [{"functionResponse": {
            "id": "c1", "name": "run_shell_command", "response": {"output": "hi"}}}]}
        sent += [{"role": "model", "parts": parts[0]}, response]
        assert ask(port, sent)[0] == [[{"text": "ok"}]]                  # no line
        sent += [{"role": "model", "parts": [{"text": "ok"}]}, {"role": "user",
                                                                "parts": [{"text": "go on"}]}]
        parts, last = ask(port, sent)                                   # SLOW: text, then end
        assert parts == [[{"text": "ok"}], []] and last["candidates"][0]["finishReason"] == "STOP"
        sent += [{"role": "model", "parts": [{"text": "ok"}]}, go]
        assert ask(port, sent)[0] == [[{"text": "said"}]]
        assert script.read_text() == ""
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(e["main"], e["messages"]) for e in lines] == [
        (False, 1), (True, 1), (True, 3), (True, 5), (True, 7)]
    assert lines[1]["new"] == [{"role": "user", "content": [
        {"type": "text", "text": "go"}, {"type": "text", "text": "crewfile notice: job j-1 ended"}]}]
    assert lines[2]["new"] == [{"role": "user", "content": [{
        "type": "tool_result", "tool_use_id": "c1", "content": {"output": "hi"}}]}]
    assert lines[3]["new"] == [{"role": "user", "content": [{"type": "text", "text": "go on"}]}]


def soak_with_logs(tmp_path, workers, logs):
    """A Soak of *workers* workers, its day not run (its clock at 0), whose
    rigs' request logs hold *logs* ({name: [its soak log entries]})."""
    soak = soak_py.Soak(str(tmp_path), 1, workers, 60.0)
    soak.t0 = 0.0
    for name, entries in logs.items():
        rig = soak.rigs[name] = workerrig.WorkerRig(soak.root, name, soak.sock, [], soak.repo,
                                                    soak.repo)
        with open(rig.log, "w") as f:
            f.writelines(json.dumps(entry) + "\n" for entry in entries)
    return soak


def test_a_steering_update_is_a_line_typed_into_a_working_agent(tmp_path):
    """Gemini, steered (tests/soak/geminirig.py), sends a line submitted
    while it works as a `User steering update:`: in a worker's request of
    its own turn, a typing violation; a nudge as a prompt of its own is not."""
    nudge = {"role": "user", "content": [{"type": "text", "text": "SOAK-GO w1 after done"}]}
    steered = {"role": "user", "content": [
        {"type": "text", "text": f"{checks.STEERED}\n<user_input>\nSOAK-GO w1\n</user_input>"},
        {"type": "tool_result", "tool_use_id": "c1", "content": {"output": "hi"}}]}
    soak = soak_with_logs(tmp_path, 1, {"w1": [
        {"received": 5.0, "main": True, "messages": 3, "new": [m]} for m in (nudge, steered)]})
    bad = checks.check_typing(soak)
    assert len(bad) == 1 and bad[0].startswith(
        "w1: a line typed while its agent worked reached its model as a steering update, at"
        " 5.0s: User steering update:"), bad


def test_the_stop_hooks_reason_inside_a_turn_was_not_typed(tmp_path):
    """Claude Code may hand the primary's model its Stop hook's reason (the
    words of wake-send's announcement) in a later request, inside a turn, as
    a task notification (seen in a soak): the hook's words, not typed ones.
    The announcement typed into a turn is still a violation."""
    result = {"type": "tool_result", "tool_use_id": "t1", "content": "done"}
    said = ("<task-notification>\n<summary>Stop hook feedback</summary>\n</task-notification>\n"
            f"<system-reminder>\n{checks.STOP_SAID}crewfile: 1 wake waiting from w3; run:"
            " inbox-drain firstmate\n")
    typed = "crewfile: 1 wake waiting from w2; run: inbox-drain firstmate"
    soak = soak_with_logs(tmp_path, 0, {"firstmate": [
        {"received": 7.0, "main": True, "messages": 9, "new": [
            {"role": "user", "content": [result]},
            {"role": "system", "content": [{"type": "text", "text": text}]}]}
        for text in (said, typed)]})
    bad = checks.check_typing(soak)
    assert len(bad) == 1 and "w2" in bad[0] and "w3" not in bad[0], bad


def test_a_notice_put_back_for_the_next_life_is_one_post_and_a_second_post_is_two():
    """The soak's check of wakes posted: the same line drained twice (put
    back from `offered`) is one notice; the same event posted again, under
    the same id but at a time of its own, is still seen as two posts."""
    once = ("2026-12-03T13:57:31.000Z", "w2:1:5", "2026-12-03T13:57:30.929Z w2 turn-ended", True)
    again = ("2026-12-03T13:57:40.000Z",) + once[1:]
    assert checks.put_back_once([once, once]) == [once]
    assert checks.put_back_once([once, again, once]) == [once, again]
