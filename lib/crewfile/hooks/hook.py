"""The agent hook's shared core: an agent's hook events (and Codex's notify)
become crewfile records, captain inputs and model-facing notices.

The actions here are named after Claude Code's events; each agent's module
in crewfile.agents maps its own events onto them and spells the replies
(context, a denial, a turn carried on) in its own format. Only the adapter
of the agent crew-hook runs for is imported.

A hook waits for locks HOOK_LOCK_WAIT seconds at most in all: a record for
a session whose lock is still held then is appended without the lock
(logfile.append_unlocked), a metadata change is not made, and notices that
cannot be drained stay in the inbox for the next event. Either way one line
on stderr names the lock's holder.

One function per action; each gets a Context and returns a Reply (exit code,
stdout, stderr). Every reply is exit 0: blocking (a primary's wake at the
turn's end, the guard before a tool) is done with the agent's JSON output,
so no exit code ever blocks by accident. `handle` turns any internal failure, a missing
crew directory or a malformed payload into exit 0 and one line on stderr: a
hook must never harm the agent it serves.

The import path is kept tiny: the foundation and jsonio (the json package
and re cost more than the whole start-up budget); the captain module (the
captain's acts, without the rest of asides) is imported only when a prompt
arrives, re only when a Bash command names a captain-only word.
"""
import os
import time

from crewfile.agents import load
from crewfile.core import jsonio, locks
from crewfile.core.errors import CrewfileError, Refused
from crewfile.core.kinds import TURN_STATE
from crewfile.core.locks import LockBusy
from crewfile.core.logfile import TailStats
from crewfile.core.paths import OFFERED, Crew, default_dir
from crewfile.core.records import new_line, timestamp
from crewfile.core.text import escape
from crewfile.session import sessions
from crewfile.wake import inbox

# The captain-only conclusion: the aside-done command (/aside-done typed), and
# the `captain-done` record it writes. An agent's shell command naming either
# is denied (captain.CONCLUDE_COMMAND and evidence.CAPTAIN_DONE; neither is
# imported on this path). The denial is an early, friendly refusal, not the
# rule, and nothing rests on it: the rule is the readers' (kinds.GUARDED:
# a guarded record is believed only on its evidence; a conclusion needs
# evidence from outside the agent), which the audit below applies after
# every tool call.
CAPTAIN_ONLY_WORDS = ("aside-done", "captain-done")
# "no inbox-drain needed": a handed-over notice is in inbox.read already, and
# a model that drains anyway spends a request resending its whole
# conversation for nothing (the soak: a fifth of the primary's requests;
# tests/soak/levers.py).
NOTICE_HEADER = ("crewfile notices (machine reports from the crew's tools;"
                 " not written by the user; handed over here, no inbox-drain needed for them):")
WAKE_HEADER = "crewfile wake: new events for the primary (machine reports, not the user's words):"
PRIMARY = "primary"
HOOK_LOCK_WAIT = 1.0     # seconds; protocol.md, "Bounded waits"
# How long an account's passing stop (a 429 rate_limit, overloaded) holds
# crewfile's typing into the session: Claude Code hands its hook no reset time
# (the 429's reset headers stay inside the CLI: tests/CLAUDE_FINDINGS.md), so
# the block is recorded with this hold; $CREWFILE_ACCOUNT_HOLD overrides.
ACCOUNT_HOLD = 300.0     # seconds
# A subagent's own turn: Codex (0.171) runs the session's hooks for the
# subagents it spawns too, with the parent's session_id and the subagent's
# agent_id (observed: the subagent's UserPromptSubmit carried the spawn
# message as its prompt). Such a prompt or stop is work inside the session
# (`inside`), never the captain's words nor the session's own turn; a start
# or end naming a subagent (not seen) is not the session's either.
SUBAGENT_TURN = ("UserPromptSubmit", "Stop", "SessionStart", "SessionEnd")
MAX_ERROR_WORD = 40
MAX_TASKS_NAMED = 3


class Reply:
    __slots__ = ("code", "out", "err")

    def __init__(self, out="", err="", code=0):
        self.code, self.out, self.err = code, out, err


