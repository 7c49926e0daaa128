"""The agent hook's shared core: an agent's hook events (and Codex's notify)
become crewfile records, captain inputs and model-facing notices
(docs/commands/crew-hook.md). Actions are named after Claude Code's events;
each agent's adapter (crewfile.agents) maps its events onto them and spells
the replies. Every reply is exit 0, blocking done in the agent's JSON, so no
exit code ever blocks by accident: a hook must never harm its agent.

The import path is kept tiny (the json package and re cost more than the
whole start-up budget): the captain module is imported only when a prompt
arrives, re only when a Bash command names a captain-only word.
"""
import os
import time

from crewfile.agents import load, stop_record
from crewfile.core import jsonio, locks
from crewfile.core.errors import CrewfileError, Refused
from crewfile.core.kinds import TURN_STATE
from crewfile.core.liveness import alive
from crewfile.core.locks import LockBusy
from crewfile.core.paths import OFFERED, Crew, default_dir
from crewfile.core.records import new_line
from crewfile.core.text import escape
from crewfile.session import sessions
from crewfile.wake import inbox
from crewfile.wake.words import WAKE_HEADER

# captain.CONCLUDE_COMMAND and evidence.CAPTAIN_DONE, not imported on this
# path. Denying them is a courtesy: the rule is the readers' (kinds.GUARDED).
CAPTAIN_ONLY_WORDS = ("aside-done", "captain-done")
# "no inbox-drain needed": a handed-over notice is in inbox.read already, and
# a model that drains anyway spends a request resending its whole
# conversation for nothing (the soak: a fifth of the primary's requests;
# tests/soak/levers.py).
NOTICE_HEADER = ("crewfile notices (machine reports from the crew's tools;"
                 " not written by the user; handed over here, no inbox-drain needed for them):")
PRIMARY = "primary"
HOOK_LOCK_WAIT = 1.0     # seconds; protocol.md, "Bounded waits"
# Codex (0.171) runs the session's hooks for its subagents too, with the
# parent's session_id and the subagent's agent_id: work inside the session.
SUBAGENT_TURN = ("UserPromptSubmit", "Stop", "SessionStart", "SessionEnd")
MAX_TASKS_NAMED = 3
# Claude Code hands additionalContext inline up to this many characters, then
# saves it to a file and shows the model a 2 KB preview (2.1.x, measured:
# tests/test_claude_wakes_e2e.py). Counted in UTF-8 bytes, never fewer.
INLINE_LIMIT = 10000
SHOWN_SENDERS = 5
RULE_HEADING = "## The rule for the aside's agent\n"
MAX_PAYLOAD = 32 << 20      # bytes of one hook payload kept; protocol.md, crew-hook
DEFAULT_AGENT = "claude"
load_agent = load      # the adapter module for agent NAME (BadInput if there is none)


class Reply:
    __slots__ = ("code", "out", "err")

    def __init__(self, out="", err="", code=0):
        self.code, self.out, self.err = code, out, err


def json_reply(obj):
    return Reply(jsonio.dumps(obj) + "\n")


class NoSession(Exception):
    """The event needs a crewfile session and names none: said, nothing written."""


class Context:
    """One hook call: the crew, the environment, the payload, the session."""

    def __init__(self, crew, env, payload, agent, event):
        self.crew, self.env, self.payload = crew, env, payload
        self.agent, self.event = agent, event      # the adapter module, its event's name
        self.notes = []          # stderr lines: said, never fatal
        self._session = False    # not looked up yet

    def field(self, key, kind=str):
        value = self.payload.get(key)
        return value if isinstance(value, kind) else None

    @property
    def session(self):
        """The agent's crewfile session (find_session), looked up once."""
        if self._session is False:
            self._session = find_session(self.crew, self.env, self.payload)
        return self._session

    def known_session(self):
        """The session, for an event that needs one (NoSession if there is none)."""
        if self.session is None:
            raise NoSession
        return self.session


