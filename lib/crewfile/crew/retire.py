"""crew-retire: the captain's act when a worker is done (docs/commands/crew-retire.md).
Nothing that is not committed or saved is deleted unless forced. `ended` is
written under deliver.lock (no delivery is half typed) and the session lock
(no turn record slips in between the check and the record).
"""
import os
from types import SimpleNamespace

from crewfile.core import paths, records
from crewfile.core.errors import BadInput, Refused
from crewfile.core.locks import acquire
from crewfile.crew import worktree as wt
from crewfile.nudges.schedules import disarm_ended
from crewfile.session import window
from crewfile.session.delivery import typing_lock
from crewfile.session.reader import state
from crewfile.session.sessions import Session


def _busy(st):
    """Why the agent must not be cut off now, or None."""
    if st["waiting"]:
        return "a permission dialog is up"
    return {"yes": "a turn is running", "no": None}.get(
        st["generating"], "no turn record says whether it is generating")


def _kept_transcript(sess):
    """True if an earlier run kept the agent's transcript (sessions/NAME/transcript.TS)."""
    return any(f.startswith(paths.TRANSCRIPT + ".") for f in paths.list_dir(sess.dir))


def retire(crew, name, keep_worktree=False, force=False):
    """Retire crew session NAME; return what was saved, removed, thrown away."""
    sess = Session(crew, name)
    meta = sess.meta
    kind = meta.get("kind")
    if kind != "crew":
        raise BadInput(f"'{name}' is not a crew session (kind {kind})"
                       + ("; an aside ends with aside-reconcile" if kind == "aside" else ""))
    out = SimpleNamespace(scrollback=None, transcript=None, worktree=meta.get("worktree"),
                          removed=False, branch=meta.get("branch"), head=None, thrown=[],
                          warnings=[], disarmed=[])
    repo = wt.Repo(meta.get("repo"), meta.get("repo")) if meta.get("repo") else None
    removing = bool(out.worktree and repo and not keep_worktree
                    and os.path.lexists(out.worktree))
    if removing:
        dirty = wt.changes(out.worktree)
        if dirty and not force:
            raise Refused(f"{name}'s worktree {out.worktree} has uncommitted changes"
                          f" ({wt.summary(dirty)}): commit them, keep the tree"
                          " (--keep-worktree), or --force to throw them away")
        if dirty:
            out.thrown.append(f"uncommitted changes in {out.worktree} ({wt.summary(dirty)})")
    found = window.find(meta, "cannot save the window's scrollback")
    lock = typing_lock(sess)
    if lock is None:
        raise Refused(f"a delivery to {name} is in progress: try again")
    with lock, acquire(sess.lock_path):
        st = state(sess)         # an `ended` is believed only once the agent is gone (verdict)
        if not st["ended"]:
            busy = _busy(st)
            if busy and not force:
                raise Refused(f"{name} is busy: {busy} (--force cuts it off)")
            if busy:
                out.thrown.append(f"the agent's work in progress ({busy})")
            sess.append_held("ended", "retired" + (" --force" if out.thrown else ""))
    out.disarmed = disarm_ended(crew, meta, "retired", "disarmed: crew-retire ended the session")
    ts = records.timestamp()
    if found:
        out.scrollback = os.path.join(sess.dir, f"{paths.SCROLLBACK}.{ts}")
        window.save_scrollback(found, out.scrollback)
    else:
        out.warnings.append(window.not_found(meta))
    if found or not _kept_transcript(sess):
        out.transcript, why = window.keep_transcript(
            meta, os.path.join(sess.dir, f"{paths.TRANSCRIPT}.{ts}"))
        if why:
            out.warnings.append(why)
    if found:
        window.kill(found)
    if removing:
        wt.remove(repo, out.worktree, force=force)
        out.removed = True
    if out.branch and repo:
        out.head = wt.branch_head(repo, out.branch)
    return out