class Context:
    """One hook call: the crew, the environment, the payload, the session."""

    def __init__(self, crew, env, payload, agent=None, event=None):
        self.crew, self.env, self.payload = crew, env, payload
        self.agent = agent or load_agent(DEFAULT_AGENT)   # the adapter module
        self.event = event or payload.get("hook_event_name")   # the agent's own name
        self.notes = []          # stderr lines: said, never fatal
        self._session = False    # not looked up yet

    def field(self, key, kind=str):
        value = self.payload.get(key)
        return value if isinstance(value, kind) else None

    @property
    def session(self):
        """The crewfile session of this agent, or None (registered if named but unknown)."""
        if self._session is False:
            self._session = find_session(self.crew, self.env, self.payload)
        return self._session


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
        cwd = payload.get("cwd")
        try:
            return sessions.register(
                crew, name, kind="crew", cwd=cwd if isinstance(cwd, str) and cwd else None,
                tmux=env.get("TMUX_PANE") or None, agent_session_id=sid,
                extra=_transcript(payload), env=tmux_env(env), agent_from=os.getpid())
        except Refused:          # a parallel hook registered it first
            return sess
    if not sid:
        return None
    if not os.path.isdir(crew.root):
        return None
    return sessions.find(crew, agent_session_id=sid)


def tmux_env(env):
    """The environment that names the hook's own tmux server: $TMUX wins over
    CREWFILE_TMUX, because $TMUX_PANE is a pane of $TMUX's server."""
    if env.get("TMUX"):
        return {k: v for k, v in env.items() if k != "CREWFILE_TMUX"}
    return env


def record_agent(ctx, sess):
    """Record, or repair, the agent process and its pane (with the pane's server).

    Only in a tmux pane ($TMUX_PANE): the agent is the hook's ancestor in
    that pane (liveness.agent_of). Nothing is asked of tmux while the
    recorded agent is alive, is this hook's ancestor and sits in this pane.
    A pane in which no ancestor of the hook is found is not recorded: the
    environment may be another agent's (Codex runs its hooks in an app-server
    daemon that keeps the environment of the Codex that started it, so after
    a respawn $TMUX_PANE names the dead agent's pane).
    """
    pane = ctx.env.get("TMUX_PANE")
    if not pane or not ctx.env.get("TMUX") or sess.meta.get("kind") == "aside":
        return
    from crewfile.core.liveness import alive, descends_from
    meta = sess.meta
    pid, start = meta.get("pid"), meta.get("pid_start")
    if (isinstance(pid, int) and alive(pid, start) and descends_from(os.getpid(), pid)
            and meta.get("tmux") == pane and meta.get("tmux_socket") and meta.get("tmux_server")):
        return
    fields = sessions.pane_fields(pane, tmux_env(ctx.env), agent_from=os.getpid())
    if fields.get("pid") is None:
        ctx.notes.append(f"{sess.name}: the agent process was not found among the hook's"
                         f" ancestors in pane {pane}: its pane is left as recorded")
        return
    changed = {k: v for k, v in fields.items() if meta.get(k) != v}
    if changed:
        sess.update_meta(**changed)


def _transcript(payload):
    path = payload.get("transcript_path")
    return {"transcript_path": path} if isinstance(path, str) and path else None


DEFAULT_AGENT = "claude"


def load_agent(name):
    """The adapter module for agent *name* (BadInput if there is none)."""
    return load(name)


def _json(obj):
    return jsonio.dumps(obj) + "\n"


def _context_output(ctx, text):
    return _json(ctx.agent.context(ctx.event, text))


# Claude Code hands a hook's additionalContext to the model inline up to this
# many characters; one more and it saves the text to a file and passes the
# model a 2 KB preview (measured with the real CLI, 2.1.x: 10,000 inline,
# 10,001 persisted; tests/test_claude_wakes_e2e.py). Counted here in UTF-8
# bytes, never fewer than the characters.
INLINE_LIMIT = 10000
SHOWN_SENDERS = 5


