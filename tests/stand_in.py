"""The HTTP skeleton the stand-in model servers in tests/ share. Standard
library only.

tests/model_server.py (Anthropic Messages, for Claude Code),
tests/responses_server.py (OpenAI Responses, for Codex) and
tests/gemini_server.py (Gemini generate-content) keep only their API's
shapes: which requests they answer and how. The rest is here, once:

  * serve(): listen on a free loopback port the kernel picks (so two rigs
    never race for one), say `port N` on stdout, serve each request in a
    thread until killed; SIGTERM or ^C ends it quietly, its socket closed;
  * options(): the options every server takes (--port, --log, --reply, and
    --script where a server is scripted);
  * Log: every request appended to the log FILE, one line each, under a lock
    (the CLIs send side requests in parallel with a turn);
  * Script: a script FILE of answers, one a line, consumed in order;
  * hold(): keep a reply back until a file exists (a test acts mid-turn,
    then lets the turn end: no guessed sleep);
  * Handler: the request body, JSON answers and server-sent events;
  * Model: the Codex and Gemini stand-ins' model, its log and fixed usage;
  * for the soak (tests/soak), what the stand-ins do alike as they follow a
    worker's day (day.py): a script line read as a turn (turn(): RUN, SLOW,
    SAY), usage counted by text (by_text()), and the log line that keeps
    what was new in a request and when it came (soak_entry()); SoakModel,
    the Codex and Gemini stand-ins' model of that day.
"""
import argparse
import json
import os
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOLD_CAP = 300          # seconds: a test that never lets go must not hang a run forever
SLOW_CAP = 600          # seconds: a typo in a script must not hang a run forever
CHARS_PER_TOKEN = 4     # the soak's usage: about 4 characters a token


class Log:
    """The request log FILE (or none): one line per request, whole, in order."""

    def __init__(self, path=None):
        self.path = path
        self.lock = threading.Lock()

    def append(self, line: bytes) -> None:
        if self.path:
            with self.lock, open(self.path, "ab") as f:
                f.write(line.replace(b"\n", b" ") + b"\n")


class Script:
    """The script FILE (or none): its first line taken and removed, under a
    lock, so concurrent requests never take the same line."""

    def __init__(self, path=None):
        self.path = path
        self.lock = threading.Lock()

    def next_line(self):
        """The next line, or None when there is no script or it is used up."""
        if not self.path:
            return None
        with self.lock:
            try:
                with open(self.path) as f:
                    lines = f.read().splitlines()
            except FileNotFoundError:
                return None
            if not lines:
                return None
            with open(self.path, "w") as f:
                f.write("".join(line + "\n" for line in lines[1:]))
            return lines[0]


def hold(path, cap=HOLD_CAP):
    """Return once the file *path* exists (at most *cap* seconds)."""
    deadline = time.monotonic() + cap
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.05)         # polling a condition, not ordering events


class Handler(BaseHTTPRequestHandler):
    """The common request handling; a server's subclass adds do_GET/do_POST."""

    def log_message(self, *args):
        pass                     # stderr stays quiet: the request log says what came

    def handle(self):
        try:
            super().handle()
        except (BrokenPipeError, ConnectionResetError):
            pass                 # the client gave the request up (Codex does, when a
                                 # second prompt comes into its turn): no error here

    def _body(self) -> bytes:
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    @staticmethod
    def _parse(raw):
        """The JSON object of a request body, {} if it is none."""
        try:
            req = json.loads(raw or b"{}")
        except ValueError:
            return {}
        return req if isinstance(req, dict) else {}

    def _json(self, obj, code=200):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _stream(self):
        """Begin a server-sent event stream; it ends when the connection closes."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        if self.protocol_version != "HTTP/1.0":
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()

    def _event(self, name, **data):
        """One named event (`event: NAME`, its data an object of type NAME)."""
        data = {"type": name, **data}
        self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()


class Model:
    """A Codex or Gemini stand-in's model in the e2e tests: the directives in
    each request rule (no Turn is planned) and usage is its API's fixed
    USAGE. The server's subclass sets USAGE."""

    USAGE = None

    def __init__(self, log=None, reply="ok"):
        self.log, self.reply = Log(log), reply

    def record(self, method, path, raw):
        """Log the request body *raw* (POSTed to *path* by *method*)."""
        self.log.append(raw)

    def turn(self, path, req):
        """The script's Turn for *req* (POSTed to *path*), or None: the directives in it rule."""
        return None

    def usage(self, req, sent):
        """What the reply *sent* for *req* says it cost."""
        return self.USAGE


