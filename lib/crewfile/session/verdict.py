"""What a session is now: the one answer every command asks for.

The rules are protocol.md's, Derived state (the agent CLI's registry, which
may only withhold: docs/files/agent-registry.md). A live pane is not a live
conversation. A fact that cannot be had is UNKNOWN, never NO, and unknown is
refused like busy. Reasons are Answer(code, detail): the code to decide by,
the detail for people; nothing parses the detail. The probes beyond the
verdict live where their imports do: the captain check (prompt.captain_at,
a pane's screen and keys) and the session's own loop (ownloop, the agent's
own schedules), so crew-status, which loads this, loads neither.
"""
import os
import time

from crewfile.agents import adapter_of
from crewfile.core import liveness as procs
from crewfile.core.errors import BadInput
from crewfile.core.kinds import ACCOUNT_STATE, LIFECYCLE, TURN_STATE
from crewfile.core.liveness import started_at
from crewfile.core.records import is_timestamp, parse_timestamp

# liveness
LIVE, NOT_LIVE, UNKNOWN = "live", "not-live", "unknown"
# yes/no facts (UNKNOWN as above when the fact cannot be had)
YES, NO = "yes", "no"

# why a session is not LIVE
ENDED = "ended"                        # an `ended`/`closed` record
AGENT_GONE = "agent-gone"              # the recorded process is gone (or its pid reused)
SERVER_GONE = "server-gone"            # nothing answers on the recorded socket
SERVER_RESTARTED = "server-restarted"  # another server now answers on that socket
PANE_GONE = "pane-gone"                # no such pane, or it is dead
NOT_IN_PANE = "agent-not-in-pane"      # the pane's processes do not hold the agent
# why liveness is UNKNOWN
AGENT_UNKNOWN = "agent-unknown"        # no agent process recorded
SERVER_UNKNOWN = "server-unknown"      # a pane without its server's socket recorded
TMUX_UNKNOWN = "tmux-unknown"          # tmux missing or its answer unreadable
NOTHING = "no-pane-or-process"         # neither pane nor process
END_NOT_BELIEVED = "end-not-believed"  # an `ended`/`closed` record, but the agent is live
REGISTRY_DISAGREES = "registry-disagrees"  # the agent CLI's registry says otherwise
# why crewfile holds its typing on a live session
ACCOUNT_BLOCKED = "account-blocked"    # the account stopped its turn; the block stands
STARTING = "starting"                  # its process is newer than its newest `started`


class Answer:
    """A named code and a detail for people: str() is 'code: detail'."""
    __slots__ = ("code", "detail")

    def __init__(self, code, detail=""):
        self.code, self.detail = code, detail

    def __str__(self):
        return f"{self.code}: {self.detail}" if self.detail else self.code

    def __repr__(self):
        return f"Answer({self.code!r}, {self.detail!r})"

    def __eq__(self, other):
        if isinstance(other, Answer):
            return (self.code, self.detail) == (other.code, other.detail)
        return NotImplemented


class Look:
    """One look at the machine: each tmux server and its clients asked at most once.
    listed: a tmuxseen.Seen handed in (crew-status's --panes), used for the
    server it names only where a session records that socket and identity.
    registry: False leaves the agent CLI's registry unread (crew-status: it
    can only make a live session unknown, and the line's words are the same)."""

    def __init__(self, listed=None, registry=True):
        self._servers = {}
        self.clients = {}       # socket -> its tmux clients (prompt.last_key fills it)
        self._listed = listed
        self.registry = registry

    def server(self, socket, identity=None):
        listed = self._listed
        if listed is not None and identity and (listed.socket, listed.identity) == (socket, identity):
            return listed
        if socket not in self._servers:
            from crewfile.session.tmux import Server  # crew-status's budget (subprocess)
            self._servers[socket] = Server(socket)
        return self._servers[socket]


class Life:
    """The process-and-pane part of a verdict (no status log): see liveness()."""
    __slots__ = ("live", "why", "pane", "socket", "agent")

    def __init__(self, live, why=None, pane=None, socket=None, agent=None):
        self.live, self.why, self.pane, self.socket, self.agent = live, why, pane, socket, agent