def notices_text(notices, header=NOTICE_HEADER, rest=()):
    """Notices as model-facing facts, one line each, under a header, grouped
    by session and kind (in the order each group first appears); then one
    line for the *rest* still pending, if any."""
    return "\n".join([header] + [_notice_line(n) for n in _grouped(notices)]
                     + ([_rest_line(rest)] if rest else []))


def _notice_line(n):
    return f"crewfile notice: {_with_kind(n)} (posted {n.ts}, id {n.id})"


def _group_key(n):
    """(who, kind): a wake's session and event kind; for other notices their kind."""
    if n.kind == "wake":
        parts = n.text.split(" ", 3)
        if len(parts) >= 3:
            return parts[1], parts[2].rstrip(":")
    return n.kind, ""


def _grouped(notices):
    groups = {}
    for n in notices:
        groups.setdefault(_group_key(n), []).append(n)
    return [n for group in groups.values() for n in group]


def _rest_line(rest):
    who = []
    for n in rest:
        w = _group_key(n)[0]
        if w not in who:
            who.append(w)
    shown = ", ".join(who[:SHOWN_SENDERS])
    if len(who) > SHOWN_SENDERS:
        shown += f" and {len(who) - SHOWN_SENDERS} more"
    return (f"crewfile: {len(rest)} more notice{'s' if len(rest) != 1 else ''} wait in the inbox"
            f" (from {shown}); they follow at the next prompt or tool call, oldest first.")


def inline_part(header):
    """take() for inbox.drain: how many of the oldest pending notices fit,
    with the header and the line for the rest, within INLINE_LIMIT (at
    least one: a notice too long for it alone is cut in the text, kept
    whole in inbox.read)."""
    def take(notices):
        size = len(header.encode()) + 1
        k = 0
        while k < len(notices):
            line = len(_notice_line(notices[k]).encode()) + 1
            rest = notices[k + 1:]
            tail = len(_rest_line(rest).encode()) + 1 if rest else 0
            if size + line + tail > INLINE_LIMIT:
                break
            size += line
            k += 1
        return max(k, 1)
    return take


def inline_text(header, taken, rest):
    """notices_text() within INLINE_LIMIT (see inline_part)."""
    text = notices_text(taken, header, rest)
    if len(text.encode()) > INLINE_LIMIT:
        note = " [cut here: too long to show inline; inbox.read keeps it whole]"
        text = text.encode()[:INLINE_LIMIT - len(note.encode())].decode("utf-8", "ignore") + note
    return text


def _with_kind(n):
    """The notice's text, led by its kind unless it already says it (`job j-1 ...`)."""
    return n.text if n.text.startswith(n.kind + " ") else f"{n.kind} {n.text}"


def drain_notices(ctx):
    """Drain the session's inbox into the agent's context output ('' if empty)."""
    sess = ctx.session
    if sess is None:
        return ""
    try:
        notices, rest, garbage = inbox.drain_part(ctx.crew, sess.name,
                                                  inline_part(NOTICE_HEADER), _taker(ctx, sess))
    except LockBusy as e:
        ctx.notes.append(f"{sess.name}: notices left in the inbox for the next event: {e}")
        return ""
    if garbage:
        ctx.notes.append(f"{sess.name}: skipped {garbage} malformed inbox line(s)")
    if not notices:
        return ""
    return _context_output(ctx, inline_text(NOTICE_HEADER, notices, rest))


def _taker(ctx, sess):
    """offer_to for inbox.drain_part: the agent life taking a hand-over, as
    (pid, start, transcript). The session's recorded agent, if it is alive
    (a dead one recorded would have every notice put back at once); the
    transcript named by the payload, else the session's."""
    def life():
        from crewfile.core.liveness import alive
        meta = sess.meta
        pid, start = meta.get("pid"), meta.get("pid_start")
        if not (isinstance(pid, int) and isinstance(start, int) and alive(pid, start)):
            pid = start = None
        transcript = ctx.field("transcript_path") or meta.get("transcript_path")
        return pid, start, transcript if isinstance(transcript, str) else None
    return life