def find_session(crew, env, payload):
    """$CREWFILE_SESSION (registered from the payload if unknown), else the
    session whose metadata has the payload's agent session id, else None."""
    sid = payload.get("session_id") or payload.get("thread-id")
    sid = sid if isinstance(sid, str) and sid else None
    name = env.get("CREWFILE_SESSION")
    if name:
        sess = sessions.Session(crew, name)      # BadInput for a bad name
        if sess.exists():
            return sess
        cwd, path = payload.get("cwd"), payload.get("transcript_path")
        try:
            return sessions.register(
                crew, name, kind="crew", cwd=cwd if isinstance(cwd, str) and cwd else None,
                tmux=env.get("TMUX_PANE") or None, agent_session_id=sid,
                extra={"transcript_path": path} if isinstance(path, str) and path else None,
                env=sessions.tmux_env(env), agent_from=os.getpid())
        except Refused:
            if sess.exists():    # a parallel hook registered it first
                return sess
            raise                # (one pane, one session): said on each event
    if not sid or not os.path.isdir(crew.root):
        return None
    return sessions.find(crew, agent_session_id=sid)


def repair_agent(ctx, sess):
    """Record, or repair, the agent process and its pane (with the pane's
    server); tmux is not asked while the recorded agent is alive, this hook's
    ancestor and in this pane. A pane holding no ancestor of the hook is not
    recorded: Codex runs its hooks in a daemon that keeps the environment of
    the Codex that started it, so after a respawn $TMUX_PANE names a dead pane.
    A turn goes on whether or not this works."""
    pane = ctx.env.get("TMUX_PANE")
    try:
        meta = sess.meta
        if not pane or not ctx.env.get("TMUX") or meta.get("kind") == "aside":
            return
        if (sess.recorded_agent(ancestor_of=os.getpid())[2] and meta.get("tmux") == pane
                and meta.get("tmux_socket") and meta.get("tmux_server")):
            return
        fields = sessions.pane_fields(pane, sessions.tmux_env(ctx.env), agent_from=os.getpid())
        if fields.get("pid") is None:
            ctx.notes.append(f"{sess.name}: the agent process was not found among the hook's"
                             f" ancestors in pane {pane}: its pane is left as recorded")
            return
        if ((meta.get("pid"), meta.get("pid_start")) == (fields["pid"], fields["pid_start"])
                and meta.get("pid_started_at")):
            fields.pop("pid_started_at")     # the same process: the time kept stays
        changed = {k: v for k, v in fields.items() if meta.get(k) != v}
        if changed:
            sess.update_meta(**changed)
    except CrewfileError as e:
        ctx.notes.append(f"{sess.name}: agent not recorded: {e}")


# ---------------------------------------------------------------- notices

def notice_line(n):
    """One notice, led by its kind unless its text already says it (`job j-1 ...`)."""
    text = n.text if n.text.startswith(n.kind + " ") else f"{n.kind} {n.text}"
    return f"crewfile notice: {text} (posted {n.ts}, id {n.id})"


def _group_key(n):
    """(who, kind): a wake's session and event kind; for other notices their kind."""
    if n.kind == "wake":
        parts = n.text.split(" ", 3)
        if len(parts) >= 3:
            return parts[1], parts[2].rstrip(":")
    return n.kind, ""


def rest_line(rest):
    who = list(dict.fromkeys(_group_key(n)[0] for n in rest))
    shown = ", ".join(who[:SHOWN_SENDERS])
    if len(who) > SHOWN_SENDERS:
        shown += f" and {len(who) - SHOWN_SENDERS} more"
    return (f"crewfile: {len(rest)} more notice{'s' if len(rest) != 1 else ''} wait in the inbox"
            f" (from {shown}); they follow at the next prompt or tool call, oldest first.")


def inline_count(header, notices):
    """How many of the oldest *notices* fit within INLINE_LIMIT with the
    header and the rest's line (at least one: cut by inline_text if too long
    alone)."""
    size = len(header.encode()) + 1
    for k, notice in enumerate(notices):
        size += len(notice_line(notice).encode()) + 1
        rest = notices[k + 1:]
        if size + (len(rest_line(rest).encode()) + 1 if rest else 0) > INLINE_LIMIT:
            return max(k, 1)
    return max(len(notices), 1)


def inline_text(header, taken, rest):
    """The notices taken, one line each under *header*, grouped by session and
    kind (each group where it first appears), then one line for the *rest*;
    within INLINE_LIMIT (a single notice too long is cut here)."""
    groups = {}
    for n in taken:
        groups.setdefault(_group_key(n), []).append(notice_line(n))
    text = "\n".join([header] + [line for group in groups.values() for line in group]
                     + ([rest_line(rest)] if rest else []))
    if len(text.encode()) > INLINE_LIMIT:
        note = " [cut here: too long to show inline; inbox.read keeps it whole]"
        text = text.encode()[:INLINE_LIMIT - len(note.encode())].decode("utf-8", "ignore") + note
    return text


