"""Evidence that a captain act came from the captain, not from the aside's agent.

The kinds of evidence and their limits: docs/files/asides.md, docs/files/acts.md.
It stops an agent that decides on its own that the aside is over; it is not a
security boundary.
"""
import os
import time

from crewfile.agents import adapter_of
from crewfile.core import logfile, logwrite, paths, records
from crewfile.core.errors import NotFound, Refused
from crewfile.core.kinds import GUARDED
from crewfile.core.liveness import lineage
from crewfile.core.locks import hold

CAPTAIN, CAPTAIN_DONE = "captain", "captain-done"        # the captain's acts (records)
SELF_CONCLUSION = "self-conclusion refused"               # the problem text's start
INPUT_REFUSED = "captain input refused"                   # ... for a `captain` record
CAPTAIN_KINDS = frozenset({CAPTAIN, CAPTAIN_DONE})
PROMPT, CALLER = "prompt", "caller"                       # the kinds of evidence
NO_ID = "-"                       # `prompt -`: the agent's prompt hook names no prompt
TRANSCRIPT_SCAN = 64 << 20        # bytes of a transcript read back, at most
TRANSCRIPT_WAIT = 5.0             # seconds a prompt id not yet in the transcript is waited for
ACTS_SCAN = 1 << 20
ACT_MAX_LINE = records.MAX_LINE + 1024    # a record line, a tab, its evidence
KEYS = "keys"                     # the hands part of an act's evidence: `keys SECOND`
KEYS_RECENT = 10                  # seconds a person's key input may precede the act


# --- processes ------------------------------------------------------------------

def caller_verdict(meta):
    """(None, WHERE) if this process may act as the captain, else (why, None).
    WHERE: the pane the command was typed in, or `tmux` (a key binding's run-shell)."""
    agent, agent_start = meta.get("pid"), meta.get("pid_start")
    pane = meta.get("tmux")
    if not agent and not pane:
        return ("the aside's agent process is not recorded, so no command can show it is"
                " not the agent; type /aside-done in the aside"), None
    chain = lineage()                   # nearest first, this process too
    if any(st.pid == agent and agent_start in (None, st.start) for st in chain):
        return "it was run by the aside's own agent", None
    from crewfile.session.tmux import Server  # the hook's budget (subprocess)
    server = Server(meta.get("tmux_socket"))   # a string by meta's shape; "" is no socket
    if server.pid is None:
        return "the aside's tmux server could not be asked", None
    pids = [st.pid for st in chain]
    if server.pid not in pids:
        return ("it was not run from a tmux window or key binding of the aside's tmux"
                " server (a detached process has no captain behind it)"), None
    i = pids.index(server.pid)
    if i == 0:
        return "it is the tmux server itself", None
    where = next((p.id for p in server.panes.values() if p.pid == pids[i - 1]), None)
    if where is not None and where == pane:
        return "it was run in the aside's own window", None
    return None, where or "tmux"


# --- a person's hands -------------------------------------------------------------

def hands(sess, where=None, now=None):
    """(None, 'keys SECOND') if a person at a terminal stands behind an act of
    *sess* happening *now*, else (why not, None): docs/files/asides.md, *hands*.
    SECOND: the newest client_activity of a client looking at pane *where*
    (any, for None), which send-keys and run-shell leave as it was."""
    from crewfile.session import tmux  # the hook's budget (subprocess)
    now = time.time() if now is None else now
    clients = tmux.clients(sess.meta.get("tmux_socket"))
    if not clients:
        return "no tmux client is attached to the aside's tmux server: no person's keys", None
    seen = [t for t, pane in clients if where is None or pane == where]
    if not seen:
        return f"no tmux client attached to the aside's tmux server looks at {where}", None
    second = max(seen)
    if second < int(now) - KEYS_RECENT:
        return (f"no key was pressed in a tmux client of the aside's server in the last"
                f" {KEYS_RECENT} seconds (keys sent by send-keys or run-shell are no"
                f" person's)"), None
    last = newest_input(sess)
    if last is not None and second < int(last) + 1:
        return ("no key was pressed in a tmux client of the aside's server since the"
                " captain's last input (keys sent by send-keys or run-shell are no"
                " person's)"), None
    return None, f"{KEYS} {second}"


def newest_input(sess):
    """The time (epoch seconds) of the session's newest captain input record, or None."""
    rec = sess.newest_this_life(lambda rec: rec.kind in CAPTAIN_KINDS)
    return rec.time if rec else None


# --- the agent's transcript ---------------------------------------------------------
# One rule for every agent CLI (docs/files/asides.md); how one transcript line
# is read is the agent's own small part (crewfile.agents: transcript_prompt).

def _prompts(path, agent):
    """(id, is the conclusion) of each transcript entry of a captain prompt, newest first."""
    for entry in logfile.objects_backwards(path, TRANSCRIPT_SCAN, (agent.TRANSCRIPT_MARK,)):
        found = agent.transcript_prompt(entry)
        if found is not None:
            yield found


def newest_prompt(path, agent):
    """The id of the newest prompt in the transcript at *path*, or None."""
    return next((pid for pid, _ in _prompts(path, agent)), None)


NEWER = "the agent's transcript has a newer prompt than that {}"
NOT_COMMAND = "the agent's transcript does not hold that prompt as the {} command"