def settle_offered(ctx, sess):
    """The notices handed to the agent and not yet confirmed (inbox.settle):
    this event is evidence that the agent life that took them went on, unless
    that life is gone, or this is a new agent's SessionStart; then those its
    transcript does not name are put back for the next turn."""
    def went_on(pid, start):
        if pid is None:         # no agent recorded: only a new start is a new life
            return not _starts_life(ctx)
        from crewfile.core.liveness import alive
        return alive(pid, start)
    try:
        back = inbox.settle(ctx.crew, sess.name, went_on)
    except CrewfileError as e:       # LockBusy too: the next event settles them
        ctx.notes.append(f"{sess.name}: offered notices not settled: {e}")
        return
    if back:
        ctx.notes.append(f"{sess.name}: {back} notice(s) handed to an agent that is gone"
                         " put back in the inbox")


def _starts_life(ctx):
    return ctx.agent.EVENTS.get(ctx.event) == "SessionStart"


def _no_session(ctx):
    sid = ctx.field("session_id") or "?"
    ctx.notes.append(f"no crewfile session for agent session {sid}"
                     " (set CREWFILE_SESSION, or session-add --agent-session-id)")
    return Reply()


# ---------------------------------------------------------------- events

def session_start(ctx):
    sess = ctx.session
    if sess is None:
        return _no_session(ctx)
    settle_offered(ctx, sess)
    if sess.meta.get("kind") != "aside" and not sess.ended() and _agent_gone(sess):
        sess.append("ended", "agent process gone")      # it crashed: no SessionEnd ran
    if sess.meta.get("kind") != "aside" and sess.ended():
        sess = _restart(ctx, sess)
    _repair(ctx, sess)
    cwd = ctx.field("cwd")
    sess.update_meta(agent_session_id=ctx.field("session_id") or None,
                     cwd=os.path.realpath(cwd) if cwd else None,
                     transcript_path=ctx.field("transcript_path") or None,
                     agent=None if sess.meta.get("agent") else ctx.agent.NAME)
    sess.append("started", ctx.field("source") or "")
    if sess.meta.get("kind") == "aside":
        return Reply(_context_output(ctx, aside_briefing(sess, ctx.agent)))
    return Reply()


def _agent_gone(sess):
    """The recorded agent process is gone (so this SessionStart is a new agent's)."""
    from crewfile.core.liveness import alive
    pid, start = sess.meta.get("pid"), sess.meta.get("pid_start")
    return isinstance(pid, int) and not alive(pid, start)


def _restart(ctx, sess):
    """An ended crew session or primary whose agent starts again in its name
    (/exit, then claude again in the same window) begins a new life
    (sessions.register_again), in the hook's pane on the hook's server, with
    the hook's agent. An aside is never revived this way: its life ends with
    the captain."""
    return sessions.register_again(sess, tmux=ctx.env.get("TMUX_PANE") or None,
                                   env=tmux_env(ctx.env), agent_from=os.getpid())


RULE_HEADING = "## The rule for the aside's agent\n"


def aside_briefing(sess, agent):
    """What an aside's agent is told at start: which aside, and the conclusion
    rule, taken from the /aside skill's text (its one source), with the
    conclusion command as *agent*'s captain types it."""
    from crewfile.agents import claude
    from crewfile.agents.install import shipped
    rule = shipped(claude, claude.FILES[0]).partition(RULE_HEADING)[2].strip()
    rule = rule.replace(f"`{claude.CONCLUDE}`", f"`{agent.CONCLUDE}`")
    topic = sess.meta.get("topic")
    head = f"crewfile: this session is the aside {sess.name!r}"
    head += f" on the topic: {topic}." if topic else "."
    return head + "\n\n" + rule


def user_prompt_submit(ctx):
    sess = ctx.session
    if sess is None:
        return _no_session(ctx)
    prompt = ctx.field("prompt")
    if prompt is not None and prompt.startswith(getattr(ctx.agent, "MACHINE_PROMPTS", ())):
        prompt = None            # the CLI's own notification: nobody's words
    if prompt is not None:
        prompt = ctx.agent.captain_text(prompt)
    settle_offered(ctx, sess)
    audit(ctx, sess)
    if prompt is not None:
        try:
            from crewfile.asides.captain import record_captain_input
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
    _repair(ctx, sess)
    return Reply(drain_notices(ctx))