def drain(ctx, sess, header=NOTICE_HEADER, busy="notices left in the inbox for the next event"):
    """The pending notices that fit inline under *header*, drained ('' if none)."""
    def taker():
        """The agent life taking the hand-over, as (pid, start, transcript): the
        recorded agent only if alive (a dead one would have every notice put
        back at once)."""
        pid, start, live = sess.recorded_agent()
        transcript = ctx.field("transcript_path") or sess.meta.get("transcript_path")
        transcript = transcript if isinstance(transcript, str) else None
        return (pid, start, transcript) if live else (None, None, transcript)
    try:
        notices, rest, garbage = inbox.drain_part(
            ctx.crew, sess.name, lambda pending: inline_count(header, pending), taker)
    except LockBusy as e:
        ctx.notes.append(f"{sess.name}: {busy}: {e}")
        return ""
    if garbage:
        ctx.notes.append(f"{sess.name}: skipped {garbage} malformed inbox line(s)")
    return inline_text(header, notices, rest) if notices else ""


def notices_reply(ctx, sess):
    """The pending notices as the agent's model-facing context (nothing if none)."""
    text = drain(ctx, sess)
    return json_reply(ctx.agent.context(ctx.event, text)) if text else Reply()


def settle_offered(ctx, sess):
    """Notices handed over and not yet confirmed (inbox.settle): this event
    shows the life that took them went on, unless it is gone or this is a new
    agent's SessionStart."""
    def went_on(pid, start):
        if pid is None:         # no agent recorded: only a new start is a new life
            return ctx.agent.EVENTS.get(ctx.event) != "SessionStart"
        return alive(pid, start)
    try:
        back = inbox.settle(ctx.crew, sess.name, went_on)
    except CrewfileError as e:       # LockBusy too: the next event settles them
        ctx.notes.append(f"{sess.name}: offered notices not settled: {e}")
        return
    if back:
        ctx.notes.append(f"{sess.name}: {back} notice(s) handed to an agent that is gone"
                         " put back in the inbox")


# ---------------------------------------------------------------- events

def session_start(ctx):
    sess = ctx.known_session()
    settle_offered(ctx, sess)
    source = ctx.field("source")
    aside = sess.meta.get("kind") == "aside"
    if source and source == getattr(ctx.agent, "COMPACTED", None):
        # The conversation was compacted, mid-turn too: the same life, its
        # turn going on, so a record no turn-state table reads.
        sess.append("compacted", "")
    else:
        if not aside and not sess.ended():
            pid, _, live = sess.recorded_agent()
            if pid is not None and not live:   # it crashed: no SessionEnd ran
                sess.append("ended", "agent process gone")
        if not aside and sess.ended():
            # A new life for an ended crew session or primary whose agent starts
            # again in its name (/exit, then claude again), in the hook's pane.
            sess = sessions.register_again(sess, tmux=ctx.env.get("TMUX_PANE") or None,
                                           env=sessions.tmux_env(ctx.env), agent_from=os.getpid())
        repair_agent(ctx, sess)
        cwd, sid = ctx.field("cwd"), ctx.field("session_id") or None
        transcript = ctx.field("transcript_path") or None
        if (getattr(ctx.agent, "RESUME_WRITES_ITS_TRANSCRIPT", False) and source == "resume"
                and sid and sid == sess.meta.get("agent_session_id")
                and sess.meta.get("transcript_path")):
            transcript = sess.meta["transcript_path"]     # the conversation's, not the one named
        sess.update_meta(agent_session_id=sid, cwd=os.path.realpath(cwd) if cwd else None,
                         transcript_path=transcript,
                         agent=None if sess.meta.get("agent") else ctx.agent.NAME)
        sess.append("started", source or "")
    if aside:       # its briefing at every start, a compaction's too (the summary may drop it)
        return json_reply(ctx.agent.context(ctx.event, aside_briefing(sess, ctx.agent)))
    return Reply()


