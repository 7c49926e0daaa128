#!/usr/bin/env python3
"""A scripted stand-in for the Gemini API's streaming generate-content call,
so the real Gemini CLI runs turns offline (GOOGLE_GEMINI_BASE_URL pointed
here, GEMINI_API_KEY anything). Standard library only.

    python3 tests/gemini_server.py [--port N] [--log FILE] [--reply TEXT]

Prints `port N` once it listens. POST .../models/M:streamGenerateContent
(alt=sse) answers: if the newest user turn has a text line `RUN: <command>`
and no function response has come back since, a run_shell_command call;
else the reply TEXT (default "ok"), held back while the newest user turn has
a line `HOLD: <path>` and that file does not exist. Other POSTs
(countTokens, generateContent for side requests) get a plain answer, or
for a request of JSON (responseMimeType) the simplest object of its schema
(the model router's, when Gemini CLI runs without -m). Every
request (path and body) is appended to the log FILE, one JSON line each.
"""
import argparse
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOLD_CAP = 300
USAGE = {"promptTokenCount": 10, "candidatesTokenCount": 2, "totalTokenCount": 12}


def _directive(req, word):
    for content in reversed(req.get("contents") or []):
        if not isinstance(content, dict) or content.get("role") != "user":
            continue
        parts = content.get("parts") or []
        if any(isinstance(p, dict) and "functionResponse" in p for p in parts):
            return None
        for p in parts:
            for line in (p.get("text") or "").splitlines() if isinstance(p, dict) else ():
                if line.startswith(word):
                    return line[len(word):]
        return None
    return None


def _simplest(schema):
    """The simplest value of a (Gemini API, OpenAPI-like) JSON schema."""
    if not isinstance(schema, dict):
        return {}
    if schema.get("enum"):
        return schema["enum"][0]
    kind = str(schema.get("type", "object")).lower()
    if kind == "object":
        props = schema.get("properties") or {}
        return {k: _simplest(v) for k, v in props.items()}
    return {"string": "stand-in", "integer": 1, "number": 1, "boolean": False,
            "array": []}.get(kind)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    log = None
    reply = "ok"
    lock = threading.Lock()

    def log_message(self, *args):
        pass

    def _record(self, raw):
        if self.log:
            try:
                body = json.loads(raw or b"null")
            except ValueError:
                body = None
            with self.lock, open(self.log, "a") as f:
                f.write(json.dumps({"method": self.command, "path": self.path,
                                    "body": body}) + "\n")

    def do_GET(self):
        self._record(b"")
        self._json({})

    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._record(raw)
        try:
            req = json.loads(raw)
        except ValueError:
            req = {}
        if ":countTokens" in self.path:
            return self._json({"totalTokens": 10})
        config = req.get("generationConfig") or {}
        if config.get("responseMimeType") == "application/json" and "alt=sse" not in self.path:
            # A side request for JSON of a schema: Gemini CLI's model router
            # (run without -m; 0.61.0 asks for a complexity score) and the
            # like. The simplest object of the schema: the lowest score.
            obj = _simplest(config.get("responseJsonSchema") or config.get("responseSchema"))
            parts = [{"text": json.dumps(obj)}]
            return self._json({"candidates": [{"content": {"role": "model", "parts": parts},
                                               "finishReason": "STOP", "index": 0}],
                               "usageMetadata": USAGE, "modelVersion": "gemini-test"})
        cmd = _directive(req, "RUN: ")
        if cmd is not None:
            parts = [{"functionCall": {"name": "run_shell_command",
                                       "args": {"command": cmd, "description": "run it"}}}]
        else:
            hold = _directive(req, "HOLD: ")
            deadline = time.monotonic() + HOLD_CAP
            while hold and not os.path.exists(hold) and time.monotonic() < deadline:
                time.sleep(0.05)         # polling a condition, not ordering events
            parts = [{"text": self.reply}]
        chunk = {"candidates": [{"content": {"role": "model", "parts": parts},
                                 "finishReason": "STOP", "index": 0}],
                 "usageMetadata": USAGE, "modelVersion": "gemini-test"}
        if "alt=sse" not in self.path:
            return self._json(chunk)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(f"data: {json.dumps(chunk)}\r\n\r\n".encode())
        self.wfile.flush()
        self.close_connection = True

    def _json(self, obj):
        body = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def serve(port=0, log=None, reply="ok", announce=sys.stdout):
    handler = type("H", (Handler,), {"log": log, "reply": reply})
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
