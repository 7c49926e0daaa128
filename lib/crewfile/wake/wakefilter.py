"""wake-filter: which events are worth a turn of the primary (wakesend.py
takes them to it). The rules, class by class: docs/commands/wake-filter.md.

A session's class comes from its meta, cached and re-read when the file's
identity changes, checked at most once per input chunk (stream.run) and at
every `registered` event; each chunk's output goes in one write.
"""
import os

from crewfile.asides.aside import concluded_event_why
from crewfile.core import notify, paths
from crewfile.core.atomic import write_all
from crewfile.core.errors import BadInput, CrewfileError
from crewfile.core.jsonio import loads
from crewfile.core.kinds import KEEPS_PAUSE
from crewfile.core.names import check_name
from crewfile.core.records import is_kind
from crewfile.core.shapes import load
from crewfile.core.text import escape
from crewfile.wake import stream

# What passes, class by class, and why each kind does or not: wake-filter.md.
EXEMPT_PASS = frozenset({"concluded", "problem", "blocked", "error", "lost", "account-blocked"})
NORMAL_PASS = frozenset({"turn-ended", "done", "concluded", "blocked", "problem", "error",
                         "stale", "lost", "waiting", "ended", "account-blocked", "turn-failed",
                         "nudge-spent"})

# A session's class, from its meta: which events of it may wake the primary.
UNKNOWN, NORMAL, EXEMPT, PRIMARY = "unknown", "normal", "exempt", "primary"


class _Seen:
    """What the filter knows of one session: its class, the meta identity it
    was read from and the input chunk it was checked in; the kind of its
    newest event (the fold); whether `paused` holds its idle and stale."""
    __slots__ = ("cls", "meta_key", "checked_in", "last_kind", "paused")

    def __init__(self, checked_in):
        self.cls = UNKNOWN
        self.meta_key = None
        self.checked_in = checked_in
        self.last_kind = None
        self.paused = False


