"""tests/model_server.py, the stand-in model, spoken to as Claude Code does
(Messages API, streamed and not): script lines taken in order by the
agent's turns only, RUN/SLOW directives, tool results answered with text,
every request logged. Then the skeleton all three stand-in servers share
(tests/stand_in.py): a port the kernel picks, the request log, a reply held
until a file exists, a quiet end on SIGTERM. Runs without an agent CLI or npm."""
import http.client
import json
import threading
import time

import pytest

from agent_rigs import stand_in_ends_quietly, start_stand_in, stop_stand_in
from conftest import wait_for

TOOLS = [{"name": "Bash", "input_schema": {"type": "object"}}]


@pytest.fixture
def server(tmp_path):
    log, script = tmp_path / "log", tmp_path / "script"
    proc, port = start_stand_in("model_server.py", "--log", log, "--script", script,
                                "--reply", "fine")
    try:
        yield port, log, script
    finally:
        stop_stand_in(proc)


def ask(port, messages, tools=TOOLS, stream=True):
    """(content blocks, stop_reason) of one Messages request."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    body = {"model": "m", "messages": messages, "stream": stream}
    if tools:
        body["tools"] = tools
    conn.request("POST", "/v1/messages", json.dumps(body), {"content-type": "application/json"})
    resp = conn.getresponse()
    raw = resp.read().decode()
    conn.close()
    if not stream:
        msg = json.loads(raw)
        return msg["content"], msg["stop_reason"]
    events = [json.loads(l[6:]) for l in raw.splitlines() if l.startswith("data: ")]
    assert events[0]["type"] == "message_start" and events[-1]["type"] == "message_stop"
    block = next(e["content_block"] for e in events if e["type"] == "content_block_start")
    delta = next(e["delta"] for e in events if e["type"] == "content_block_delta")
    if block["type"] == "tool_use":
        block = dict(block, input=json.loads(delta["partial_json"]))
    else:
        block = dict(block, text=delta["text"])
    stop = next(e["delta"]["stop_reason"] for e in events if e["type"] == "message_delta")
    return [block], stop


def user(text):
    return [{"role": "user", "content": text}]


def test_directives_in_the_prompt_and_tool_results(server):
    port, log, _ = server
    for stream in (True, False):
        (block,), stop = ask(port, user("please\nRUN: echo hi"), stream=stream)
        assert (block["type"], block["name"], block["input"]["command"], stop) == (
            "tool_use", "Bash", "echo hi", "tool_use")
        result = user("x") + [{"role": "assistant", "content": [block]},
                              {"role": "user", "content": [{"type": "tool_result",
                                                            "tool_use_id": block["id"]}]}]
        (block,), stop = ask(port, result, stream=stream)
        assert (block, stop) == ({"type": "text", "text": "fine"}, "end_turn")
    (block,), _ = ask(port, user("RUN: echo hi"), tools=None)     # a side request: no tool
    assert block["type"] == "text"
    bodies = [json.loads(l) for l in log.read_text().splitlines()]
    assert len(bodies) == 5 and "RUN: echo hi" in json.dumps(bodies[0])


def test_script_lines_go_to_turns_in_order(server):
    port, _, script = server
    script.write_text("SAY: one\nRUN: ls\nSLOW: 1\n")
    assert ask(port, user("a"), tools=None)[0][0]["text"] == "fine"   # not a turn: not taken
    assert ask(port, user("a"))[0][0]["text"] == "one"
    assert ask(port, user("a"))[0][0]["input"]["command"] == "ls"
    t0 = time.monotonic()
    assert ask(port, user("a"))[0][0]["text"] == "fine"
    assert time.monotonic() - t0 >= 1                               # streamed for 1 s
    assert script.read_text() == ""
    assert ask(port, user("RUN: pwd"))[0][0]["input"]["command"] == "pwd"   # script empty


def test_count_tokens_and_other_paths(server):
    port = server[0]
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("POST", "/v1/messages/count_tokens", "{}")
    assert json.loads(conn.getresponse().read()) == {"input_tokens": 10}
    conn.request("GET", "/anything")
    assert json.loads(conn.getresponse().read()) == {}


# --- the skeleton the three stand-in servers share (tests/stand_in.py) -------------

# (server file, a request that holds until PATH exists, the text of its answer)
HELD = {
    "model_server.py": ("/v1/messages", lambda path: {
        "model": "m", "stream": True, "tools": TOOLS, "messages": user("a")}),
    "responses_server.py": ("/v1/responses", lambda path: {
        "input": [{"role": "user", "content": f"HOLD: {path}"}]}),
    "gemini_server.py": ("/v1beta/models/m:streamGenerateContent?alt=sse", lambda path: {
        "contents": [{"role": "user", "parts": [{"text": f"HOLD: {path}"}]}]}),
}


@pytest.mark.parametrize("name", sorted(HELD))
def test_each_server_holds_a_reply_logs_it_and_ends_quietly(tmp_path, name):
    log, go = tmp_path / "log", tmp_path / "go"
    args = ["--log", log, "--reply", "held reply"]
    if name == "model_server.py":              # its holds come from the script
        (tmp_path / "script").write_text(f"HOLD: {go}\n")
        args += ["--script", tmp_path / "script"]
    with stand_in_ends_quietly(name, *args) as (proc, port):
        path, body = HELD[name]
        answer = {}

        def post():
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            conn.request("POST", path, json.dumps(body(go)),
                         {"Content-Type": "application/json"})
            resp = conn.getresponse()
            answer["status"], answer["body"] = resp.status, resp.read().decode()
            conn.close()

        asker = threading.Thread(target=post)
        asker.start()
        wait_for(lambda: log.exists() and log.read_text().count("\n") == 1,
                 what="the request logged")
        assert asker.is_alive() and answer == {}          # held: go does not exist
        go.touch()
        asker.join(60)
        assert answer["status"] == 200 and "held reply" in answer["body"]
        assert len(log.read_text().splitlines()) == 1


def test_a_limit_line_answers_429_with_its_reset_then_the_next_turn_is_served(server):
    port, log, script = server
    reset = int(time.time()) + 3600
    script.write_text(f"LIMIT: {reset}\nBG: sleep 5\nAGENT: look\n")
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    body = {"model": "m", "messages": [{"role": "user", "content": "go"}], "stream": True,
            "tools": TOOLS}
    conn.request("POST", "/v1/messages", json.dumps(body), {"content-type": "application/json"})
    resp = conn.getresponse()
    raw = json.loads(resp.read())
    conn.close()
    assert resp.status == 429
    assert raw == {"type": "error", "error": {
        "type": "rate_limit_error",
        "message": f"This request would exceed your rate limit; it resets at {reset}."}}
    assert resp.getheader("x-should-retry") == "false"
    assert resp.getheader("anthropic-ratelimit-unified-reset") == str(reset)
    assert 0 < int(resp.getheader("retry-after")) <= 3600
    blocks, stop = ask(port, [{"role": "user", "content": "again"}])
    assert stop == "tool_use" and blocks[0]["name"] == "Bash"
    assert blocks[0]["input"] == {"command": "sleep 5", "description": "scripted",
                                  "run_in_background": True}
    blocks, stop = ask(port, [{"role": "user", "content": "and again"}])
    assert blocks[0]["name"] == "Agent" and blocks[0]["input"] == {
        "description": "scripted", "prompt": "look", "subagent_type": "general-purpose"}


# --- the soak's Codex stand-in (responses_server --soak: tests/soak, docs/soak.md) ----

def respond(port, items, tools=({"type": "function", "name": "exec_command"},)):
    """(the output item, the usage) of one streamed Responses request."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    body = {"model": "m", "input": list(items), "stream": True}
    if tools:
        body["tools"] = list(tools)
    conn.request("POST", "/v1/responses", json.dumps(body), {"Content-Type": "application/json"})
    raw = conn.getresponse().read().decode()
    conn.close()
    done = [json.loads(l[6:]) for l in raw.splitlines() if l.startswith("data: ")][-1]
    assert done["type"] == "response.completed"
    return done["response"]["output"][0], done["response"]["usage"]