def aside_briefing(sess, agent):
    """What an aside's agent is told at start: which aside, and the conclusion
    rule from the /aside skill's text (its one source), spelled for *agent*."""
    from crewfile.agents import claude  # the hook's budget: asides only
    from crewfile.agents.install import shipped  # the hook's budget
    rule = shipped(claude, claude.FILES[0]).partition(RULE_HEADING)[2].strip()
    rule = rule.replace(f"`{claude.CONCLUDE}`", f"`{agent.CONCLUDE}`")
    topic = sess.meta.get("topic")
    head = f"crewfile: this session is the aside {sess.name!r}"
    head += f" on the topic: {topic}." if topic else "."
    return head + "\n\n" + rule


def user_prompt_submit(ctx):
    sess = ctx.known_session()
    prompt = ctx.field("prompt")
    if prompt is not None and prompt.startswith(getattr(ctx.agent, "MACHINE_PROMPTS", ())):
        prompt = None            # the CLI's own notification: nobody's words
    if prompt is not None:
        prompt = ctx.agent.captain_text(prompt)
    settle_offered(ctx, sess)
    audit(ctx, sess)
    if prompt is not None:
        try:
            from crewfile.asides.captain import record_captain_input  # the hook's budget
        except ImportError as e:  # a broken install: a plain record (never a conclusion), said
            ctx.notes.append(f"{sess.name}: captain input recorded plain: {e}")
            record_captain_input = _plain_captain_record
        try:
            record_captain_input(ctx.crew, sess.name, prompt,
                                 ctx.field(ctx.agent.PROMPT_ID) if ctx.agent.PROMPT_ID else None,
                                 ctx.field("transcript_path"), ctx.agent)
        except CrewfileError as e:   # recorded or not, the turn goes on
            ctx.notes.append(f"{sess.name}: captain input not recorded: {e}")
    sess.append("turn-started")
    repair_agent(ctx, sess)
    return notices_reply(ctx, sess)


def _plain_captain_record(crew, name, text, *_evidence):
    sessions.Session(crew, name).append("captain", text)


def audit(ctx, sess):
    """Guarded records appended since the turn began without their evidence
    (kinds.GUARDED) become `problem` records now. Cheap when there is none:
    the walk back ends at the turn's start."""
    try:
        from crewfile.asides.evidence import unjudged  # the hook's budget
        claims = []
        if unjudged(sess, claims):
            from crewfile.asides.aside import audit as audit_acts  # the hook's budget
            audit_acts(sess)
        if claims:
            from crewfile.asides.aside import audit_claims  # the hook's budget
            audit_claims(sess, claims)
    except CrewfileError as e:
        ctx.notes.append(f"{sess.name}: captain acts not audited: {e}")


def names_captain_only(command):
    """*command* has a CAPTAIN_ONLY_WORDS word (bin/aside-done counts;
    my-aside-done-list does not)."""
    if not any(w in command for w in CAPTAIN_ONLY_WORDS):
        return False
    import re  # the hook's budget (module docstring)
    words = "|".join(map(re.escape, CAPTAIN_ONLY_WORDS))
    return re.search(rf"(?<![\w-])(?:{words})(?![\w-])", command) is not None


def pre_tool_use(ctx):
    # Settles offered notices, past one stat, only for a named session: this
    # event never looks its session up otherwise (a bad name is said elsewhere).
    name = ctx.env.get("CREWFILE_SESSION")
    try:
        offered = bool(name) and os.path.lexists(ctx.crew.session_file(name, OFFERED))
    except CrewfileError:
        offered = False
    if offered and ctx.session is not None:
        settle_offered(ctx, ctx.session)
    command = (ctx.field("tool_input", dict) or {}).get("command")
    if (ctx.field("tool_name") not in ctx.agent.SHELL_TOOLS or not isinstance(command, str)
            or not names_captain_only(command)):
        return Reply()
    done = ctx.agent.CONCLUDE
    reason = (f"crewfile: concluding an aside is the captain's act only: the captain types "
              f"{done} in this window. This command was not run. Keep the "
              f"conversation going; hand over the report with aside-conclude only after "
              f"the captain's {done}.")
    try:                         # the denial stands even if it cannot be recorded
        if ctx.session is not None:
            ctx.session.append("problem", f"self-conclusion refused: the agent ran"
                                          f" {command[:200]!r}; denied")
    except Exception as e:
        ctx.notes.append(f"denial not recorded: {e}")
    return json_reply(ctx.agent.deny(ctx.event, reason))


