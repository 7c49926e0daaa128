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
import json
import sys

import stand_in

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


class Handler(stand_in.Handler):
    protocol_version = "HTTP/1.1"
    log = stand_in.Log()
    reply = "ok"

    def _record(self, raw):
        """The method and path with the body: side requests differ by path alone."""
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            body = None
        self.log.append(json.dumps({"method": self.command, "path": self.path,
                                    "body": body}).encode())

    def do_GET(self):
        self._record(b"")
        self._json({})

    def do_POST(self):
        raw = self._body()
        self._record(raw)
        req = self._parse(raw)
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
            if hold:
                stand_in.hold(hold)
            parts = [{"text": self.reply}]
        chunk = {"candidates": [{"content": {"role": "model", "parts": parts},
                                 "finishReason": "STOP", "index": 0}],
                 "usageMetadata": USAGE, "modelVersion": "gemini-test"}
        if "alt=sse" not in self.path:
            return self._json(chunk)
        self._stream()
        self.wfile.write(f"data: {json.dumps(chunk)}\r\n\r\n".encode())   # no event name
        self.wfile.flush()


def serve(port=0, log=None, reply="ok", announce=sys.stdout):
    handler = type("H", (Handler,), {"log": stand_in.Log(log), "reply": reply})
    stand_in.serve(handler, port, announce)


def main(argv=None):
    a = stand_in.options(__doc__.split("\n\n")[0], argv=argv)
    serve(a.port, a.log, a.reply)


if __name__ == "__main__":
    main()
