"""crew-spawn and crew-respawn: a crew session in one command, in a tree of its own
(docs/commands/crew-spawn.md, crew-respawn.md). Every check comes first, so a
refusal leaves nothing behind; then the registration (a spawn killed at any
point leaves nothing crewfile does not know), the worktree, the window.
"""
import os
import shlex
import time
from collections import namedtuple

from crewfile.agents import adapter_of, load
from crewfile.asides.aside import checkpoint
from crewfile.core import paths, records
from crewfile.core.errors import BadFile, CrewfileError, Refused, UsageError
from crewfile.core.names import check_name
from crewfile.crew import worktree as wt
from crewfile.nudges import schedules
from crewfile.session import delivery, verdict, window
from crewfile.session.reader import names as all_names, readable
from crewfile.session.sessions import Session, register, register_again
from crewfile.session.verdict import Look, overlap, tree_of

PROMPT_WAIT = 60.0        # seconds to wait for the agent's first idle prompt
PROMPT_POLL = 0.1
RETYPES = 2               # typings after the first the agent discarded (crew-spawn.md)
NOT_STARTED = "not-started"
CONVERSATION_ID_CHARS = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.")

# prompt: None when none was asked, else the delivery's (delivered, reason).
Spawned = namedtuple("Spawned", "target tree branch prompt")


def refuse_held(crew, tree, exclude=None, exact=False):
    """Refused if another session not ended, live (or of unknown liveness),
    works in *tree*, above or inside it. exact: *tree* as it is (a worktree
    about to be made), else its git top level."""
    mine, look = (tree if exact else tree_of(tree)), Look()
    for sess, meta in readable(crew, exclude=exclude):
        name = sess.name
        theirs = tree_of(meta.get("cwd"))
        if theirs is None or not overlap(mine, theirs):
            continue
        live = verdict.liveness(meta, look).live
        # An end is believed unless its agent is found live (kinds.GUARDED):
        # a line anyone appended frees no tree.
        if live == verdict.NOT_LIVE or (sess.ended() and live != verdict.LIVE):
            continue
        raise Refused(f"the tree {tree} is held: " + (
            f"{name} is live in {theirs}" if live == verdict.LIVE else
            f"{name} works in {theirs} and its liveness is unknown"))


def resume_command(agent, cmd, conversation):
    """*cmd* made to resume *conversation*: never a new one, so a schedule
    attached to it still belongs to it (Refused, saying why, where it cannot be)."""
    resume = load(agent).RESUME
    if resume is None:
        raise Refused(f"cannot resume a {agent} conversation: crewfile does not know how,"
                      f" and starting {agent} again would begin a new one")
    if not conversation:
        raise Refused("no conversation id is recorded (its agent never ran its SessionStart"
                      " hook): starting the agent would begin a new conversation")
    if len(conversation) > 128 or not set(conversation) <= CONVERSATION_ID_CHARS:
        raise Refused(f"the recorded conversation id '{conversation[:40]}' is malformed")
    return f"{cmd} {resume.format(id=shlex.quote(conversation))}"


