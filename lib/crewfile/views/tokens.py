"""What supervision costs: the tokens a session's agent used, from the
transcript its agent writes (meta `transcript_path`), and for a primary the
part spent on wake turns. What counts, per agent, and what a wake turn is:
docs/internals.md ("Tokens"); the cache: its `tokens.cache` section.

A transcript is another program's file: a line not of the shapes read is
skipped. It is read forwards from where the last read stopped (a Tally), so
a caller that keeps its Tally (crew-top in memory, crew-status in
`tokens.cache`) reads each byte once.
"""
import os

from crewfile.core import paths
from crewfile.core.atomic import read_json, replace
from crewfile.core.errors import CrewfileError
from crewfile.core.jsonio import dumps, loads
from crewfile.core.paths import open_file
from crewfile.wake.words import DEFAULT_SAY, WAKE_HEADER

MAX_BYTES = 64 << 20
MAX_LINE = 16 << 20      # a longer line is skipped whole
RECENT = 16              # message ids remembered across reads (a message's lines are adjacent)
TAIL = 32                # bytes before the offset kept to know the file again
FIELDS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens",
          "output_tokens")
_CHUNK = 1 << 20
_WAKE_B = b"crewfile wake: "


class Tally:
    """One transcript's count, and where its reading stopped."""
    __slots__ = ("dev", "ino", "offset", "tail", "total", "wake", "recent", "in_wake",
                 "skipping", "cum")

    def __init__(self, dev=0, ino=0):
        self.dev, self.ino = dev, ino
        self.offset, self.tail = 0, b""
        self.total = self.wake = self.cum = 0
        self.recent = {}          # message id -> [tokens, in a wake turn]
        self.in_wake = self.skipping = False

    def count(self, key, n):
        """Message *key* used *n* tokens (a repeat replaces its earlier count;
        a key not a string is no message's: counted alone)."""
        key = key if isinstance(key, str) else None
        old = self.recent.pop(key, None)
        if old is not None:
            self.total -= old[0]
            if old[1]:
                self.wake -= old[0]
        self.total += n
        if self.in_wake:
            self.wake += n
        if key is not None:
            self.recent[key] = [n, self.in_wake]
            while len(self.recent) > RECENT:
                del self.recent[next(iter(self.recent))]

    def prompt(self, text):
        """A prompt of *text* starts a turn (None: no prompt, the turn goes on)."""
        if text is not None:
            self.in_wake = _is_wake_prompt(text)

    def to_json(self):
        return {"dev": self.dev, "ino": self.ino, "offset": self.offset,
                "tail": self.tail.hex(), "total": self.total, "wake": self.wake,
                "cum": self.cum, "in_wake": self.in_wake, "skipping": self.skipping,
                "recent": [[k, v[0], v[1]] for k, v in self.recent.items()]}

    @classmethod
    def from_json(cls, d):
        """The Tally *d* describes, or None if it is not one (a damaged cache: recount)."""
        try:
            nums = [d[k] for k in ("dev", "ino", "offset", "total", "wake", "cum")]
            t = cls(d["dev"], d["ino"])
            t.offset, t.total, t.wake, t.cum = nums[2:]
            t.tail, t.in_wake, t.skipping = bytes.fromhex(d["tail"]), d["in_wake"], d["skipping"]
            t.recent = {k: [n, w] for k, n, w in d["recent"][:RECENT]}
            whole = (all(type(x) is int and x >= 0 for x in nums) and t.wake <= t.total
                     and type(t.in_wake) is bool and type(t.skipping) is bool
                     and len(t.tail) <= min(TAIL, t.offset)
                     and all(isinstance(k, str) and type(n) is int and n >= 0 and type(w) is bool
                             for k, (n, w) in t.recent.items()))
            return t if whole else None
        except (KeyError, TypeError, ValueError, AttributeError):
            return None


def read(path, tally=None):
    """The Tally of the transcript at *path*, read on from *tally* when it
    is of the same file (*tally* itself is not changed); None when there is
    no transcript or it cannot be read (the path opener's rules for a file
    outside the crew directory: a link is the user's layout, followed)."""
    if not path or not isinstance(path, str) or not os.path.isabs(path) or path.endswith(".json"):
        return None             # .json: an older Gemini CLI's chat, one document, not lines
    try:
        fd = open_file(path, outside=True)
    except (OSError, CrewfileError, ValueError):
        return None
    try:
        st = os.fstat(fd)
        # a copy of *tally* through the cache's form, which alone lists the fields
        t = Tally.from_json(tally.to_json()) if tally is not None and _same(fd, st, tally) else None
        if t is None:
            t = Tally(st.st_dev, st.st_ino)
            t.offset = max(0, st.st_size - MAX_BYTES)
            # a line cut in two by the window is skipped
            t.skipping = t.offset > 0 and os.pread(fd, 1, t.offset - 1) != b"\n"
        _advance(fd, t, st.st_size)
    except OSError:
        return None
    finally:
        os.close(fd)
    return t