def test_the_codex_stand_in_follows_a_day_a_line_per_turn(tmp_path):
    """A turn (tools offered, the user's message last but for the hooks'
    developer messages) takes the script's next line; a tool's output and a
    side request (no tools: Codex's title request) take none. The log keeps
    what was new in each request, a tool's output as a tool_result block,
    as the Claude stand-in's soak log does; usage is by text."""
    log, script = tmp_path / "log", tmp_path / "script"
    script.write_text("RUN: echo hi\nSAY: said\n")
    with stand_in_ends_quietly("responses_server.py", "--soak", "--log", log,
                               "--script", script) as (proc, port):
        go = {"role": "user", "content": [{"type": "input_text", "text": "go"}]}
        notice = {"role": "developer", "content": [{"type": "input_text",
                                                    "text": "crewfile notice: job j-1 ended"}]}
        item, _ = respond(port, [go], tools=None)                    # a side request
        assert item["content"][0]["text"] == "ok"
        call, usage = respond(port, [go, notice])
        assert (call["name"], json.loads(call["arguments"])) == ("exec_command", {"cmd": "echo hi"})
        sent = [go, notice]
        # the instructions (none: "") and the input, as text
        assert usage["input_tokens"] == (len('""') + len(json.dumps(sent))) // 4
        out = {"type": "function_call_output", "call_id": call["call_id"], "output": "hi\n"}
        sent += [dict(call), out]
        assert respond(port, sent)[0]["content"][0]["text"] == "ok"  # a tool's output: no line
        sent += [{"role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}, go]
        assert respond(port, sent)[0]["content"][0]["text"] == "said"
        assert script.read_text() == ""
        lines = [json.loads(l) for l in log.read_text().splitlines()]
        assert [(e["main"], e["messages"]) for e in lines] == [
            (False, 1), (True, 2), (True, 4), (True, 6)]
        assert lines[1]["new"] == [{"role": "user", "content": go["content"]},
                                   {"role": "developer", "content": notice["content"]}]
        assert lines[2]["new"] == [{"role": "user", "content": [{
            "type": "tool_result", "tool_use_id": call["call_id"], "content": "hi\n"}]}]
        assert lines[3]["new"] == [{"role": "user", "content": go["content"]}]
