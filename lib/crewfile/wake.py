"""Wakes: which events are worth a turn of the primary (the filter), and
how they reach it (the sender).

The filter reads event lines `<ts> <session> <kind>[: <text>]` (what
crew-watch prints) and keeps those that should wake the primary:

- exempt sessions (every aside): only their conclusion and real problems
  (EXEMPT_PASS). The turn-by-turn and idle churn of a captain's conversation
  never wakes anyone;
- normal sessions: the actionable kinds (NORMAL_PASS); a repeat of the same
  kind from the same session with no other event of that session in between
  is folded into the first; after `paused` (a bounded human wait, not a
  wedge) its `idle` and `stale` are held until other activity;
- a session without metadata: every line passes (waking is safer than
  losing); a line that is not an event passes unchanged, with a warning.

The class comes from sessions/NAME/meta ("exempt"), cached and re-read when
the file's identity (inode, mtime, size) changes, checked at most once per
input chunk and at every `registered` event.

Input is read in chunks of whatever is available and each chunk's output is
written in one write() before the next read: a live stream gets each line at
once, a file gets no system call per line, and nothing depends on
PYTHONUNBUFFERED.
"""
import os

from . import paths

EXEMPT_PASS = frozenset({"concluded", "problem", "blocked", "error", "lost"})
NORMAL_PASS = frozenset({"turn-ended", "done", "concluded", "blocked", "problem", "error",
                         "stale", "lost", "waiting", "ended"})
HELD_WHILE_PAUSED = frozenset({"idle", "stale"})
KEEPS_PAUSE = frozenset({"idle", "stale", "paused"})     # other kinds end a human wait
UNKNOWN, NORMAL, EXEMPT = 0, 1, 2
_CHUNK = 1 << 18

# Per-session slots (a list, for speed): class, meta identity, chunk checked,
# last kind seen, paused.
_CLS, _KEY, _GEN, _LAST, _PAUSED = range(5)


class Filter:
    """feed(bytes) -> bytes to print; finish() -> bytes for a last partial line."""

    def __init__(self, crew, normal_pass=NORMAL_PASS, exempt_pass=EXEMPT_PASS, warn=None):
        self.sessions_dir = crew.sub(paths.SESSIONS) if crew is not None else None
        self.normal = frozenset(k.encode() for k in normal_pass)
        self.exempt = frozenset(k.encode() for k in exempt_pass)
        self.warn = warn or _warn
        self.state = {}
        self.gen = 0
        self.carry = b""
        self.bad = 0
        self._kinds = {}        # kind word as read -> kind, or None if not a kind

    def feed(self, data):
        data = self.carry + data
        lines = data.split(b"\n")
        self.carry = lines.pop()
        return self._lines(lines)

    def finish(self):
        """The input ended: a last line without a newline is still judged."""
        if not self.carry:
            return b""
        line, self.carry = self.carry, b""
        return self._lines([line])

    def _lines(self, lines):
        self.gen += 1
        gen = self.gen
        out = []
        keep = out.append
        state = self.state
        kinds = self._kinds
        normal, exempt = self.normal, self.exempt
        for line in lines:
            parts = line.split(b" ", 3)
            n = len(parts)
            if n < 3 or len(parts[0]) != 24:
                self._bad(line, keep)
                continue
            kind = kinds.get(parts[2] if n == 3 else parts[2] + b"+")
            if kind is None:
                kind = self._kind(parts[2], n == 4)
                if kind is None:
                    self._bad(line, keep)
                    continue
            st = state.get(parts[1])
            if st is None or st[_GEN] != gen or kind == b"registered":
                st = self._refresh(parts[1], st, gen)
                if st is None:
                    self._bad(line, keep)
                    continue
            cls = st[_CLS]
            if cls == EXEMPT:
                ok = kind in exempt and kind != st[_LAST]
            elif cls == NORMAL:
                if kind == b"paused":
                    st[_PAUSED] = True
                elif st[_PAUSED] and kind not in KEEPS_PAUSE_B:
                    st[_PAUSED] = False
                ok = (kind in normal and kind != st[_LAST]
                      and not (st[_PAUSED] and kind in HELD_WHILE_PAUSED_B))
            else:
                ok = True
            st[_LAST] = kind
            if ok:
                keep(line)
        if not out:
            return b""
        out.append(b"")
        return b"\n".join(out)

    def _kind(self, word, has_text):
        """Validate a kind word once; cache the answer (None: not a kind)."""
        from .records import KIND_RE, MAX_KIND
        kind = word
        if has_text:
            if not word.endswith(b":"):
                return None
            kind = word[:-1]
        try:
            ok = bool(KIND_RE.match(kind.decode("ascii"))) and len(kind) <= MAX_KIND
        except UnicodeDecodeError:
            ok = False
        if not ok:
            return None
        self._kinds[word if not has_text else word + b"+"] = kind
        return kind

    def _refresh(self, name, st, gen):
        """The session's slots, its class re-read if its meta file changed."""
        if st is None:
            try:
                text = name.decode("utf-8")
                from .names import check_name
                check_name(text)
            except Exception:
                return None
            st = [UNKNOWN, None, gen, None, False]
            self.state[name] = st
        st[_GEN] = gen
        if self.sessions_dir is None:
            return st
        meta = os.path.join(self.sessions_dir, name.decode("utf-8"), paths.META)
        try:
            s = os.stat(meta, follow_symlinks=False)
            key = (s.st_ino, s.st_mtime_ns, s.st_size)
        except OSError:
            key = None
        if key == st[_KEY] and st[_KEY] is not None:
            return st
        st[_KEY] = key
        st[_CLS] = UNKNOWN if key is None else _class_of(meta)
        return st

    def _bad(self, line, keep):
        self.bad += 1
        if self.bad <= 100:
            self.warn(f"not an event line, passed on unchanged: {line[:80]!r}")
        elif self.bad == 101:
            self.warn("more lines that are not events; no further warnings")
        keep(line)


KEEPS_PAUSE_B = frozenset(k.encode() for k in KEEPS_PAUSE)
HELD_WHILE_PAUSED_B = frozenset(k.encode() for k in HELD_WHILE_PAUSED)


def _class_of(meta_path):
    import json
    from .atomic import read_text
    try:
        meta = json.loads(read_text(meta_path) or "null")
    except Exception:
        return UNKNOWN
    if not isinstance(meta, dict):
        return UNKNOWN
    return EXEMPT if meta.get("exempt") else NORMAL


def filter_stream(flt, fd_in=0, fd_out=1):
    """Run *flt* from fd_in to fd_out: one write per chunk read, before the next read."""
    from .atomic import write_all
    while True:
        data = os.read(fd_in, _CHUNK)
        if not data:
            break
        out = flt.feed(data)
        if out:
            write_all(fd_out, out)
    out = flt.finish()
    if out:
        write_all(fd_out, out)


def _warn(msg):
    import sys
    sys.stderr.write(f"wake-filter: {msg}\n")
    sys.stderr.flush()