def post_tool_use(ctx):
    sess = ctx.session
    if sess is None:
        return Reply()
    settle_offered(ctx, sess)
    audit(ctx, sess)
    # A tool ran, so no permission dialog is up any more: a `waiting` record
    # would keep saying so until the turn ends.
    last = sess.last_of(TURN_STATE)
    if last is not None and last.kind == "waiting":
        sess.append("turn-started", "permission answered")
    if from_subagent(ctx.payload):
        return Reply()           # notices are the session's model's, not a subagent's
    return notices_reply(ctx, sess)


def stop(ctx):
    """turn-ended; a primary with pending wakes continues instead (never twice in a row)."""
    sess = ctx.known_session()
    settle_offered(ctx, sess)
    audit(ctx, sess)
    # Pending wakes first: reading meta costs a JSON parse that most Stops never need.
    if (ctx.payload.get("stop_hook_active") is not True
            and inbox.has(ctx.crew, sess.name, "wake")
            and sess.meta.get("kind") == PRIMARY):
        text = drain(ctx, sess, WAKE_HEADER, "wakes left in the inbox")
        if text:         # each agent's own way of going on (adapters: carry_on)
            return json_reply(ctx.agent.carry_on(ctx.event, text))
    tasks = background_tasks(ctx.payload.get("background_tasks"))
    lines = [new_line("background", tasks) if tasks else new_line("turn-ended")]
    crons = session_crons(ctx.payload.get("session_crons"))
    if crons:
        # After the turn's record, in the same write: the newest of
        # kinds.NATIVE_STATE is then this Stop's word on the session's own loop.
        lines.append(new_line("crons", crons))
    sess.append_lines(lines)
    return Reply()


def session_crons(crons):
    """'N crons (ID SCHEDULE: PROMPT; ...)' for a Stop's `session_crons`, or ''."""
    def each(c):
        once = "" if c.get("recurring") else " once"
        return (f"{str(c.get('id') or '?')[:16]} {str(c.get('schedule') or '?')[:40]}{once}:"
                f" {str(c.get('prompt') or '')[:60]}")
    n, named = _listed(crons, each)
    return f"{n} cron{'s' if n != 1 else ''} ({named})" if n else ""


def background_tasks(tasks):
    """'turn ended, N background tasks running (...)' for a Stop's
    `background_tasks` (the CLI lists only work in flight), or ''."""
    def each(t):
        what = t.get("command") or t.get("description") or t.get("id") or "?"
        return f"{t.get('type') or 'task'}: {str(what)[:80]}"
    n, named = _listed(tasks, each)
    s = "s" if n != 1 else ""
    return f"turn ended, {n} background task{s} running ({named})" if n else ""