def spawn(crew, name, agent="claude", ref=None, tmux_session=None, prompt=None,
          worktree=True, cmd=None, prompt_wait=PROMPT_WAIT):
    """Start crew session NAME in a new worktree and window; return a Spawned."""
    check_name(name, "session name")
    load(agent)
    if prompt is not None:
        delivery.check_text(prompt)
    cmd = cmd or os.environ.get("CREWFILE_AGENT_CMD") or agent
    here = os.path.realpath(os.getcwd())
    sess = Session(crew, name)
    if sess.exists() and not sess.ended():
        raise Refused(f"'{name}' is already registered and not ended")
    extra = {"agent": agent, "agent_cmd": cmd}
    if tmux_session:
        extra["tmux_session"] = tmux_session
    repo = branch = None
    if worktree:
        repo = wt.locate(here)
        commit = wt.resolve(repo, ref or "HEAD")
        branch = wt.branch_for(repo, name)
        if wt.branch_head(repo, branch) is not None:
            raise Refused(f"branch {branch} exists (an earlier worker's?): delete it or"
                          " choose another name")
        tree = wt.place(repo, name)
        if os.path.lexists(tree):
            raise Refused(f"{tree} exists: remove it or choose another name")
        wt.refuse_dirty_ref(repo, ref or "HEAD")
        extra.update(branch=branch, worktree=tree, repo=repo.main)
    elif ref:
        raise UsageError("--from needs a worktree: not with --no-worktree")
    else:
        tree = here
    refuse_held(crew, tree, exclude=name, exact=worktree)

    sess = register(crew, name, kind="crew", cwd=tree, extra=extra)   # a racing spawn: Refused
    checkpoint("spawn:registered")
    made_parent = worktree and not os.path.isdir(os.path.dirname(tree))
    added = False
    try:
        if worktree:
            wt.add(repo, tree, branch, commit, made_parent)      # takes back its own failure
            added = True
        checkpoint("spawn:worktree")
        target = window.open_agent(sess, cmd, tmux_session=tmux_session, cwd=tree)
        if not tmux_session:     # the current one, named, so crew-respawn finds it again
            sess.update_meta(tmux_session=target.rpartition(":")[0])
    except BaseException as e:
        try:
            sess.append("ended", f"spawn failed: {e}")
        finally:
            if added:
                wt.undo_add(repo, tree, branch, made_parent)
        raise
    return Spawned(target, tree, branch,
                   None if prompt is None else first_prompt(sess, prompt, prompt_wait))


def first_prompt(sess, text, wait=PROMPT_WAIT):
    """Deliver *text* once the agent shows an idle, empty prompt: (delivered,
    reason); retried and waited for as docs/commands/crew-spawn.md says."""
    final = (delivery.NOT_LIVE, delivery.FAILED, delivery.ABORTED, delivery.ASIDE,
             delivery.UNCONFIRMED,       # typed and Entered: never typed a second time
             delivery.ACCOUNT_BLOCKED)   # held while the block stands (a respawn's log has it)
    hooked = adapter_of(sess.meta).HOOKS_AT_START
    deadline = time.monotonic() + wait
    retypes = RETYPES
    while True:
        # A `started` since the newest `registered` (not `respawned`: appended
        # after the window opens, it may follow the resumed agent's `started`).
        if hooked and sess.newest_this_life(lambda rec: rec.kind == "started") is None:
            ok, reason = False, delivery.Answer(NOT_STARTED, (
                "its SessionStart hook has not run: its hooks are not installed, or not"
                " trusted yet (a question on its screen?)"))
        else:
            ok, reason = delivery.deliver(sess, text)
        if ok or reason.code in final or time.monotonic() > deadline:
            return ok, reason
        if reason.code == delivery.DISCARDED:
            if not retypes:
                return ok, reason
            retypes -= 1
        time.sleep(PROMPT_POLL)


# --- crew-respawn -------------------------------------------------------------------

RESPAWNED, WOULD, LIVE, ENDED, REFUSED, DAMAGED = (
    "respawned", "would-respawn", "live", "ended", "refused", "damaged")


# What crew-respawn did (or would do) with one session.
Respawn = namedtuple("Respawn", "name action detail")


def ended_on_purpose(sess):
    """The record that ended the session's current life on purpose, or None: an
    `ended` or `closed` since its newest `registered`, but not one its hook also
    writes when hung up on (NOT_ON_PURPOSE; `ended: retired` then stays retired)."""
    unsure = adapter_of(sess.meta).NOT_ON_PURPOSE
    return sess.newest_this_life(
        lambda rec: rec.kind == "closed" or (rec.kind == "ended" and rec.text not in unsure))


