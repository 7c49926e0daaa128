#!/usr/bin/env python3
"""A scripted stand-in for the Anthropic Messages API, so the real Claude Code
CLI runs whole turns offline in the tests and the demo. Standard library only.

    python3 tests/model_server.py [--port N] [--log FILE] [--script FILE] [--reply TEXT]

It prints `port N` on stdout once it listens (the default, port 0, lets the
kernel pick a free one, so two rigs never race for a port), then serves until
it is killed. Point Claude Code at it with ANTHROPIC_BASE_URL=http://127.0.0.1:N.

What the "model" answers to a main-loop request (one that offers tools: the
agent's turn, as opposed to the CLI's side requests for titles and the like)
whose newest user message is not a tool result, first match wins:
  1. the next line of the script FILE, consumed: `RUN: <shell command>` (a Bash
     tool call), `SLOW: <seconds>` (the reply keeps streaming that long: the
     session is generating), `HOLD: <path>` (the reply keeps streaming until
     that file exists: a test ends the turn when it is ready, not after a
     guessed time), `SAY: <text>` (a text reply), `LIMIT: <epoch seconds>`
     (HTTP 429 `rate_limit_error`, not to be retried, whose limit resets at
     that time: the headers the real API sends with it, `retry-after`,
     `anthropic-ratelimit-unified-reset` and `x-should-retry: false`; the
     turn fails and the CLI's StopFailure hook fires), `AGENT: <prompt>` (an
     Agent tool call: a general-purpose subagent runs <prompt>, its own turn
     answered by these same rules), `BG: <shell command>` (a Bash call with
     run_in_background: the command runs on after the turn), `BIG: <shell
     command>` (a Bash call whose reply reports 990,000 input tokens: the CLI
     compacts before its next request, mid-turn), `TOOLONG: <shell command>`
     (a Bash call whose result is answered once with HTTP 400
     `prompt is too long`, as the API refuses a conversation past the
     window: the CLI compacts then, or fails the turn). The script is for
     turns whose prompt the test does not type (a nudge, a slash command).
  2. a line `RUN: <command>` or `SLOW: <seconds>` in that user message.
  3. the reply TEXT (default "ok").
Everything else, a tool result included (but the loading ToolSearch's),
gets the reply TEXT.

Every Messages request body is appended to the log FILE, one line each, so a
test reads exactly what reached the model (tests/claude_harness.py parses it).

The soak (tests/soak, `--soak`): usage is reported by the text received and
sent (about 4 characters a token), so a share of tokens means something; a
request is logged as what was new in it (the user messages after the last
assistant message) and when it arrived, so a day's log stays linear; and
with `--soak-primary NAME` the model is the primary's: each wake it is
shown is answered with a scripted action (see SoakPrimary). Every model
answers the CLI's compaction request (its auto-compact) with a summary in the
tags it asks for, taking no script line.
"""
import itertools
import json
import re
import shlex
import sys
import time

import stand_in

