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
(default "ok"), held back while a user message of the turn (tool calls and
outputs since included) has a line `HOLD: <path>` and that file does not
exist (a test acts mid-turn, then lets the turn end: no guessed sleep). `SPAWN: <message>`: a call of the request's
`spawn_agent` tool (Codex's subagents, multi_agent) handing the subagent the
message, which this stand-in then answers as any other request;
`HOLD-REPORT: <path>` holds the answer to a request whose newest input is that
subagent's report (Codex asking its parent's model again) as HOLD does.
`BIG: <shell command>`: the same call as RUN's, its reply reporting NEAR_FULL input
tokens (past the auto-compact limit Codex derives for this unknown model): Codex
compacts before its next request, mid-turn. It asks for the summary in a request of
its own (no tools, its compaction prompt last), answered with the reply TEXT, then
goes on from the history it rebuilt, the summary (a user message starting
SUMMARY_PREFIX) after the user's messages: the tool calls asked for before that
summary are done (not asked for again), a HOLD before it still holds the reply.
`FAIL: <code>`: the request is refused with HTTP 429 and the Responses API's
error body, {"error": {"type", "code": <code>, "message"}} (rate_limit_exceeded
is the API's passing rate limit; insufficient_quota its account's quota), every
time, retries included. Every request body is appended to the log FILE, one line each.
The events sent are the few a Codex turn needs (observed with Codex 0.171.0:
response.created, response.output_item.added, response.output_text.delta,
response.output_item.done, response.completed with a usage object).

The soak (tests/soak, `--soak --script FILE`): a worker's day as the Claude
stand-in plays it (tests/model_server.py --soak; the parts both share are in
tests/stand_in.py): each request of Codex's own turn (it offers the shell
tool) whose newest input is the user's (not a tool's output) takes the next
line of the script: `RUN: <command>` (a shell call), `SLOW: <seconds>` (the
reply keeps streaming that long: the session is generating), `SAY: <text>`.
Usage is reported by the text received and sent (about 4 characters a
token), and a request is logged as what was new in it (the input after the
model's last output, a tool's output as a `tool_result` block) and when it
arrived, as the Claude stand-in's soak log has it (tests/soak/checks.py
reads both alike).
"""
import itertools
import json
import time

import stand_in

USAGE = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
         "output_tokens": 2, "output_tokens_details": {"reasoning_tokens": 0},
         "total_tokens": 12}
NEAR_FULL = 990_000      # input tokens a BIG: call's reply reports
# What Codex (0.171.0) asks for a compaction's summary with (tests/CODEX_FINDINGS.md).
COMPACTION_PROMPT = "CONTEXT CHECKPOINT COMPACTION"
SUBAGENT_REPORT = "<subagent_notification>"     # how Codex 0.171.0 hands a subagent's end to its parent
# How Codex (0.171.0) starts the user message holding a compaction's summary.
SUMMARY_PREFIX = "Another language model started to solve this problem"


OUTPUTS = ("function_call_output", "custom_tool_call_output", "local_shell_call_output")
MODEL_OUTPUTS = ("function_call", "custom_tool_call", "local_shell_call", "reasoning")


class Model(stand_in.Model):
    """The e2e tests' model: the directives of the newest user input rule."""

    USAGE = USAGE

    def __init__(self, log=None, reply="ok"):
        super().__init__(log, reply)
        self.ids = itertools.count(1)

    def usage(self, req, sent):
        if sent.get("type") == "function_call" and run_directive(req, "BIG: ") is not None:
            return dict(USAGE, input_tokens=NEAR_FULL, total_tokens=NEAR_FULL + 2)
        return USAGE


def users_turn(req):
    """Whether *req* answers the user, not a tool: its last input item, the
    hooks' developer messages aside, is a user message."""
    for item in reversed(req.get("input") or []):
        if isinstance(item, dict) and item.get("role") != "developer":
            return item.get("role") == "user"
    return False


def since_output(req):
    """The input after the model's last output, as messages: a tool's output
    as a user message with one `tool_result` block (what the Claude stand-in
    logs for the same thing)."""
    items = [i for i in req.get("input") or () if isinstance(i, dict)]
    last = max((n for n, i in enumerate(items) if i.get("role") == "assistant"
                or i.get("type") in MODEL_OUTPUTS), default=-1)
    out = []
    for item in items[last + 1:]:
        if item.get("type") in OUTPUTS:
            out.append({"role": "user", "content": [{
                "type": "tool_result", "tool_use_id": item.get("call_id"),
                "content": item.get("output")}]})
        elif "role" in item:
            out.append({"role": item["role"], "content": item.get("content")})
    return out


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
        if item.get("type") in OUTPUTS:
            return None
        if item.get("role") == "assistant" or item.get("type") in MODEL_OUTPUTS:
            return None
        if item.get("role") == "user":
            if any(t.startswith(SUMMARY_PREFIX) for t in _texts(item)):
                return None         # a compaction's summary: the calls before it are done
            if _line_after(item, word) is not None:
                return _line_after(item, word)
    return None