def _repair(ctx, sess):
    try:                         # a turn goes on whether or not the repair works
        record_agent(ctx, sess)
    except CrewfileError as e:
        ctx.notes.append(f"{sess.name}: agent not recorded: {e}")


def _plain_captain_record(crew, name, text, *_evidence):
    sessions.Session(crew, name).append("captain", text)


def audit(ctx, sess):
    """A captain-done record appended since the turn began without evidence of
    the captain (printf >> status, a forged payload) becomes a `problem` record
    now, whether or not the agent goes on to call aside-conclude; so does an
    `ended`, `closed` or `concluded` record without its evidence (kinds.GUARDED).
    Cheap when there is none: the walk back ends at the turn's start."""
    try:
        from crewfile.asides.evidence import unjudged
        claims = []
        if unjudged(sess, claims):
            from crewfile.asides.aside import audit as audit_acts
            audit_acts(sess)
        if claims:
            from crewfile.asides.aside import audit_claims
            audit_claims(sess, claims)
    except CrewfileError as e:
        ctx.notes.append(f"{sess.name}: captain acts not audited: {e}")


def names_captain_only(command):
    """True if *command* has `aside-done` or `captain-done` as a word (a path's
    last part counts: bin/aside-done; my-aside-done-list does not)."""
    if not any(w in command for w in CAPTAIN_ONLY_WORDS):
        return False
    import re
    return re.search(r"(?<![\w-])(?:aside-done|captain-done)(?![\w-])", command) is not None


def pre_tool_use(ctx):
    _settle_named(ctx)
    if ctx.field("tool_name") not in ctx.agent.SHELL_TOOLS:
        return Reply()
    tool_input = ctx.field("tool_input", dict) or {}
    command = tool_input.get("command")
    if not isinstance(command, str) or not names_captain_only(command):
        return Reply()
    done = ctx.agent.CONCLUDE
    reason = (f"crewfile: concluding an aside is the captain's act only: the captain types "
              f"{done} in this window. This command was not run. Keep the "
              f"conversation going; hand over the report with aside-conclude only after "
              f"the captain's {done}.")
    try:                         # the denial stands even if it cannot be recorded
        sess = ctx.session
        if sess is not None:
            sess.append("problem", f"self-conclusion refused: the agent ran {command[:200]!r};"
                                   " denied")
    except Exception as e:
        ctx.notes.append(f"denial not recorded: {e}")
    return Reply(_json(ctx.agent.deny(ctx.event, reason)))


def _settle_named(ctx):
    """settle_offered() for an event that otherwise never looks its session
    up (PreToolUse of most tools): only for a session named in the
    environment, and only past one stat that finds something offered."""
    name = ctx.env.get("CREWFILE_SESSION")
    try:
        if not name or not os.path.lexists(ctx.crew.session_file(name, OFFERED)):
            return
    except CrewfileError:        # a bad name: said by the events that look it up
        return
    sess = ctx.session
    if sess is not None:
        settle_offered(ctx, sess)


def post_tool_use(ctx):
    sess = ctx.session
    if sess is None:
        return Reply()
    settle_offered(ctx, sess)
    audit(ctx, sess)
    # A tool ran, so no permission dialog is up any more: a `waiting` record
    # would keep saying so until the turn ends.
    last = sess.last_of(TURN_STATE, TailStats())
    if last is not None and last.kind == "waiting":
        sess.append("turn-started", "permission answered")
    if from_subagent(ctx.payload):
        return Reply()           # notices are the session's model's, not a subagent's
    return Reply(drain_notices(ctx))