NEAR_FULL = 990_000     # input tokens past Claude Code's auto-compact threshold (~967k)
TOO_LONG = "prompt is too long: 1000500 tokens > 1000000 maximum"   # the API's 400
USAGE = {"input_tokens": 10, "output_tokens": 2,
         "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
SLOW_CAP = stand_in.SLOW_CAP


class Model:
    """The scripted answers. The script's pops and the log's appends are each
    taken under a lock (stand_in): the CLI sends side requests in parallel
    with a turn."""

    who = "the scripted session"    # whose day a compaction's summary names

    def __init__(self, log=None, script=None, reply="ok"):
        self.log, self.script, self.reply = stand_in.Log(log), stand_in.Script(script), reply
        self.ids = itertools.count(1)
        self.then = {}      # a ToolSearch call's id -> the Cron call that answers its result
        self.big = set()    # ids of the BIG: calls, whose replies report a near-full window
        self.too_long = set()   # ids of the TOOLONG: calls, whose results the API refuses once

    def record(self, raw: bytes) -> None:
        self.log.append(raw)

    def usage(self, req, block) -> dict:
        """What the message says it cost (fixed but for a BIG: call; only the soak counts it)."""
        return dict(USAGE, input_tokens=NEAR_FULL) if block.get("id") in self.big else USAGE

    def _next_script_line(self):
        return self.script.next_line()

    def answer(self, req: dict):
        """(tool_call or None, text, seconds to keep streaming or a path to
        wait for); for a `LIMIT:` line (None, None, the reset epoch seconds);
        for a TOOLONG: call's result, once, (None, None, TOO_LONG)."""
        text, delay = self.reply, 0.0
        if req.get("tools") and _is_compaction(req):
            return None, SUMMARY.format(who=self.who), 0.0
        if not req.get("tools") or _is_tool_result(req):
            refused = self.too_long.intersection(_tool_result_ids(req))
            if refused and req.get("tools"):
                self.too_long -= refused
                return None, None, TOO_LONG
            waiting = [self.then.pop(i, None) for i in _tool_result_ids(req)]
            call = next((c for c in waiting if c), None)
            return call, text, delay
        line = self._next_script_line()
        directives = [line] if line is not None else _directives(req)
        call = None
        for d in directives:
            verb, _, arg = d.strip().partition(": ")
            if verb == "LIMIT":
                try:
                    return None, None, int(float(arg))
                except ValueError:
                    pass
            if verb in ("RUN", "BIG", "TOOLONG") and call is None:
                call = {"type": "tool_use", "id": f"toolu_{next(self.ids):06d}", "name": "Bash",
                        "input": {"command": arg, "description": "scripted"}}
                if verb == "BIG":
                    self.big.add(call["id"])
                elif verb == "TOOLONG":
                    self.too_long.add(call["id"])
            elif verb == "BG" and call is None:
                call = {"type": "tool_use", "id": f"toolu_{next(self.ids):06d}", "name": "Bash",
                        "input": {"command": arg, "description": "scripted",
                                  "run_in_background": True}}
            elif verb == "AGENT" and call is None:
                call = {"type": "tool_use", "id": f"toolu_{next(self.ids):06d}", "name": "Agent",
                        "input": {"description": "scripted", "prompt": arg,
                                  "subagent_type": "general-purpose"}}
            elif verb in CRON_TOOLS and call is None:
                call = self._cron(verb, arg)
            elif verb == "SLOW":
                try:
                    delay = min(float(arg), SLOW_CAP)
                except ValueError:
                    pass
            elif verb == "HOLD":
                delay = arg
            elif verb == "SAY":
                text = arg
        return call, text, delay

    def _cron(self, verb, arg):
        """The ToolSearch call that loads the Cron tools; the Cron call itself
        answers its result (self.then)."""
        if verb == "UNCRON":
            tool, inp = "CronDelete", {"id": arg.strip()}
        else:
            fields = arg.split()
            tool, inp = "CronCreate", {"cron": " ".join(fields[:5]),
                                       "prompt": " ".join(fields[5:]) or "carry on",
                                       "recurring": True}
            if verb == "DURABLE-CRON":
                inp["durable"] = True
        search = {"type": "tool_use", "id": f"toolu_{next(self.ids):06d}", "name": "ToolSearch",
                  "input": {"query": "select:CronCreate,CronDelete"}}
        self.then[search["id"]] = {"type": "tool_use", "id": f"toolu_{next(self.ids):06d}",
                                   "name": tool, "input": inp}
        return search


CRON_TOOLS = ("CRON", "DURABLE-CRON", "UNCRON")


def _tool_result_ids(req):
    return [b.get("tool_use_id") for b in _newest_user(req) if b.get("type") == "tool_result"]


def _pause(delay):
    """Sleep *delay* seconds, or until the file *delay* names exists."""
    if isinstance(delay, str):
        stand_in.hold(delay, SLOW_CAP)
    else:
        time.sleep(delay)


def _newest_user(req):
    msgs = [m for m in req.get("messages") or [] if m.get("role") != "system"]
    if not msgs or msgs[-1].get("role") != "user":
        return []
    content = msgs[-1].get("content")
    return [{"type": "text", "text": content}] if isinstance(content, str) else content or []


def _is_tool_result(req) -> bool:
    return any(b.get("type") == "tool_result" for b in _newest_user(req))


def _directives(req):
    """The `RUN: ` and `SLOW: ` lines of the newest user message, in order."""
    out = []
    for block in _newest_user(req):
        if block.get("type") == "text":
            out += [l.strip() for l in block.get("text", "").splitlines()
                    if l.strip().startswith(("RUN: ", "SLOW: "))]
    return out


class Handler(stand_in.Handler):
    model: Model = None          # set by serve()

    def do_GET(self):
        self._json({})

    def do_POST(self):
        raw = self._body()
        req = self._parse(raw)
        path = self.path.split("?")[0]
        if path.endswith("/count_tokens"):
            return self._json({"input_tokens": 10})
        if path != "/v1/messages":
            return self._json({})
        self.model.record(raw)
        tool, text, delay = self.model.answer(req)
        if text is None:
            return self._too_long() if delay == TOO_LONG else self._limited(delay)
        msg = {"id": f"msg_{next(self.model.ids):06d}", "type": "message", "role": "assistant",
               "model": req.get("model", "claude"), "content": [], "stop_reason": None,
               "stop_sequence": None}
        block = tool or {"type": "text", "text": text}
        msg["usage"] = usage = self.model.usage(req, block)
        stop = "tool_use" if tool else "end_turn"
        if not req.get("stream"):
            _pause(delay)
            return self._json(dict(msg, content=[block], stop_reason=stop))
        self._stream()                  # HTTP/1.0: the stream ends when we close
        self._event("message_start", message=msg)
        if tool:
            self._event("content_block_start", index=0, content_block=dict(tool, input={}))
            self._event("content_block_delta", index=0, delta={
                "type": "input_json_delta", "partial_json": json.dumps(tool["input"])})
        else:
            self._event("content_block_start", index=0, content_block={"type": "text", "text": ""})
            self._event("content_block_delta", index=0, delta={"type": "text_delta", "text": text})
        _pause(delay)           # the CLI shows the turn as generating meanwhile
        self._event("content_block_stop", index=0)
        self._event("message_delta", delta={"stop_reason": stop, "stop_sequence": None},
                    usage={"output_tokens": usage["output_tokens"]})
        self._event("message_stop")

    def _too_long(self):
        """400 invalid_request_error, as the API refuses a conversation past the window."""
        self._json({"type": "error", "error": {"type": "invalid_request_error",
                                               "message": TOO_LONG}}, code=400)

    def _limited(self, reset):
        """429 rate_limit_error as the API sends it, resetting at epoch *reset*."""
        body = json.dumps({"type": "error", "error": {
            "type": "rate_limit_error",
            "message": f"This request would exceed your rate limit; it resets at {reset}."}}).encode()
        self.send_response(429)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.send_header("retry-after", str(max(0, reset - int(time.time()))))
        self.send_header("anthropic-ratelimit-unified-status", "rejected")
        self.send_header("anthropic-ratelimit-unified-reset", str(reset))
        self.send_header("x-should-retry", "false")
        self.end_headers()
        self.wfile.write(body)


def serve(port=0, log=None, script=None, reply="ok", announce=sys.stdout, model=None):
    model = model or Model(log, script, reply)
    handler = type("Handler", (Handler,), {"model": model})
    stand_in.serve(handler, port, announce)


# --- the soak's stand-in (tests/soak) ------------------------------------------------

CHARS_PER_TOKEN = stand_in.CHARS_PER_TOKEN
# An event line inside what the primary is shown: a wake notice from its prompt
# hook (`crewfile notice: wake TS NAME KIND...`) or a line of inbox-drain's
# output (`TS wake: ID TS NAME KIND...`).
WAKE_EVENT = re.compile(r"\bwake:? (?:\S+ )?(\d{4}-\d\d-\d\dT[\d:.]+Z) (\S+) ([a-z][a-z0-9-]*)")
NUDGED = ("turn-ended", "done", "waiting", "blocked", "turn-failed", "stale", "nudge-spent")
# a session gone: its nudge is disarmed by the tick that finds it not live,
# and armed again by crew-respawn, so it reaches the agent once it is back
GONE = ("lost", "ended")
# The CLI's compaction request (tests/CLAUDE_FINDINGS.md, "Auto-compact"): its
# last user message asks for a summary; a reply without <summary> tags is
# asked for again, and a script line spent on it would shift the whole day.
COMPACTION = "CRITICAL: Respond with TEXT ONLY"
SUMMARY = ("<analysis>The conversation so far: scripted soak turns.</analysis>\n"
           "<summary>1. Primary Request and Intent: {who}'s soak day, one scripted turn at a"
           " time.\n8. Current Work: the next turn as its prompt says.</summary>")
# What the hook's notices header says when it hands wakes over (crewfile's
# hooks.hook.NOTICE_HEADER): they are the model's already, inbox-drain
# would only fetch what came since.
HANDED_OVER = "no inbox-drain needed"


def _since_assistant(req):
    """The messages after the last assistant message: what is new in *req*."""
    msgs = req.get("messages") or []
    last = max((i for i, m in enumerate(msgs) if m.get("role") == "assistant"), default=-1)
    return msgs[last + 1:]


def _is_compaction(req):
    return any(b.get("type") == "text" and COMPACTION in (b.get("text") or "")
               for b in _newest_user(req))


class SoakModel(Model):
    """Usage by text; the log holds what was new in each request, stamped; a
    compaction request answered by a summary in the tags the CLI asks for."""

    who = "the worker"

    def usage(self, req, block):
        seen = len(json.dumps(req.get("system") or "")) + len(json.dumps(req.get("messages") or []))
        return dict(USAGE, input_tokens=stand_in.by_text(seen),
                    output_tokens=stand_in.by_text(len(json.dumps(block))))

    def record(self, raw):
        req = Handler._parse(raw)
        self.log.append(stand_in.soak_entry(req.get("tools"), len(req.get("messages") or []),
                                            _since_assistant(req)))


class SoakPrimary(SoakModel):
    """The primary's model: shown wakes (by its prompt hook, or a prompt that
    says to run inbox-drain), it runs `inbox-drain NAME`, then one action per
    session woken: a nudge to go on (nudge-add, replacing the last; also
    for a session lost or ended, which crew-respawn brings back), a concluded
    aside reconciled (aside-reconcile), a review (status-show) of anything
    else. Wakes the hook handed over saying they need no drain are acted on
    at once. Everything else ends the turn."""

    def __init__(self, name, **kw):
        super().__init__(**kw)
        self.name = self.who = name
        self.calls = {}          # tool_use id -> "drain" | "act"
        self.pending = []        # wakes shown before the drain's result

    def answer(self, req):
        if not req.get("tools"):
            return None, self.reply, 0.0
        if _is_compaction(req):
            return None, SUMMARY.format(who=self.who), 0.0
        newest = _newest_user(req)
        # a hook's context comes as a message of its own (role `system`)
        # after the prompt: everything since the model last spoke is new
        shown = json.dumps(_since_assistant(req))
        wakes = WAKE_EVENT.findall(shown)
        results = [b.get("tool_use_id") for b in newest if b.get("type") == "tool_result"]
        role = next((self.calls.pop(i) for i in results if i in self.calls), None)
        if role is None and wakes and HANDED_OVER in shown:
            line = self._acts(wakes)
            return (self._run("act", line) if line else None), self.reply, 0.0
        if role is None and (wakes or "inbox-drain" in shown):
            self.pending = wakes
            return self._run("drain", f"inbox-drain {shlex.quote(self.name)}"), self.reply, 0.0
        if role == "drain" or (role == "act" and wakes):
            todo, self.pending = self.pending + wakes, []
            line = self._acts(todo)
            if line:
                return self._run("act", line), self.reply, 0.0
        return None, self.reply, 0.0

    def _run(self, role, command):
        call_id = f"toolu_{next(self.ids):06d}"
        self.calls[call_id] = role
        return {"type": "tool_use", "id": call_id, "name": "Bash",
                "input": {"command": command, "description": "scripted"}}

    def _acts(self, wakes):
        """One shell line acting on *wakes* ((ts, session, kind)), a session once."""
        acts = {}
        for ts, who, kind in wakes:
            if who == self.name:
                continue
            q = shlex.quote(who)
            if kind == "concluded":
                acts[who] = f"aside-reconcile {q}"
            elif kind in NUDGED + GONE and who not in acts:
                acts[who] = (f"nudge-add --session {q} --every 1 --max 1 --replace"
                             f" --message {shlex.quote(f'SOAK-GO {who} after {kind} {ts}')}")
            elif who not in acts:
                acts[who] = f"status-show {q} --last 3"
        return "; ".join(f"{a} >/dev/null 2>&1" for a in acts.values()) + ("; true" if acts else "")


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    soak, primary = "--soak" in argv, None
    argv = [a for a in argv if a != "--soak"]
    if "--soak-primary" in argv:
        at = argv.index("--soak-primary")
        primary, soak = argv[at + 1], True
        del argv[at:at + 2]
    a = stand_in.options(__doc__.split("\n\n")[0], script=True, argv=argv)
    kw = dict(log=a.log, script=a.script, reply=a.reply)
    model = (SoakPrimary(primary, **kw) if primary else SoakModel(**kw) if soak else None)
    serve(a.port, a.log, a.script, a.reply, model=model)


if __name__ == "__main__":
    main()