def serve(handler, port=0, announce=sys.stdout):
    """Serve with *handler* (a Handler subclass) on 127.0.0.1:*port* until
    killed; `port N` on *announce* once it listens."""
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    server.daemon_threads = True
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"port {server.server_address[1]}", file=announce, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def options(description, script=False, argv=None):
    """The options every stand-in server takes."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--port", type=int, default=0, help="0 (default): one the kernel picks")
    p.add_argument("--log", help="append every request here, one line each")
    if script:
        p.add_argument("--script", help="scripted answers, one a line, consumed in order")
    p.add_argument("--reply", default="ok", help="the text reply otherwise")
    return p.parse_args(argv)


def main(doc, handler, model, soak_model, argv=None):
    """A Codex or Gemini stand-in's command line: *model* answers, or with
    --soak *soak_model* plays the --script day."""
    argv = list(sys.argv[1:] if argv is None else argv)
    soak = "--soak" in argv
    argv = [a for a in argv if a != "--soak"]
    a = options(doc.split("\n\n")[0], script=soak, argv=argv)
    answer = soak_model(a.log, a.reply, a.script) if soak else model(a.log, a.reply)
    serve(type("H", (handler,), {"model": answer}), a.port)


# --- the soak's day (tests/soak/day.py), as both stand-ins play it ------------------

class Turn:
    """One line of a worker's day: the shell command its tool is called with
    (RUN), how long the reply keeps streaming, the session generating
    meanwhile (SLOW), and the reply's text (SAY, else the server's reply)."""
    __slots__ = ("run", "slow", "say")

    def __init__(self, run=None, slow=0.0, say=None):
        self.run, self.slow, self.say = run, slow, say


def turn(line, reply="ok"):
    """The Turn a script *line* asks for (None: no line, the script used up)."""
    if line is None:
        return None
    verb, _, arg = line.strip().partition(": ")
    if verb == "RUN":
        return Turn(run=arg, say=reply)
    if verb == "SLOW":
        try:
            return Turn(slow=min(float(arg), SLOW_CAP), say=reply)
        except ValueError:
            return Turn(say=reply)
    return Turn(say=arg if verb == "SAY" else reply)


class SoakModel(Model):
    """A worker's day (tests/soak/day.py) as the Codex and Gemini stand-ins
    play it: a script line per turn of the agent's own answering the user;
    usage by text; the log holds what was new in each request, stamped.

    The server's subclass reads its API's requests: MESSAGES and
    INSTRUCTIONS (the request's fields for the conversation and the system
    text), own_turn(path, req) (the agent's turn, not a side request),
    users_turn(req) (it answers the user, not a tool), since_model(req)
    (the messages new in it) and tokens(seen, out) (its API's usage object)."""

    MESSAGES = INSTRUCTIONS = None

    def __init__(self, log=None, reply="ok", script=None):
        super().__init__(log, reply)
        self.script = Script(script)

    def record(self, method, path, raw):
        req = Handler._parse(raw)
        self.log.append(soak_entry(self.own_turn(path, req), len(self.messages(req)),
                                   self.since_model(req)))

    def turn(self, path, req):
        if not self.own_turn(path, req) or not self.users_turn(req):
            return None
        return turn(self.script.next_line(), self.reply)

    def usage(self, req, sent):
        seen = by_text(len(json.dumps(req.get(self.INSTRUCTIONS) or ""))
                       + len(json.dumps(self.messages(req))))
        return self.tokens(seen, by_text(len(json.dumps(sent))))

    def messages(self, req):
        return req.get(self.MESSAGES) or []


def by_text(chars):
    """Tokens for *chars* characters of text: a share of tokens then means something."""
    return max(1, chars // CHARS_PER_TOKEN)


def soak_entry(main, count, new):
    """The soak's log line for one request: when it came, whether it was the
    agent's own turn (*main*: it offered tools), how many messages it held
    (*count*) and the messages new in it (*new*, each {"role", "content"}:
    a request repeats the conversation, so the day's log stays linear)."""
    return json.dumps({"received": time.time(), "main": bool(main), "messages": count,
                       "new": new}).encode()