def _same(fd, st, t):
    """The file *t* was read from, grown or not, with its bytes before the offset unchanged."""
    return ((st.st_dev, st.st_ino) == (t.dev, t.ino) and st.st_size >= t.offset
            and os.pread(fd, len(t.tail), t.offset - len(t.tail)) == t.tail)


def _advance(fd, t, size):
    pos, carry = t.offset, b""
    while pos < size:
        chunk = os.pread(fd, min(_CHUNK, size - pos), pos)
        if not chunk:
            break
        pos += len(chunk)
        lines = (carry + chunk).split(b"\n")
        carry = lines.pop()
        if t.skipping and lines:
            lines.pop(0)
            t.skipping = False
        for raw in lines:
            if len(raw) <= MAX_LINE:     # the same verdict wherever the chunks fall
                _line(t, raw)
        if t.skipping:
            carry = b""
        elif len(carry) > MAX_LINE:
            carry, t.skipping = b"", True
    t.offset = pos - len(carry)     # a last line without its newline: read next time
    n = min(TAIL, t.offset)
    t.tail = os.pread(fd, n, t.offset - n) if n else b""


def _line(t, raw):
    # Only lines that can matter are parsed (the agents write compact JSON:
    # a key and its value are never apart).
    usage = b'"usage"' in raw or b'"token_count"' in raw or b'"tokens"' in raw
    if not (usage or b'"type":"user' in raw or b'"role":"user"' in raw or _WAKE_B in raw):
        return
    try:
        e = loads(raw)
    except ValueError:
        return
    if not isinstance(e, dict):
        return
    kind = e.get("type")
    msg = e.get("message")
    if usage and isinstance(msg, dict) and isinstance(msg.get("usage"), dict):
        u = msg["usage"]
        t.count(msg.get("id"), sum(v for v in (u.get(k) for k in FIELDS)
                                   if type(v) is int and v > 0))
    elif kind == "user" and not (
            e.get("isMeta") or e.get("isCompactSummary") or e.get("isSidechain")):
        # Claude Code: the message's content; Gemini CLI: the line's own
        t.prompt(_prompt_text(msg.get("content") if isinstance(msg, dict) else e.get("content")))
    elif kind == "gemini" and isinstance(e.get("tokens"), dict):
        n = e["tokens"].get("total")
        t.count(e.get("id"), n if type(n) is int and n > 0 else 0)
    elif kind == "attachment" and isinstance(e.get("attachment"), dict):
        a = e["attachment"]
        content = a.get("content")
        if a.get("hookEvent") == "Stop" and any(
                isinstance(c, str) and WAKE_HEADER in c
                for c in (content if isinstance(content, list) else [content])):
            t.in_wake = True
    elif kind in ("event_msg", "response_item") and isinstance(e.get("payload"), dict):
        _codex(t, e["payload"])


def _codex(t, p):
    """Codex's rollout: token_count events (a running total); prompts as
    user messages of the model's history (a Stop hook's `<hook_prompt>` too)
    or, in older versions, user_message events."""
    if p.get("type") == "token_count":
        info = p.get("info")
        total = info.get("total_token_usage") if isinstance(info, dict) else None
        n = total.get("total_tokens") if isinstance(total, dict) else None
        if type(n) is int and n >= 0:
            t.count(None, n - t.cum if n >= t.cum else n)      # smaller: it counts anew
            t.cum = n
    elif p.get("type") == "user_message" and isinstance(p.get("message"), str):
        t.prompt(p["message"])
    elif p.get("type") == "message" and p.get("role") == "user" and isinstance(
            p.get("content"), list):      # the model's history: a prompt, a hook's prompt
        texts = [b["text"] for b in p["content"]
                 if isinstance(b, dict) and isinstance(b.get("text"), str)]
        t.prompt("\n".join(texts) if texts else None)


def _prompt_text(content):
    """A prompt's text: a string, or parts each with a text (Claude Code's
    `{"type": "text", "text"}`, Gemini CLI's `{"text"}`); None for other
    content (Claude Code's tool result: the turn goes on)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list) or not content or not all(
            isinstance(b, dict) and isinstance(b.get("text"), str) for b in content):
        return None
    return "\n".join(b["text"] for b in content)


TASK_NOTIFICATION = "<task-notification>"    # Claude Code's own prompt (agents.claude.MACHINE_PROMPTS)


def _is_wake_prompt(text):
    """Wake-send's announcement (words.DEFAULT_SAY, any count and senders), or
    the Stop hook's wakes given as a prompt (an agent that continues a turn
    with a prompt: Codex, Gemini CLI; Claude Code's older `decision: block`)."""
    if WAKE_HEADER in text:
        return True
    if text.startswith(TASK_NOTIFICATION):
        # `Stop hook blocking error from command "Stop": ANNOUNCEMENT`
        return any(_fits(_ANNOUNCE, line[line.find(_ANNOUNCE[0]):].strip())
                   for line in text.splitlines() if _ANNOUNCE[0] in line)
    return _fits(_ANNOUNCE, text.strip())