def stop(ctx):
    """turn-ended; a primary with pending wakes continues instead (never twice in a row)."""
    sess = ctx.session
    if sess is None:
        return _no_session(ctx)
    settle_offered(ctx, sess)
    audit(ctx, sess)
    # Pending wakes first: reading meta costs a JSON parse that most Stops never need.
    if (ctx.payload.get("stop_hook_active") is not True
            and inbox.has(ctx.crew, sess.name, "wake")
            and sess.meta.get("kind") == PRIMARY):
        from crewfile.core.locks import LockBusy
        try:
            notices, rest, garbage = inbox.drain_part(ctx.crew, sess.name,
                                                      inline_part(WAKE_HEADER),
                                                      _taker(ctx, sess))
        except LockBusy as e:
            ctx.notes.append(f"{sess.name}: wakes left in the inbox: {e}")
            notices, rest, garbage = [], [], 0
        if garbage:
            ctx.notes.append(f"{sess.name}: skipped {garbage} malformed inbox line(s)")
        if notices:      # each agent's own way of going on (adapters: carry_on)
            text = inline_text(WAKE_HEADER, notices, rest)
            return Reply(_json(ctx.agent.carry_on(ctx.event, text)))
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
    """'N crons (ID SCHEDULE: PROMPT; ...)' for a Stop payload's `session_crons`
    (the CLI's own session-only jobs, each {id, schedule, recurring, prompt}),
    or '' when there is none."""
    if not isinstance(crons, list):
        return ""
    crons = [c for c in crons if isinstance(c, dict)]
    if not crons:
        return ""
    named = [f"{str(c.get('id') or '?')[:16]} {str(c.get('schedule') or '?')[:40]}"
             + ("" if c.get("recurring") else " once") + f": {str(c.get('prompt') or '')[:60]}"
             for c in crons[:MAX_TASKS_NAMED]]
    more = "; ..." if len(crons) > MAX_TASKS_NAMED else ""
    s = "s" if len(crons) != 1 else ""
    return f"{len(crons)} cron{s} ({'; '.join(named)}{more})"


def background_tasks(tasks):
    """'turn ended, N background tasks running (...)' for a Stop payload's
    in-flight `background_tasks` (every entry is one: the CLI lists running,
    pending and backgrounded work only), or '' when there is none."""
    if not isinstance(tasks, list):
        return ""
    tasks = [t for t in tasks if isinstance(t, dict)]
    if not tasks:
        return ""
    named = []
    for t in tasks[:MAX_TASKS_NAMED]:
        what = t.get("command") or t.get("description") or t.get("id") or "?"
        named.append(f"{t.get('type') or 'task'}: {str(what)[:80]}")
    more = "; ..." if len(tasks) > MAX_TASKS_NAMED else ""
    s = "s" if len(tasks) != 1 else ""
    return f"turn ended, {len(tasks)} background task{s} running ({'; '.join(named)}{more})"


def stop_failure(ctx):
    """The turn ended in an API error (Claude Code's StopFailure; no Stop follows).
    An error of the turn alone is `turn-failed`; any other, the account's
    stop, is `account-blocked: ERROR until TS: MESSAGE` (TS `-`: no time lifts
    it), which holds crewfile's typing into the session (session/verdict.py)."""
    sess = ctx.session
    if sess is None:
        return _no_session(ctx)
    settle_offered(ctx, sess)
    error = error_word(ctx.field("error"))
    message = ctx.field("last_assistant_message") or ctx.field("error_details") or ""
    if error in getattr(ctx.agent, "TURN_ONLY_ERRORS", ()):
        sess.append("turn-failed", f"{error}: {message}" if message else error)
        return Reply()
    if error in getattr(ctx.agent, "LASTING_ERRORS", ()):
        until = "-"
    else:
        until = timestamp(time.time() + account_hold(ctx.env))
    sess.append("account-blocked", f"{error} until {until}" + (f": {message}" if message else ""))
    return Reply()


def error_word(error):
    """The payload's error name as one word of [a-z0-9_-] ('unknown' otherwise):
    the record's text is read back by its first words."""
    if not isinstance(error, str) or not error or len(error) > MAX_ERROR_WORD:
        return "unknown"
    ok = all(c in "abcdefghijklmnopqrstuvwxyz0123456789_-" for c in error)
    return error if ok else "unknown"


def account_hold(env):
    try:
        value = float(env.get("CREWFILE_ACCOUNT_HOLD") or ACCOUNT_HOLD)
    except ValueError:
        return ACCOUNT_HOLD
    return min(max(0.0, value), 7 * 86400.0) if value == value else ACCOUNT_HOLD