def _listed(items, each):
    """(how many dicts *items* holds, the first few named by *each*)."""
    items = [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []
    more = "; ..." if len(items) > MAX_TASKS_NAMED else ""
    return len(items), "; ".join(each(i) for i in items[:MAX_TASKS_NAMED]) + more


def stop_failure(ctx):
    """The turn ended in an API error (no Stop follows): `turn-failed`, or the
    account's stop, `account-blocked`, which holds crewfile's typing."""
    sess = ctx.known_session()
    settle_offered(ctx, sess)
    message = ctx.field("last_assistant_message") or ctx.field("error_details") or ""
    now = time.time()       # the hold counts from the record's own timestamp
    sess.append(*stop_record(ctx.agent, ctx.field("error"), message, ctx.env, now), now=now)
    return Reply()


def inside(ctx):
    """Work inside the session (a subagent, a teammate, a task): a `subagent`
    record, which ends no turn and wakes nobody (kinds.INSIDE)."""
    sess = ctx.session
    if sess is None:
        return Reply()           # not the session's own event: nothing to say
    p = ctx.payload
    if ctx.event in ("SubagentStop", "SubagentStart") or from_subagent(p):
        detail = f"{p.get('agent_type') or '?'} {p.get('agent_id') or '?'}"
    elif ctx.event == "TeammateIdle":
        detail = f"{p.get('teammate_name') or '?'}"
    else:
        detail = f"{p.get('task_id') or '?'}: {p.get('task_subject') or ''}"
    sess.append("subagent", f"{ctx.event} {detail}"[:500])
    return Reply()


def from_subagent(payload):
    """The payload is a subagent's (it names the subagent: agent_id)."""
    agent_id = payload.get("agent_id")
    return isinstance(agent_id, str) and agent_id != ""


def notification(ctx):
    """A notification type the agent names (NOTIFICATIONS), or a permission
    asked before a tool runs (Codex's PermissionRequest: no decision is given,
    the person at the screen answers): its record."""
    if ctx.agent.EVENTS.get(ctx.event) == "PermissionRequest":
        what = ("waiting", "permission")
    else:
        what = ctx.agent.NOTIFICATIONS.get(ctx.field("notification_type"))
        if what is None:
            return Reply()
    sess = ctx.known_session()
    sess.append(*what)
    repair_agent(ctx, sess)
    return Reply()


def session_end(ctx):
    sess = ctx.known_session()
    if sess.recorded_agent()[2] and not sess.recorded_agent(ancestor_of=os.getpid())[2]:
        # An old agent's end, the registered one being another and alive:
        # its `ended` would never be believed and hold every delivery.
        ctx.notes.append(f"{sess.name}: an earlier agent's SessionEnd, not recorded:"
                         " the session's registered agent is another, alive")
        return Reply()
    sess.append("ended", ctx.field("reason") or "unknown")
    return Reply()


def codex_notify(ctx):
    """Codex CLI's notify program: agent-turn-complete -> turn-ended."""
    if ctx.field("type") == "agent-turn-complete":
        ctx.known_session().append("turn-ended")
    return Reply()


EVENTS = {
    "SessionStart": session_start,
    "UserPromptSubmit": user_prompt_submit,
    "PreToolUse": pre_tool_use,
    "PostToolUse": post_tool_use,
    "Stop": stop,
    "StopFailure": stop_failure,
    "Inside": inside,
    "Notification": notification,
    "PermissionRequest": notification,
    "SessionEnd": session_end,
}


# ---------------------------------------------------------------- entry

def read_payload(stream, limit=MAX_PAYLOAD):
    """The payload on *stream*, or None when it is over *limit* bytes (the
    rest read and dropped, so the agent's write never meets a closed pipe)."""
    data = stream.read(limit + 1)
    if len(data) <= limit:
        return data
    while stream.read(1 << 16):
        pass
    return None


def handle(raw, env=None, crew=None, codex=False, agent=DEFAULT_AGENT):
    """Run the hook of *agent* (an adapter's name) for one payload; always a
    Reply, exit 0, every lock wait bounded by HOOK_LOCK_WAIT seconds in all.
    *codex*: the payload is Codex's notify JSON."""
    env = os.environ if env is None else env
    event, ctx = "?", None
    bound = locks.bound_waits(HOOK_LOCK_WAIT, total=True)
    try:
        if raw is None:
            return Reply(err=f"malformed payload: over {MAX_PAYLOAD} bytes, ignored")
        try:
            payload = jsonio.loads(raw)
        except (ValueError, TypeError):
            return Reply(err="malformed payload: not JSON")
        if not isinstance(payload, dict):
            return Reply(err="malformed payload: not a JSON object")
        adapter = load_agent(agent)
        if codex:
            event, fn = "notify", codex_notify
        else:
            event = payload.get("hook_event_name")
            action = adapter.EVENTS.get(event) if isinstance(event, str) else None
            if action in SUBAGENT_TURN and from_subagent(payload):
                action = "Inside"
            fn = EVENTS.get(action)
            if fn is None:       # an event we do not use: nothing to do
                return Reply()
        ctx = Context(crew or Crew(default_dir(env)), env, payload, adapter, event)
        reply = fn(ctx)
    except NoSession:
        reply = Reply()
        ctx.notes.append(f"no crewfile session for agent session {ctx.field('session_id') or '?'}"
                         " (set CREWFILE_SESSION, or session-add --agent-session-id)")
    except CrewfileError as e:
        reply = Reply(err=f"{event}: {e}")
    except Exception as e:       # a bug of ours must not become the agent's problem
        reply = Reply(err=f"{event}: internal error: {type(e).__name__}: {e}")
    finally:
        locks.restore_waits(bound)
    notes = list(dict.fromkeys((ctx.notes if ctx else []) + locks.take_notes()))   # each once
    if notes:
        reply.err = "; ".join(([reply.err] if reply.err else []) + notes)
    reply.err = escape(reply.err)       # one line, no control character (a process's name)
    reply.code = 0
    return reply
