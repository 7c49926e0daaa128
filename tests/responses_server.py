#!/usr/bin/env python3
"""A scripted stand-in for the OpenAI Responses API (streamed), so the real
Codex CLI runs whole turns offline. Standard library only.

    python3 tests/responses_server.py [--port N] [--log FILE] [--reply TEXT]

Prints `port N` once it listens, then serves until killed. Codex reaches it
through a custom provider in $CODEX_HOME/config.toml:

    model = "gpt-test"
    model_provider = "fake"
    [model_providers.fake]
    base_url = "http://127.0.0.1:N/v1"
    env_key = "FAKE_KEY"
    wire_api = "responses"
    supports_websockets = false

What the "model" answers to POST /v1/responses: if the newest user input
(the user messages since its last output) holds a line `RUN: <shell command>` and no tool output has come back since,
a call of the request's shell tool running it (`ASK: <command>`: the same,
asking to run outside the sandbox, so that Codex asks for approval); otherwise the reply TEXT
(default "ok"), held back while the newest user message has a line
`HOLD: <path>` and that file does not exist (a test acts mid-turn, then
lets the turn end: no guessed sleep). Every request body is appended to the log FILE, one line each.
The events sent are the few a Codex turn needs (observed with Codex 0.171.0:
response.created, response.output_item.added, response.output_text.delta,
response.output_item.done, response.completed with a usage object).
"""
import argparse
import itertools
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

USAGE = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
         "output_tokens": 2, "output_tokens_details": {"reasoning_tokens": 0},
         "total_tokens": 12}
HOLD_CAP = 300          # seconds: a test that never lets go must not hang a run forever


class Model:
    def __init__(self, log=None, reply="ok"):
        self.log, self.reply = log, reply
        self.lock = threading.Lock()
        self.ids = itertools.count(1)

    def record(self, raw):
        if self.log:
            with self.lock, open(self.log, "ab") as f:
                f.write(raw.replace(b"\n", b" ") + b"\n")


def _texts(item):
    content = item.get("content")
    if isinstance(content, str):
        return [content]
    return [c.get("text", "") for c in content or () if isinstance(c, dict)]


def run_directive(req, word="RUN: "):
    """The rest of a *word* line in the newest user input (the user messages
    after the model's last output: a mentioned skill comes as a message of
    its own after the captain's), unless a tool output came after it; else None."""
    for item in reversed(req.get("input") or []):
        if not isinstance(item, dict):
            continue
        if item.get("type") in ("function_call_output", "custom_tool_call_output",
                                "local_shell_call_output"):
            return None
        if item.get("role") == "assistant" or item.get("type") in (
                "function_call", "custom_tool_call", "local_shell_call", "reasoning"):
            return None
        if item.get("role") == "user":
            for text in _texts(item):
                for line in text.splitlines():
                    if line.startswith(word):
                        return line[len(word):]
    return None


def shell_tool(req):
    """(name, kind) of the request's shell tool: a function taking a command."""
    names = [t.get("name") for t in req.get("tools") or () if isinstance(t, dict)]
    for name in ("shell_command", "exec_command", "shell"):
        if name in names:
            return name
    return None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    model = None

    def log_message(self, *args):
        pass

    def do_GET(self):
        self._json(200, {"data": [], "object": "list"})

    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.model.record(raw)
        try:
            req = json.loads(raw)
        except ValueError:
            req = {}
        if not self.path.endswith("/responses"):
            return self._json(404, {"error": {"message": "not here"}})
        n = next(self.model.ids)
        rid = f"resp_{n}"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self._event("response.created", response={"id": rid, "object": "response",
                                                  "status": "in_progress", "output": []})
        cmd, tool = run_directive(req), shell_tool(req)
        ask = run_directive(req, "ASK: ") if cmd is None else None
        if ask is not None and tool == "exec_command":
            cmd = ask
        if cmd is not None and tool is not None:
            args = ({"command": cmd} if tool == "shell_command"
                    else {"cmd": cmd} if tool == "exec_command"
                    else {"command": ["bash", "-lc", cmd]})
            if ask is not None:      # outside the sandbox: Codex asks for approval first
                args.update(sandbox_permissions="require_escalated", justification="needed")
            item = {"type": "function_call", "id": f"fc_{n}", "call_id": f"call_{n}",
                    "name": tool, "arguments": json.dumps(args), "status": "completed"}
            self._event("response.output_item.added", output_index=0, item=item)
            self._event("response.output_item.done", output_index=0, item=item)
        else:
            hold = run_directive(req, "HOLD: ")
            deadline = time.monotonic() + HOLD_CAP
            while hold and not os.path.exists(hold) and time.monotonic() < deadline:
                time.sleep(0.05)         # polling a condition, not ordering events
            text = self.model.reply
            item = {"type": "message", "id": f"msg_{n}", "role": "assistant",
                    "status": "in_progress", "content": []}
            self._event("response.output_item.added", output_index=0, item=item)
            self._event("response.output_text.delta", item_id=f"msg_{n}", output_index=0,
                        content_index=0, delta=text)
            item = dict(item, status="completed",
                        content=[{"type": "output_text", "text": text, "annotations": []}])
            self._event("response.output_item.done", output_index=0, item=item)
        self._event("response.completed", response={"id": rid, "object": "response",
                                                    "status": "completed", "output": [item],
                                                    "usage": USAGE})
        self.close_connection = True

    def _event(self, name, **data):
        body = json.dumps(dict(data, type=name))
        self.wfile.write(f"event: {name}\ndata: {body}\n\n".encode())
        self.wfile.flush()

    def _json(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def serve(port=0, log=None, reply="ok", announce=sys.stdout):
    handler = type("H", (Handler,), {"model": Model(log, reply)})
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    print(f"port {server.server_address[1]}", file=announce, flush=True)
    server.serve_forever()


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--log")
    ap.add_argument("--reply", default="ok")
    a = ap.parse_args(argv)
    serve(a.port, a.log, a.reply)


if __name__ == "__main__":
    main()