def inside(ctx):
    """A subagent stopped, a teammate went idle, a task completed: work inside
    the session, not the session. A `subagent` record, which ends no turn and
    wakes nobody (kinds.INSIDE)."""
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
    what = ctx.agent.NOTIFICATIONS.get(ctx.field("notification_type"))
    if what is None:
        return Reply()
    sess = ctx.session
    if sess is None:
        return _no_session(ctx)
    sess.append(*what)
    _repair(ctx, sess)
    return Reply()


def permission_request(ctx):
    """An agent that asks before a tool runs (Codex's PermissionRequest): waiting.
    No decision is given: the person at the screen answers."""
    sess = ctx.session
    if sess is None:
        return _no_session(ctx)
    sess.append("waiting", "permission")
    _repair(ctx, sess)
    return Reply()


def session_end(ctx):
    sess = ctx.session
    if sess is None:
        return _no_session(ctx)
    if _another_agents_end(sess):
        ctx.notes.append(f"{sess.name}: an earlier agent's SessionEnd, not recorded:"
                         " the session's registered agent is another, alive")
        return Reply()
    sess.append("ended", ctx.field("reason") or "unknown")
    return Reply()


def _another_agents_end(sess):
    """This SessionEnd comes from an agent other than the session's registered
    one, which is alive: an old agent ending after a new one took the name
    (a tmux server restarted, its agents resumed before the old ones' hooks
    ran). Its `ended` would stand over the live agent's life and never be
    believed, holding every delivery to the session."""
    from crewfile.core.liveness import alive, descends_from
    pid, start = sess.meta.get("pid"), sess.meta.get("pid_start")
    if not isinstance(pid, int) or not alive(pid, start):
        return False
    return not descends_from(os.getpid(), pid)


EVENTS = {
    "SessionStart": session_start,
    "UserPromptSubmit": user_prompt_submit,
    "PreToolUse": pre_tool_use,
    "PostToolUse": post_tool_use,
    "Stop": stop,
    "StopFailure": stop_failure,
    "Inside": inside,
    "Notification": notification,
    "PermissionRequest": permission_request,
    "SessionEnd": session_end,
}


def codex_notify(ctx):
    """Codex CLI's notify program: agent-turn-complete -> turn-ended."""
    if ctx.field("type") != "agent-turn-complete":
        return Reply()
    sess = ctx.session
    if sess is None:
        return _no_session(ctx)
    sess.append("turn-ended")
    return Reply()


# ---------------------------------------------------------------- entry

MAX_PAYLOAD = 32 << 20      # bytes of one hook payload kept; protocol.md, crew-hook


def read_payload(stream, limit=MAX_PAYLOAD):
    """The payload on *stream*, or None when it is over *limit* bytes.

    Memory stays bounded whatever the agent sends: past the limit the rest
    is read and dropped in chunks (never left unread, so the agent's write
    does not fail on a closed pipe)."""
    data = stream.read(limit + 1)
    if len(data) <= limit:
        return data
    while stream.read(1 << 16):
        pass
    return None

def handle(raw, env=None, crew=None, codex=False, lock_wait=HOOK_LOCK_WAIT,
           agent=DEFAULT_AGENT):
    """Run the hook of *agent* (an adapter's name) for one payload (bytes or
    str); always a Reply, exit 0. *codex*: the payload is Codex's notify JSON.

    Every lock wait is bounded by *lock_wait* seconds meanwhile."""
    env = os.environ if env is None else env
    event = "?"
    ctx = None
    bound = locks.bound_waits(lock_wait, total=True)
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
    except CrewfileError as e:
        reply = Reply(err=f"{event}: {e}")
    except Exception as e:       # a bug of ours must not become the agent's problem
        reply = Reply(err=f"{event}: internal error: {type(e).__name__}: {e}")
    finally:
        locks.restore_waits(bound)
    notes = (ctx.notes + (ctx._session.notes if ctx._session else [])) if ctx else []
    notes = list(dict.fromkeys(notes))      # each once
    if notes:
        reply.err = "; ".join(([reply.err] if reply.err else []) + notes)
    reply.err = escape(reply.err)       # one line, no control character (a process's name)
    reply.code = 0
    return reply