def prompt_verdict(path, prompt_id, agent):
    """None if the transcript's newest captain prompt is the conclusion (and is
    *prompt_id*, if given), else why not. The CLI appends to its transcript a
    moment after the entries are made: a prompt not there yet is waited for."""
    deadline = time.monotonic() + TRANSCRIPT_WAIT
    while True:
        why, seen = _prompt_verdict(path, prompt_id, agent)
        if why is None or seen or time.monotonic() >= deadline:
            return why
        time.sleep(0.05)


def _prompt_verdict(path, prompt_id, agent):
    """(why not, or None; whether the transcript holds *prompt_id* at all)."""
    if not isinstance(path, str) or not path:
        return "the agent's transcript is not recorded (meta transcript_path)", True
    entries = _prompts(path, agent)
    newest, done, older = None, False, None
    for pid, conclusion in entries:         # a prompt may have several entries
        if newest is None:
            newest = pid
        elif pid != newest:
            older = pid
            break
        done = done or conclusion
    if newest is None:
        return NOT_COMMAND.format(agent.CONCLUDE), False
    if prompt_id is None or newest == prompt_id:
        return (None if done else NOT_COMMAND.format(agent.CONCLUDE)), prompt_id is not None
    return NEWER.format(agent.CONCLUDE), older == prompt_id or any(
        pid == prompt_id for pid, _ in entries)


def refuse_hand_written(sess, kind, command):
    """Refuse a guarded record (kinds.GUARDED) written by a general command
    (status-append): a `problem` record, which wakes the primary, then Refused."""
    if kind in CAPTAIN_KINDS:
        what = SELF_CONCLUSION if kind == CAPTAIN_DONE else INPUT_REFUSED
        sess.append("problem", f"{what}: {command} may not write {kind} records")
        raise Refused(f"{kind} records are the captain's acts: written only by the agent's"
                      f" prompt hook, aside-say and aside-done")
    sess.append("problem", f"record refused: {command} may not write {kind} records")
    raise Refused(f"{kind} records are written only by {GUARDED[kind][0]}")


# --- judging -------------------------------------------------------------------------

# Records that end an audit's walk back: the captain's newest input (every
# prompt the hook sees writes one), the session's start or end, or a
# judgement already made (a conclusion, a refusal).
_AUDIT_STOPS = frozenset({CAPTAIN, "registered", "closed", "concluded"})


# Guarded kinds (kinds.GUARDED) that end or hand over, which the agent's own
# hooks judge as the walk meets them: while its hook runs, the agent is live.
CLAIMS = frozenset({"ended", "closed", "concluded"})


def unjudged(sess, claims=None):
    """The captain-done records since the captain's newest input, not judged yet.
    Cheap (one prompt back at most), so the agent's hooks ask it after every tool
    call. *claims*, a list, gets the CLAIMS records met (the stop included)."""
    out = []
    for rec in sess.backwards():
        if claims is not None and rec.kind in CLAIMS:
            claims.append(rec)
        if rec.kind in _AUDIT_STOPS or (rec.kind == "problem"
                                        and rec.text.startswith(SELF_CONCLUSION)):
            break
        if rec.kind == CAPTAIN_DONE:
            out.append(rec)
    return out


# --- the acts file ------------------------------------------------------------------

def acts_path(sess):
    return os.path.join(sess.dir, paths.ACTS)


def record_act(sess, kind, text, evidence):
    """Append the captain act `kind: text`, its evidence first."""
    line = records.new_line(kind, text)
    if not sess.exists():
        raise NotFound(f"no session {sess.name!r} (register it with session-add)")
    with hold(sess.lock_path):
        logwrite.append_locked(acts_path(sess), [line.rstrip("\n") + "\t" + evidence + "\n"])
        logwrite.append_locked(sess.status_path, [line], rotate=logfile.rotate_limits())


def evidence_of(sess, rec):
    """The evidence written for record *rec* (e.g. 'prompt ID'), or None."""
    want = rec.line().rstrip("\n").encode("utf-8") + b"\t"
    for line in logfile.lines_backwards(acts_path(sess), logfile.TailStats(), ACTS_SCAN,
                                        max_line=ACT_MAX_LINE, only=(want,)):
        if line.startswith(want):
            return line[len(want):].decode("utf-8", "replace")
    return None


def replayed(rec, since):
    """Why captain act *rec* cannot be the one its `acts` line was written
    for, or None. *since*: the time of the newest `captain` or `registered`
    record before it (aside.scan's; None: none within the read). An act is
    newer than the input or the life it follows; an older one is a copy of an
    earlier act's line, which that act's evidence would vouch for."""
    if since is None:
        return ("no captain input or registration lies within the log read before it,"
                " so it cannot be told from a copy of an earlier act")
    if rec.ts <= since:
        return (f"it is not newer than the captain input or registration of {since} before it:"
                f" a copy of an earlier act's line")
    return None


def verdict(sess, rec, since):
    """None if captain act *rec* is believed, else the reason it is not.
    since: as for replayed()."""
    why = replayed(rec, since)
    if why:
        return why
    ev = evidence_of(sess, rec)
    if ev is None:
        return "it has no evidence of the captain (not written by a prompt hook or aside-done)"
    ev, keys, _ = ev.partition(f" {KEYS} ")
    if not keys:
        return "it has no evidence of a person's keys (no tmux client input at the act)"
    how, _, what = ev.partition(" ")
    if how == PROMPT:
        return prompt_verdict(sess.meta.get("transcript_path"),
                              None if what in ("", NO_ID) else what, adapter_of(sess.meta))
    if how == CALLER:
        return None
    return f"unknown evidence {how!r}"