class Filter(stream.Taker):
    """take_all(lines) writes what passes, a chunk at a time (stream.run);
    feed(bytes) returns it."""

    def __init__(self, crew, normal_pass=NORMAL_PASS, exempt_pass=EXEMPT_PASS, warn=None):
        self.crew = crew
        self.sessions_dir = crew.sub(paths.SESSIONS)
        self.normal = frozenset(k.encode() for k in normal_pass)
        self.exempt = frozenset(k.encode() for k in exempt_pass)
        self.warn = warn or notify.warn_stderr
        self.state = {}
        self.gen = 0
        self.split = stream.Lines(self.warn)
        self.bad = 0
        # kind word as read (b"idle", b"blocked:") -> the kind, one object per kind
        self._bare, self._texted, self._canon = {}, {}, {}

    def feed(self, data):
        return self._lines(self.split.feed(data))

    def finish(self):
        self.split.finish()
        return b""

    def take_all(self, lines):
        out = self._lines(lines)
        if out:
            write_all(1, out)

    def _lines(self, lines):
        self.gen += 1
        gen = self.gen
        out = []
        keep = out.append
        state = self.state
        bare, texted, normal = self._bare, self._texted, self.normal
        for line in lines:
            token = None
            if b"\t" in line:      # a positioned line: `event TAB token` or `TAB token`
                line, _, token = line.partition(b"\t")
                if not line:
                    keep(b"\t" + token)        # an acknowledgement only: pass it on
                    continue
            parts = line.split(b" ", 3)
            n = len(parts)
            if n == 4:
                kind = texted.get(parts[2])
            elif n == 3:
                kind = bare.get(parts[2])
            else:
                self._bad(line, keep)
                continue
            if kind is None or len(parts[0]) != 24:
                kind = self._kind(parts[2], n == 4) if len(parts[0]) == 24 else None
                if kind is None:
                    self._bad(line, keep)
                    continue
            seen = state.get(parts[1])
            if seen is None or seen.checked_in != gen or kind == b"registered":
                seen = self._refresh(parts[1], seen, gen)
                if seen is None:
                    self._bad(line, keep)
                    continue
            if token is not None and not self._context(seen, kind, token):
                self._bad(line + b"\t" + token, keep)
                continue
            # The class ladder inline: a call per line costs wake-filter about
            # a tenth of its throughput, which bench_wake holds against awk.
            cls = seen.cls
            if cls is NORMAL:
                if kind == b"paused":
                    seen.paused = True
                elif seen.paused and kind not in KEEPS_PAUSE_B:
                    seen.paused = False
                ok = (kind in normal and kind is not seen.last_kind
                      and not (seen.paused and kind in HELD_WHILE_PAUSED_B))
            elif cls is EXEMPT:
                ok = kind in self.exempt and kind is not seen.last_kind
            elif cls is PRIMARY:
                ok = False          # its own turns must not wake it
            else:
                ok = True           # no metadata: waking is safer than losing
            if ok and kind == b"concluded":
                ok = self._believed_conclusion(parts)
            seen.last_kind = kind
            if token is not None:
                keep(line + b"\t" + token if ok else b"\t" + token)
            elif ok:
                keep(line)
        if not out:
            return b""
        out.append(b"")
        return b"\n".join(out)

    def _believed_conclusion(self, parts):
        """An aside's `concluded` wakes the primary only when the report it
        names is where aside-conclude puts it: a line appended by hand names
        none, and the hooks have said it as a `problem`, which wakes."""
        try:
            name = parts[1].decode("utf-8")
            why = concluded_event_why(self.crew, name,
                                      parts[3].decode("utf-8") if len(parts) == 4 else "")
        except (CrewfileError, OSError, UnicodeDecodeError):
            return True             # unsure: a wake is safer than a lost conclusion
        if why:
            self.warn(f"{escape(name)}: concluded not believed: {why}")
        return why is None

    def _context(self, seen, kind, token):
        """Take the fold and pause context from a position token (False: not
        one): a filter restarted mid-stream then judges as one that saw it all."""
        try:
            tok = loads(token)
            prev, paused = tok["prev"], tok["paused"]
            if prev is not None and not isinstance(prev, str):
                return False
        except (ValueError, TypeError, KeyError, AttributeError):
            return False
        seen.last_kind = kind if prev is not None and prev.encode() == kind else None
        seen.paused = bool(paused)
        return True

    def _kind(self, word, has_text):
        """Validate a kind word once and cache it (None: not a kind)."""
        if has_text and not word.endswith(b":"):
            return None
        kind = word[:-1] if has_text else word
        if not is_kind(kind.decode("latin-1")):     # a byte a character: a non-ASCII one is no kind
            return None
        kind = self._canon.setdefault(kind, kind)      # `is` compares kinds
        (self._texted if has_text else self._bare)[word] = kind
        return kind

    def _refresh(self, name, seen, gen):
        """The session's _Seen, its class re-read if its meta file changed."""
        if seen is None:
            try:
                check_name(name.decode("utf-8"))
            except (UnicodeDecodeError, BadInput):
                return None
            seen = _Seen(gen)
            self.state[name] = seen
        seen.checked_in = gen
        meta = os.path.join(self.sessions_dir, name.decode("utf-8"), paths.META)
        try:
            s = os.stat(meta, follow_symlinks=False)
            key = (s.st_ino, s.st_mtime_ns, s.st_size)
        except OSError:
            key = None
        if key != seen.meta_key:        # None twice: already UNKNOWN
            seen.meta_key = key
            seen.cls = UNKNOWN if key is None else _class_of(meta)
        return seen

    def _bad(self, line, keep):
        self.bad += 1
        if self.bad <= 100:
            self.warn(f"not an event line, passed on unchanged: {line[:80]!r}")
        elif self.bad == 101:
            self.warn("more lines that are not events; no further warnings")
        keep(line)


KEEPS_PAUSE_B = frozenset(k.encode() for k in KEEPS_PAUSE)
HELD_WHILE_PAUSED_B = frozenset({b"idle", b"stale"})


def _class_of(meta_path):
    try:
        meta = load(meta_path, "meta")
    except CrewfileError:
        return UNKNOWN
    if meta is None:
        return UNKNOWN
    if meta.get("kind") == "primary":
        return PRIMARY
    return EXEMPT if meta.get("exempt") else NORMAL

