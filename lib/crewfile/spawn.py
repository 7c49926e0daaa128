"""crew-spawn: a crew session in one command, in a tree of its own.

Every check comes first (the name, the agent, the prompt's text, the
repository, REF, the branch, the worktree's path, the tree, the session name),
so a refusal leaves nothing behind. Then, in order: the worktree (branch
`crew/NAME` from REF), the registration, the window. A step that fails takes
back the steps before it: a refused registration (a racing spawn of the same
name) removes the worktree and branch; a window that cannot be opened ends the
registration (`ended: spawn failed: ...`, so the name is free again) and
removes the worktree and branch. The branch is only ever deleted right after
this spawn created it, before any agent could commit to it.

The first prompt, if any, goes through delivery.deliver, the one path that
types into a pane, tried until the agent shows an idle prompt.
"""
import os
import time

from . import agents, window
from .errors import CrewfileError, Refused, UsageError
from .sessions import Session, register

PROMPT_WAIT = 60.0        # seconds to wait for the agent's first idle prompt
PROMPT_POLL = 0.1


class Spawned:
    __slots__ = ("target", "tree", "branch", "prompt")

    def __init__(self, target, tree, branch):
        self.target, self.tree, self.branch = target, tree, branch
        self.prompt = None       # None: none asked; else the delivery's (delivered, reason)


def holders(crew, tree, exclude=None, exact=False):
    """[(name, why)] of the other sessions that hold *tree*: not ended, live (or
    their liveness unknown), working in it, above it or inside it. *tree* is
    taken as it is with exact=True (a worktree about to be made, whose
    parents' git top level is not its own), else as its git top level."""
    from .liveness import NO, Probe
    from .nudge import overlap, tree_of
    from .sessions import names
    mine, probe, found = (tree if exact else tree_of(tree)), Probe(), []
    for name in names(crew):
        if name == exclude:
            continue
        sess = Session(crew, name)
        try:
            meta = sess.meta
        except CrewfileError:
            continue
        theirs = tree_of(meta.get("cwd"))
        if theirs is None or not overlap(mine, theirs):
            continue
        live = probe.live(meta)
        if live == NO or sess.ended():
            continue
        found.append((name, f"{name} is live in {theirs}" if live != "unknown" else
                      f"{name} works in {theirs} and its liveness is unknown"))
    return found


def refuse_held(crew, tree, exclude=None, exact=False):
    held = holders(crew, tree, exclude, exact)
    if held:
        raise Refused(f"the tree {tree} is held: {held[0][1]}")


def spawn(crew, name, agent=agents.CLAUDE, ref=None, tmux_session=None, prompt=None,
          worktree=True, cmd=None, cwd=None, prompt_wait=PROMPT_WAIT):
    """Start crew session NAME in a new worktree and window; return a Spawned."""
    from . import delivery, worktree as wt
    from .names import check_name
    check_name(name, "session name")
    agents.check(agent)
    if prompt is not None:
        delivery.check_text(prompt)
    cmd = agents.command(agent, cmd)
    here = os.path.realpath(cwd or os.getcwd())
    sess = Session(crew, name)
    if sess.exists() and not sess.ended():
        raise Refused(f"{name!r} is already registered and not ended")
    extra = {"agent": agent, "agent_cmd": cmd}
    if tmux_session:
        extra["tmux_session"] = tmux_session
    repo = branch = None
    if worktree:
        repo = wt.locate(here)
        commit = wt.resolve(repo, ref or "HEAD")
        branch = wt.branch_for(repo, name)
        if wt.branch_exists(repo, branch):
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

    made_parent = False
    if worktree:
        made_parent = not os.path.isdir(os.path.dirname(tree))
        wt.add(repo, tree, branch, commit)
        tree = os.path.realpath(tree)

    def undo():
        if worktree:
            wt.undo_add(repo, tree, branch, made_parent)

    try:
        sess = register(crew, name, kind="crew", cwd=tree, extra=extra)
    except BaseException:
        undo()
        raise
    try:
        target = window.open_agent(sess, cmd, tmux_session=tmux_session, cwd=tree)
    except BaseException as e:
        try:
            sess.append("ended", f"spawn failed: {e}")
        finally:
            undo()
        raise
    out = Spawned(target, tree, branch)
    if prompt is not None:
        out.prompt = first_prompt(sess, prompt, prompt_wait)
    return out


def first_prompt(sess, text, wait=PROMPT_WAIT):
    """Deliver *text* once the agent shows an idle, empty prompt: (delivered, reason).

    Tried again while the answer is one a starting agent gives (no prompt on
    the screen yet, a turn or state not settled, another delivery); given up
    at once when the agent is gone or text was left typed on its prompt line.
    """
    from . import delivery
    final = (delivery.NOT_LIVE, delivery.FAILED, delivery.ABORTED, delivery.ASIDE)
    deadline = time.monotonic() + wait
    while True:
        ok, reason = delivery.deliver(sess, text)
        if ok or delivery.code_of(reason) in final or time.monotonic() > deadline:
            return ok, reason
        time.sleep(PROMPT_POLL)
