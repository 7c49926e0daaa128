"""Claude Code's own registry of running sessions, read only: one file per agent
process, `$CLAUDE_CONFIG_DIR/sessions/PID.json` (default `~/.claude/sessions/`).
Its keys, its life and why it may only withhold: docs/files/agent-registry.md
(read from the files 2.1.197 and 2.1.332 wrote; tests/test_registry_e2e.py).
"""
import os

from crewfile.core.errors import CrewfileError
from crewfile.core.jsonio import loads
from crewfile.core.paths import read_text
from crewfile.core.text import ascii_int

MAX_BYTES = 64 * 1024          # a few hundred bytes seen; anything this big is not one
# Claude Code rewrites its file in place as its status changes (2.1.197 seen:
# a reader found it empty), so a read that finds no whole JSON object is made
# again, at once, this many times in all before the entry is unreadable.
READS = 3


class Unreadable(Exception):
    """A registry file there, but not an entry crewfile can read: str() says why."""


class Entry:
    """One registry file's facts (None where a field is absent)."""
    __slots__ = ("path", "pid", "start", "session_id", "cwd", "kind", "job_id", "pane", "window")

    def __init__(self, path, obj):
        self.path = path
        self.pid = _int(obj.get("pid"))
        self.start = _int(obj.get("procStart"))
        self.session_id = _str(obj.get("sessionId"))
        self.cwd = _str(obj.get("cwd"))
        self.kind = _str(obj.get("kind"))
        self.job_id = _str(obj.get("jobId"))
        self.window, self.pane = _pane_of(_str(obj.get("tmux")) or "")

    @property
    def background(self):
        """A background session (`claude --bg`): no pane, the daemon's pty."""
        return self.kind == "bg" or self.job_id is not None


def _int(v):
    if isinstance(v, str):
        return ascii_int(v)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _str(v):
    return v if isinstance(v, str) and v else None


def _pane_of(tmux):
    """(window id, pane id) of `SESSION:@W.%P`, else (None, None)."""
    head, _, pane = tmux.rpartition(".")
    window = head.rpartition(":")[2]
    if not pane.startswith("%") or not pane[1:].isdigit():
        return None, None
    return (window if window.startswith("@") else None), pane


def directory(env=None):
    """The registry directory for the environment *env* (default: ours), or None."""
    env = os.environ if env is None else env
    base = env.get("CLAUDE_CONFIG_DIR")
    if not base:
        home = env.get("HOME")
        if not home:
            return None
        base = os.path.join(home, ".claude")
    return os.path.join(os.path.abspath(base), "sessions")


def read(pid, where):
    """The Entry of process *pid* in the registry directory *where*, or None
    if it has none. Unreadable if its file is a link, not a regular file,
    too big, not a JSON object (READS times), or names another pid."""
    if not where:
        return None
    path = os.path.join(where, f"{int(pid)}.json")
    for _ in range(READS):
        try:
            # The one bounded reader of a regular file (no link followed, not a FIFO).
            text = read_text(path, limit=MAX_BYTES)
        except CrewfileError as e:
            raise Unreadable(str(e)) from None
        if text is None:
            return None
        try:
            obj = loads(text)
        except ValueError:
            why = "not JSON"
            continue            # read it again: perhaps caught in the middle of a rewrite
        if isinstance(obj, dict):
            break
        why = "not a JSON object"
    else:
        raise Unreadable(f"{path}: {why}")
    entry = Entry(path, obj)
    if entry.pid != int(pid):
        raise Unreadable(f"{path}: names pid {obj.get('pid')!r}, not {pid}")
    return entry


def entries(where):
    """Every readable Entry in *where* (none if it is missing), by pid."""
    try:
        names = os.listdir(where) if where else []
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = []
    for name in names:
        stem, dot, ext = name.partition(".")
        if ext != "json" or not stem.isdigit():
            continue
        try:
            entry = read(int(stem), where)
        except Unreadable:
            continue
        if entry is not None:
            found.append(entry)
    return sorted(found, key=lambda e: e.pid)


def disagreement(entry, pid, start, session_id=None, pane=None):
    """What the registry *entry* for agent process *pid* says against
    crewfile's own facts (the process's start time from /proc, the
    conversation and the pane crewfile recorded), or None when it agrees.
    Facts missing on either side are not compared."""
    if entry.start is not None and entry.start != start:
        return (f"the agent registry's entry {entry.path} names process {pid} started at"
                f" {entry.start}, not the agent started at {start}")
    if session_id and entry.session_id and entry.session_id != session_id:
        return (f"the agent registry says process {pid} holds conversation"
                f" {entry.session_id}, not {session_id}")
    if pane and entry.pane and entry.pane != pane:
        return f"the agent registry says process {pid} runs in pane {entry.pane}, not {pane}"
    return None