def liveness(meta, look=None):
    """Life for the session whose metadata is *meta* (records not read)."""
    look = look or Look()
    pid, start = meta.get("pid"), meta.get("pid_start")
    agent = None
    if pid:
        agent = procs.stat(pid) if isinstance(pid, int) else None
        if agent is None or agent.gone:
            return Life(NOT_LIVE, Answer(AGENT_GONE, f"agent process {pid} is gone"))
        if start is not None and agent.start != start:
            return Life(NOT_LIVE, Answer(AGENT_GONE, f"agent process {pid} is gone"
                                                     " (its pid now names another process)"))
    pane_id = meta.get("tmux")
    if not pane_id:
        if agent is not None:
            return Life(LIVE, agent=agent)
        return Life(UNKNOWN, Answer(NOTHING, "neither a tmux pane nor an agent process is recorded"))
    socket = meta.get("tmux_socket")
    if not socket:
        return Life(UNKNOWN, Answer(SERVER_UNKNOWN, f"pane {pane_id} was registered without"
                                                    " its tmux server; register the session again"))
    want = meta.get("tmux_server")
    server = look.server(socket, want)
    if server.state == server.GONE:
        return Life(NOT_LIVE, Answer(SERVER_GONE, f"no tmux server on {socket}"))
    if server.state != server.UP:
        return Life(UNKNOWN, Answer(TMUX_UNKNOWN, server.error or "tmux could not be asked"))
    if want and server.identity and want != server.identity:
        return Life(NOT_LIVE, Answer(SERVER_RESTARTED, f"the tmux server on {socket} was"
                                                       f" restarted: {pane_id} is another pane"))
    pane = server.panes.get(pane_id)
    if pane is None or pane.dead:
        return Life(NOT_LIVE, Answer(PANE_GONE, f"tmux pane {pane_id} is gone"))
    if agent is None:
        return Life(UNKNOWN, Answer(AGENT_UNKNOWN, "no agent process recorded; record the"
                                    " agent: its next crew-hook event does, or session-add"
                                    " NAME --pid PID"), pane, socket)
    if pane.pid is None or not procs.descends_from(agent.pid, pane.pid):
        return Life(NOT_LIVE, Answer(NOT_IN_PANE, f"pane {pane_id} does not hold agent"
                                                  f" process {agent.pid}"))
    return Life(LIVE, None, pane, socket, agent)


class Verdict:
    """What a session is now (protocol.md, Derived state). why: an Answer when
    live is not LIVE; pane, socket: when a live pane holds the agent; account:
    an Answer while the block stands, account_until: when it lifts by itself
    (or None); end_record: the kind of an end record, believed or not;
    conversation: the agent's session id; tree: tree_of(cwd), resolved when
    asked (a path walk the status line, which never asks, does not make)."""
    __slots__ = ("live", "why", "pane", "socket", "generating", "dialog", "background",
                 "account", "account_until", "stopped",
                 "foreground", "ended", "end_record", "conversation", "cwd")

    @property
    def tree(self):
        return tree_of(self.cwd)


def of(sess, look=None, stats=None, recs=None, now=None, account=True):
    """The Verdict for *sess*, from its records (*recs*: a sess.scan() shared
    with the caller) and the machine. account=False: the account block not
    asked (account None), for a view that shows none: no read back through
    a log whose turns never ended, and its rotations, for it."""
    recs = recs or sess.scan(stats)
    meta = sess.meta
    v = Verdict()
    life = recs.last_of(LIFECYCLE)
    v.end_record = life.kind if life and LIFECYCLE[life.kind] else None
    turn = recs.last_of(TURN_STATE)
    v.generating = TURN_STATE[turn.kind] if turn else UNKNOWN
    v.dialog = YES if turn and turn.kind == "waiting" else NO
    v.background = YES if turn and turn.kind == "background" else NO
    block = recs.last_of(ACCOUNT_STATE) if account else None
    v.account = account_block(block, now)
    v.account_until = block_lifts(block) if v.account is not None else None
    v.conversation = meta.get("agent_session_id")
    v.cwd = meta.get("cwd")
    return _probe(v, meta, look)


def _block_fields(rec):
    """(error, TS or None, message) of an `account-blocked` record's text."""
    head, _, message = rec.text.partition(": ")
    words = head.split(" ")
    until = words[2] if len(words) == 3 and words[1] == "until" else "-"
    return words[0] or "unknown", until if is_timestamp(until) else None, message


def block_lifts(rec):
    """Epoch seconds the block *rec* lifts by itself, or None (no time lifts it)."""
    if rec is None or rec.kind != "account-blocked":
        return None
    until = _block_fields(rec)[1]
    return parse_timestamp(until) if until else None


def account_block(rec, now=None):
    """Answer(ACCOUNT_BLOCKED, ...) while the block *rec* (the newest record of
    kinds.ACCOUNT_STATE, or None) stands at epoch *now*, else None."""
    if rec is None or rec.kind != "account-blocked":
        return None
    error, until, message = _block_fields(rec)
    lifts = "until a turn succeeds"
    if until:
        now = time.time() if now is None else now
        if parse_timestamp(until) <= now:
            return None
        lifts = f"until {until}"
    said = f" ({message[:200]})" if message else ""
    return Answer(ACCOUNT_BLOCKED, f"the account stopped its turn: {error}{said}; crewfile"
                                   f" types nothing into it {lifts}")


def adapter(sess):
    """The session's agent adapter (crewfile.agents), or None for a name it does not know."""
    try:
        return adapter_of(sess.meta)
    except BadInput:
        return None


def _older_than_agent(sess, rec):
    """Is record *rec* older than the session's agent process (meta
    `pid_started_at`, the time kept when it was recorded; a meta written
    before it was kept: `pid_start` by the clocks now), so an earlier
    process's? False with no start recorded."""
    start, kept = sess.meta.get("pid_start"), sess.meta.get("pid_started_at")
    if not isinstance(start, int) or start < 0:
        return False
    return rec.time < (parse_timestamp(kept) if isinstance(kept, str) else started_at(start))