def _literals(template):
    """The fixed parts of a str.format *template* ('a {x} b' -> ['a ', ' b'])."""
    parts, rest = [], template
    while "{" in rest:
        head, _, rest = rest.partition("{")
        parts.append(head)
        rest = rest.partition("}")[2]
    return parts + [rest]


def _fits(parts, text):
    """*text* is the fixed *parts* in order, each gap filled by one or more
    characters (what re's `.+` between them would match; re costs more to
    import than a status line may spend)."""
    if len(parts) == 1 or "\n" in text:
        return text == parts[0]
    if not text.startswith(parts[0]) or not text.endswith(parts[-1]):
        return False
    at, end = len(parts[0]), len(text) - len(parts[-1])
    for part in parts[1:-1]:
        found = text.find(part, at + 1, end)
        if found < 0:
            return False
        at = found + len(part)
    return at < end


_ANNOUNCE = _literals(DEFAULT_SAY)


class Cache:
    """The crew's `tokens.cache`: a Tally per transcript path, so crew-status
    reads only what was appended since its last call. A damaged file is an
    empty cache: a recount, never a wrong figure taken on trust."""
    VERSION = 1

    def __init__(self, crew):
        self.path = crew.sub(paths.TOKENS_CACHE)
        self.old, self.new = {}, {}
        try:
            doc = read_json(self.path)
        except (ValueError, CrewfileError):
            doc = None
        if isinstance(doc, dict) and doc.get("version") == self.VERSION and isinstance(
                doc.get("transcripts"), dict):
            self.old = doc["transcripts"]

    def tally(self, path):
        """The Tally of the transcript at *path* now, or None."""
        if path in self.new:
            return self.new[path]
        t = read(path, Tally.from_json(self.old.get(path)))     # absent, or not a Tally's: None
        if t is not None:
            self.new[path] = t
        return t

    def save(self):
        """Write the tallies taken, if any changed (transcripts no longer
        asked about are dropped). A crew directory that cannot be written
        (a copy, a full disk) keeps the figures, not the cache."""
        transcripts = {p: t.to_json() for p, t in self.new.items()}
        if transcripts == self.old:
            return
        doc = {"version": self.VERSION, "transcripts": transcripts}
        try:
            # sync=False: a cache lost in a crash is a recount, no promise broken
            replace(self.path, dumps(doc) + "\n", sync=False)
        except CrewfileError:
            pass


SUBAGENT_FILES = 4096       # subagent transcripts counted per session, at most


def subagents(path):
    """The transcripts of the subagents of the agent whose transcript is
    *path*, sorted (docs/internals.md: Claude Code's subagents)."""
    if not isinstance(path, str) or not path.endswith(".jsonl") or not os.path.isabs(path):
        return []
    found = []
    # os.walk: none (the common case) or unreadable is an empty walk; links not followed
    for d, _, files in os.walk(path[:-6] + "/subagents"):
        found += [os.path.join(d, f) for f in files if f.endswith(".jsonl")]
        if len(found) >= SUBAGENT_FILES:
            break
    return sorted(found)[:SUBAGENT_FILES]


def session_used(path, tally_of):
    """A Tally of the agent whose transcript is *path*, its subagents' totals
    added (a subagent's messages count in no turn of the session's: *wake*
    is the session's own), or None; tally_of(path): a Tally or None
    (Cache.tally, crew-top's own reading)."""
    main = tally_of(path)
    if main is None:
        return None
    found = Tally()
    found.wake = main.wake
    found.total = main.total + sum(t.total for t in map(tally_of, subagents(path)) if t is not None)
    return found


def text(n):
    """A TOKENS column: '-', '950', '12k', '3.4M'."""
    if n is None:
        return "-"
    if n < 1000:
        return str(n)
    if n < 1_000_000:
        return f"{n // 1000}k"
    return f"{n / 1_000_000:.1f}M"


def short(n):
    """A total for one line: '950', '12.3k', '3.4M'."""
    if n < 1000:
        return str(n)
    if n < 999_950:
        return f"{n / 1000:.1f}k"
    return f"{n / 1_000_000:.1f}M"


def share(part, whole):
    """'58%' of *whole*; '-' when nothing was used."""
    return f"{round(100 * part / whole)}%" if whole else "-"
