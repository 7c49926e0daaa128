#!/usr/bin/env python3
"""A scripted stand-in for the Gemini API's streaming generate-content call,
so the real Gemini CLI runs turns offline (GOOGLE_GEMINI_BASE_URL pointed
here, GEMINI_API_KEY anything). Standard library only.

    python3 tests/gemini_server.py [--port N] [--log FILE] [--reply TEXT]
    python3 tests/gemini_server.py --soak --script FILE [--log FILE]

Prints `port N` once it listens. POST .../models/M:streamGenerateContent
(alt=sse) answers: if the newest user turn has a text line `RUN: <command>`
and no function response has come back since, a run_shell_command call;
else the reply TEXT (default "ok"), held back while the newest user turn has
a line `HOLD: <path>` and that file does not exist. Other POSTs
(countTokens, generateContent for side requests) get a plain answer, or
for a request of JSON (responseMimeType) the simplest object of its schema
(the model router's, when Gemini CLI runs without -m). Every
request (path and body) is appended to the log FILE, one JSON line each.

The soak (tests/soak, `--soak --script FILE`): a worker's day as the Claude
and Codex stand-ins play it (the parts all share are in tests/stand_in.py):
each streamed request of Gemini's own turn (it offers run_shell_command)
whose newest user content is not a function response takes the next line
of the script: `RUN: <command>` (a run_shell_command call), `SLOW:
<seconds>` (the reply keeps streaming that long: the session is generating),
`SAY: <text>`. Side requests (the model router's, the next-speaker check's:
JSON, no tools) take none. Usage is reported by the text received and sent
(about 4 characters a token), and a request is logged as what was new in it
(the contents after the model's last, a function response as a
`tool_result` block, a text part as a `text` block) and when it arrived, as
the other stand-ins' soak logs have it (tests/soak/checks.py reads them
alike).
"""
import json
import time

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


class Model(stand_in.Model):
    """The e2e tests' model: the directives of the newest user turn rule."""

    USAGE = USAGE

    def record(self, method, path, raw):
        """The method and path with the body: side requests differ by path alone."""
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            body = None
        self.log.append(json.dumps({"method": method, "path": path, "body": body}).encode())


def own_turn(path, req):
    """Whether *req* is Gemini's own turn (streamed, the shell tool offered),
    not a side request."""
    return ":streamGenerateContent" in path and any(isinstance(d, dict) and d.get("name") == "run_shell_command"
               for t in req.get("tools") or () if isinstance(t, dict)
               for d in t.get("functionDeclarations") or ())


def _contents(req):
    return [c for c in req.get("contents") or () if isinstance(c, dict)]


def users_turn(req):
    """Whether *req* answers the user, not a tool: its newest content is the
    user's and holds no function response."""
    contents = _contents(req)
    return bool(contents) and contents[-1].get("role") == "user" and not any(
        isinstance(p, dict) and "functionResponse" in p for p in contents[-1].get("parts") or ())


def since_model(req):
    """The contents after the model's last, as messages: a function response
    as a `tool_result` block, a text part as a `text` block (what the Claude
    stand-in logs for the same things)."""
    contents = _contents(req)
    last = max((n for n, c in enumerate(contents) if c.get("role") == "model"), default=-1)
    out = []
    for c in contents[last + 1:]:
        blocks = []
        for p in c.get("parts") or ():
            if not isinstance(p, dict):
                continue
            if "functionResponse" in p:
                r = p["functionResponse"] if isinstance(p["functionResponse"], dict) else {}
                blocks.append({"type": "tool_result", "tool_use_id": r.get("id"),
                               "content": r.get("response")})
            elif "text" in p:
                blocks.append({"type": "text", "text": p["text"]})
        out.append({"role": c.get("role"), "content": blocks})
    return out


class SoakModel(stand_in.SoakModel, Model):
    """A worker's day, Gemini's requests read: a function response comes
    back as a `tool_result` block, a text part as a `text` block."""

    MESSAGES, INSTRUCTIONS = "contents", "systemInstruction"
    own_turn, users_turn = staticmethod(own_turn), staticmethod(users_turn)
    since_model = staticmethod(since_model)

    @staticmethod
    def tokens(seen, out):
        return {"promptTokenCount": seen, "candidatesTokenCount": out,
                "totalTokenCount": seen + out}


class Handler(stand_in.Handler):
    protocol_version = "HTTP/1.1"
    model = Model()

    def do_GET(self):
        self.model.record(self.command, self.path, b"")
        self._json({})

    def do_POST(self):
        raw = self._body()
        self.model.record(self.command, self.path, raw)
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
        planned = self.model.turn(self.path, req)
        cmd = planned.run if planned else _directive(req, "RUN: ")
        if cmd is not None:
            parts = [{"functionCall": {"name": "run_shell_command",
                                       "args": {"command": cmd, "description": "run it"}}}]
        else:
            hold = _directive(req, "HOLD: ")
            if hold:
                stand_in.hold(hold)
            parts = [{"text": planned.say if planned else self.model.reply}]
        chunk = {"candidates": [{"content": {"role": "model", "parts": parts},
                                 "finishReason": "STOP", "index": 0}],
                 "usageMetadata": self.model.usage(req, parts), "modelVersion": "gemini-test"}
        if "alt=sse" not in self.path:
            return self._json(chunk)
        self._stream()
        if planned and planned.slow:
            # the text first, the end after: the CLI shows the turn as working meanwhile
            first = {"candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}],
                     "modelVersion": "gemini-test"}
            self._data(first)
            time.sleep(planned.slow)
            chunk["candidates"][0]["content"]["parts"] = []
        self._data(chunk)

    def _data(self, chunk):
        self.wfile.write(f"data: {json.dumps(chunk)}\r\n\r\n".encode())   # no event name
        self.wfile.flush()


def main(argv=None):
    stand_in.main(__doc__, Handler, Model, SoakModel, argv)


if __name__ == "__main__":
    main()