def _plan(crew, name, look):
    """(action, detail, command) for one session, decided from files and one tmux look."""
    sess = Session(crew, name)
    meta = sess.meta
    end = ended_on_purpose(sess)
    if end:
        return ENDED, f"it ended on purpose ({end.kind}: {end.text}): not respawned", None
    life = verdict.liveness(meta, look)        # the agent process, in its pane, on its server
    if life.live == verdict.LIVE:
        return LIVE, f"its agent is live in {meta.get('tmux') or meta.get('pid')}", None
    if life.live != verdict.NOT_LIVE:
        return REFUSED, f"whether its agent is live is unknown: {life.why}", None
    agent = meta.get("agent")
    if not agent or not meta.get("agent_cmd"):
        return REFUSED, ("its agent is not recorded (it was not started by crew-spawn):"
                         " start it by hand"), None
    # Refused, as for refuse_held below: the caller's REFUSED
    command = resume_command(agent, meta["agent_cmd"], meta.get("agent_session_id"))
    tree = meta.get("cwd")
    if not tree or not os.path.isdir(tree):
        return REFUSED, f"its tree {tree or '(none recorded)'} is gone", None
    transcript = meta.get("transcript_path")
    if transcript and not os.path.exists(transcript):
        return REFUSED, (f"its transcript {transcript} is gone: resuming would start a new"
                         " conversation"), None
    refuse_held(crew, tree, exclude=name)
    return WOULD, f"in {tree}: {command}", command


def respawn(crew, names=None, dry_run=False):
    """Bring back registered sessions whose agent is gone, each resuming its own
    conversation in its tree; return a Respawn per session. Every one is decided
    before any window opens: a new window may take a pane id an old one names."""
    if names:
        for name in names:
            check_name(name, "session name")
            Session(crew, name).meta           # NotFound before anything is done
    look = Look()
    plans = []
    for name in names or all_names(crew):
        try:
            plans.append((name,) + _plan(crew, name, look))
        except BadFile as e:                 # one bad file never stops the others
            plans.append((name, DAMAGED, str(e), None))
        except CrewfileError as e:
            plans.append((name, REFUSED, str(e), None))
    out = []
    for name, action, detail, command in plans:
        if action != WOULD or dry_run:
            out.append(Respawn(name, action, detail))
            continue
        try:
            out.append(_respawn_one(crew, name, command))
        except CrewfileError as e:          # one session's failure never stops the others
            out.append(Respawn(name, REFUSED, f"not respawned: {e}"))
    return out


def _respawn_one(crew, name, command):
    """Bring back one session decided WOULD: the act, under its deliver.lock."""
    sess = Session(crew, name)
    lock = delivery.typing_lock(sess)
    if lock is None:
        return Respawn(name, REFUSED, "a delivery or respawn is in progress")
    with lock:
        if sess.ended():          # `ended: other`: a new life, as the hook would start
            sess = register_again(sess)
        meta = sess.meta
        dead = window.find(meta, "cannot save the dead window's scrollback")
        if dead and dead.dead:
            window.save_scrollback(dead, os.path.join(
                sess.dir, f"{paths.SCROLLBACK}.{records.timestamp()}"))
        # The new window first, then the dead one killed: killed first, the last
        # window of its server, that server exits (tmux's exit-empty) while the
        # new window is asked of it ("server exited unexpectedly", seen loaded).
        target = window.open_agent(sess, command, tmux_session=meta.get("tmux_session"),
                                   cwd=meta["cwd"])
        if dead and dead.dead:
            window.kill(dead)
        rearmed = schedules.rearm(crew, sess.meta)
        armed = f"schedules armed again: {' '.join(rearmed)}" if rearmed else ""
        sess.append("respawned", f"resume {meta['agent_session_id']}" + (armed and f"; {armed}"))
    return Respawn(name, RESPAWNED, f"window {target} in {meta['cwd']}: {command}"
                   + (armed and f" ({armed})"))