def hold_directive(req):
    """The path of a `HOLD: <path>` line in the user messages of the turn
    (after the model's last message), whatever tool calls came since: the
    turn's answer after a tool (a subagent spawned, a command run) is held
    as the answer before it would be. Not Codex's own request for a
    compaction's summary (its prompt last)."""
    items = [i for i in req.get("input") or [] if isinstance(i, dict)]
    if items and any(COMPACTION_PROMPT in t for t in _texts(items[-1])):
        return None
    for item in reversed(items):
        if item.get("type") in OUTPUTS + MODEL_OUTPUTS:
            continue
        if item.get("role") == "assistant":
            return None
        if item.get("role") == "user" and _line_after(item, "HOLD: "):
            return _line_after(item, "HOLD: ")
    return None


def _line_after(item, prefix):
    """What follows *prefix* on the first line of *item*'s texts that starts with it."""
    for text in _texts(item):
        for line in text.splitlines():
            if line.startswith(prefix):
                return line[len(prefix):]
    return None


def report_hold(req):
    """The path of the newest `HOLD-REPORT: <path>` line of the user's, when
    the request's newest input is a subagent's report (Codex's
    `<subagent_notification>`: its parent's model asked again, no prompt
    typed): that answer is held as HOLD's is."""
    items = [i for i in req.get("input") or [] if isinstance(i, dict)]
    if not items or items[-1].get("role") != "user" or not any(
            SUBAGENT_REPORT in t for t in _texts(items[-1])):
        return None
    for item in reversed(items):        # the newest prompt's
        if item.get("role") == "user" and _line_after(item, "HOLD-REPORT: "):
            return _line_after(item, "HOLD-REPORT: ")
    return None


def tool_names(req):
    """The names of the request's tools, those in a namespace (multi_agent_v1) too."""
    tools = [t for t in req.get("tools") or () if isinstance(t, dict)]
    tools += [u for t in tools for u in t.get("tools") or () if isinstance(u, dict)]
    return [t.get("name") for t in tools]


def shell_tool(req):
    """(name, kind) of the request's shell tool: a function taking a command."""
    names = tool_names(req)
    for name in ("shell_command", "exec_command", "shell"):
        if name in names:
            return name
    return None


class SoakModel(stand_in.SoakModel, Model):
    """A worker's day, Codex's requests read: its own turn offers the shell
    tool; a tool's output comes back as a `tool_result` block."""

    MESSAGES, INSTRUCTIONS = "input", "instructions"
    users_turn, since_model = staticmethod(users_turn), staticmethod(since_output)

    @staticmethod
    def own_turn(path, req):
        return shell_tool(req) is not None

    @staticmethod
    def tokens(seen, out):
        return dict(USAGE, input_tokens=seen, output_tokens=out, total_tokens=seen + out)


class Handler(stand_in.Handler):
    protocol_version = "HTTP/1.1"
    model = None

    def do_GET(self):
        self._json({"data": [], "object": "list"})

    def do_POST(self):
        raw = self._body()
        self.model.record(self.command, self.path, raw)
        req = self._parse(raw)
        if not self.path.endswith("/responses"):
            return self._json({"error": {"message": "not here"}}, 404)
        fail = run_directive(req, "FAIL: ")
        if fail:
            return self._json({"error": {"type": "requests" if fail == "rate_limit_exceeded"
                                         else fail, "code": fail, "param": None,
                                         "message": f"stand-in refusal: {fail}"}}, 429)
        n = next(self.model.ids)
        rid = f"resp_{n}"
        self._stream()
        self._event("response.created", response={"id": rid, "object": "response",
                                                  "status": "in_progress", "output": []})
        planned = self.model.turn(self.path, req)
        cmd, tool = planned.run if planned else run_directive(req), shell_tool(req)
        if cmd is None and not planned:
            cmd = run_directive(req, "BIG: ")
        spawn = run_directive(req, "SPAWN: ") if cmd is None else None
        ask = run_directive(req, "ASK: ") if cmd is None else None
        if ask is not None and tool == "exec_command":
            cmd = ask
        if spawn is not None and "spawn_agent" in tool_names(req):
            item = {"type": "function_call", "id": f"fc_{n}", "call_id": f"call_{n}",
                    "name": "spawn_agent", "namespace": "multi_agent_v1",
                    "arguments": json.dumps({"message": spawn}), "status": "completed"}
            self._event("response.output_item.added", output_index=0, item=item)
            self._event("response.output_item.done", output_index=0, item=item)
        elif cmd is not None and tool is not None:
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
            hold = hold_directive(req) or report_hold(req)
            if hold:
                stand_in.hold(hold)
            text = planned.say if planned else self.model.reply
            item = {"type": "message", "id": f"msg_{n}", "role": "assistant",
                    "status": "in_progress", "content": []}
            self._event("response.output_item.added", output_index=0, item=item)
            self._event("response.output_text.delta", item_id=f"msg_{n}", output_index=0,
                        content_index=0, delta=text)
            if planned and planned.slow:
                time.sleep(planned.slow)     # the CLI shows the turn as working meanwhile
            item = dict(item, status="completed",
                        content=[{"type": "output_text", "text": text, "annotations": []}])
            self._event("response.output_item.done", output_index=0, item=item)
        self._event("response.completed", response={"id": rid, "object": "response",
                                                    "status": "completed", "output": [item],
                                                    "usage": self.model.usage(req, item)})


def main(argv=None):
    stand_in.main(__doc__, Handler, Model, SoakModel, argv)


if __name__ == "__main__":
    main()