def still_starting(sess):
    """Has the session's agent process not run its SessionStart yet? No
    `started` record in the session's life, or only ones older than the
    process (meta `pid_start`): the records then are an earlier process's."""
    started = sess.newest_this_life(lambda rec: rec.kind == "started")
    return started is None or _older_than_agent(sess, started)


def not_yet_known(sess, recs=None):
    """Answer(STARTING, ...) while the session's agent process has not said
    which conversation it is, else None: its newest `started` (else
    `registered`, else turn record: what lies within the scan, *recs*: a
    sess.scan() shared with the caller) is older than the process (meta
    `pid_start`), so the turn records are an earlier process's (after a
    respawn) and cannot say it is idle. A registration newer than the
    process (a running agent registered by hand) holds no earlier process's
    records. Not held: an agent whose SessionStart comes only with its first
    prompt (START_WITH_FIRST_PROMPT: nothing else would start it; delivery
    presses Enter once and waits for that record). The adapter is asked
    last: the records alone let most sessions go (crew-status's budget)."""
    if not isinstance(sess.meta.get("pid_start"), int):
        return None
    recs = recs or sess.scan()
    mark = recs.last_of(("started", "registered")) or recs.last_of(TURN_STATE)
    if mark is None or not _older_than_agent(sess, mark):
        return None
    agent = adapter(sess)
    if (agent is None or "SessionStart" not in agent.EVENTS.values()
            or getattr(agent, "START_WITH_FIRST_PROMPT", False)):
        return None
    return Answer(STARTING, "its start hook has not recorded which conversation this is"
                            f" (no `started` record since agent process {sess.meta.get('pid')}"
                            " began)")


def relive(v, meta, look=None):
    """A copy of *v* with its process-and-pane part probed anew, records not
    read again (crew-top sees records through inotify, but no process exit)."""
    if v.ended:
        return v
    w = Verdict()
    for k in Verdict.__slots__:
        setattr(w, k, getattr(v, k))
    return _probe(w, meta, look)


def _probe(v, meta, look):
    """*v* with its process-and-pane part probed. Any process of the user can
    append `ended`: an end record is believed only while the probe does not
    find the agent live."""
    look = look or Look()
    found = liveness(meta, look)
    v.pane = v.socket = None
    v.stopped = v.foreground = UNKNOWN
    v.ended = bool(v.end_record) and found.live != LIVE
    if v.ended:
        v.live, v.why = NOT_LIVE, Answer(ENDED, f"the session has {v.end_record}")
        return v
    if v.end_record:
        v.generating = UNKNOWN          # the end record said `no`, and it is not believed
        v.live, v.why = UNKNOWN, Answer(END_NOT_BELIEVED, (
            f"its `{v.end_record}` record is not believed: its agent process {found.agent.pid}"
            f" is live" + (f" in pane {found.pane.id}" if found.pane else "")))
        return v
    if found.live == LIVE and look.registry:
        found = _cross_check(found, meta)
    v.live, v.why = found.live, found.why
    if found.live == LIVE:       # LIVE always has its agent
        v.pane = found.pane.id if found.pane else None
        v.socket = found.socket
        v.stopped = YES if found.agent.stopped else NO
        if found.pane is not None and found.pane.pid is not None:
            v.foreground = foreground(found.agent, found.pane.pid)
    return v


def _cross_check(found, meta):
    """*found* (LIVE), or UNKNOWN when the agent CLI's registry entry for its
    process disagrees (meta `agent_registry`, else this environment's registry)."""
    from crewfile.agents import registry  # the status line's budget: it reads no registry (Look(registry=False))
    where = meta.get("agent_registry") or registry.directory()
    pane = found.pane.id if found.pane else None
    try:
        entry = registry.read(found.agent.pid, where)
    except registry.Unreadable as e:
        return Life(UNKNOWN, Answer(REGISTRY_DISAGREES, f"the agent registry's entry cannot be"
                                                        f" read: {e}"))
    said = entry and registry.disagreement(entry, found.agent.pid, found.agent.start,
                                           meta.get("agent_session_id"), pane)
    return Life(UNKNOWN, Answer(REGISTRY_DISAGREES, said)) if said else found


def foreground(agent, pane_pid):
    """YES when the agent's process group is the foreground group of its pane's
    terminal. A pane's process that is the agent reuses liveness's Stat."""
    term = agent if pane_pid == agent.pid else procs.stat(pane_pid)
    if term is None or term.tpgid <= 0:
        return UNKNOWN
    return YES if term.tpgid == agent.pgrp else NO


def tree_of(cwd):
    """The working tree of a directory: its git top level, else itself, resolved; None if unknown."""
    if not cwd:
        return None
    path = probe = os.path.realpath(cwd)
    while not os.path.lexists(os.path.join(probe, ".git")):
        if probe == os.path.dirname(probe):
            return path
        probe = os.path.dirname(probe)
    return probe


def overlap(a, b):
    """One tree is the other or inside it."""
    a, b = a.rstrip("/") + "/", b.rstrip("/") + "/"
    return a.startswith(b) or b.startswith(a)
