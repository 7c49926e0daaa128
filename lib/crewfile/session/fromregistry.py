"""Registering a session, or repairing its registration, from the agent CLI's
own registry of running sessions: session-add --from-registry and --adopt
(docs/commands/session-add.md). The registry is the agent's own writing: it
only names a candidate, which crewfile's own probes (/proc, the pane's
process tree) check before anything is recorded.
"""
import os

from crewfile.agents import registry
from crewfile.core import liveness as procs
from crewfile.core.errors import NotFound, Refused
from crewfile.core.locks import hold
from crewfile.session import sessions, tmux

AGENT = "claude"       # the one CLI whose registry is read (agents/registry.py)


def find(where, pid=None, target=None, job=None, env=None):
    """(the Entry, the pane fields for meta or {}) of the running agent named
    by *job* (a background session's or conversation's id), *pid*, the pane
    *target*, or else the caller's nearest ancestor with an entry."""
    if job is not None:
        entry = _background(where, job)
    elif pid is not None:
        entry = _read(pid, where)
        if entry is None:
            raise NotFound(f"no entry for process {pid} in the agent registry {where}")
    elif target is not None:
        entry = _in_pane(where, target, env)
    else:
        entry = _ancestor(where)
    _check_alive(entry)
    if entry.background:
        return entry, {}
    env = os.environ if env is None else env
    own = None
    if job is None and pid is None and target is None:
        # Run from the agent's own shell: this command's pane is the agent's,
        # a pane of $TMUX's server (run from anywhere else, $TMUX_PANE is the
        # captain's pane, and says nothing of the agent).
        own = env.get("TMUX_PANE")
        env = sessions.tmux_env(env)
    pane = target or entry.pane or own
    if not pane:
        return entry, {}
    fields = sessions.pane_fields(pane, env)
    if fields.get("tmux_server") is None:
        raise Refused(f"no tmux pane {pane} on {fields['tmux_socket']} for agent process"
                      f" {entry.pid}")
    pane_pid = tmux.pane_info(fields["tmux"], socket=fields["tmux_socket"])[0].pid
    if pane_pid is None or not procs.descends_from(entry.pid, pane_pid):
        raise Refused(f"agent process {entry.pid} does not run in tmux pane {fields['tmux']}")
    return entry, fields


def _background(where, job):
    found = [e for e in registry.entries(where)
             if e.background and job in (e.job_id, e.session_id)]
    live = [e for e in found if procs.alive(e.pid, e.start)]
    if not live:
        said = " (its entry is stale: the process is gone)" if found else ""
        raise NotFound(f"no running background session {job} in the agent registry"
                       f" {where}{said}")
    return live[-1]


def _in_pane(where, target, env):
    found = tmux.pane_info(target, env=env)
    if found is None or found[0].pid is None:
        raise NotFound(f"no tmux pane {target}")
    pane = found[0]
    inside = [e for e in registry.entries(where)
              if procs.alive(e.pid, e.start) and procs.descends_from(e.pid, pane.pid)]
    if not inside:
        raise NotFound(f"no agent of the registry {where} runs in tmux pane {pane.id}")
    if len(inside) > 1:
        raise Refused(f"{len(inside)} agents of the registry run in tmux pane {pane.id}"
                      f" (processes {', '.join(str(e.pid) for e in inside)}): name one with"
                      " --pid")
    return inside[0]


def _ancestor(where):
    for st in procs.ancestors(os.getpid()):
        entry = _read(st.pid, where)
        if entry is not None:
            return entry
    raise NotFound(f"no agent of the registry {where} among this command's ancestors"
                   " (name it with --tmux, --pid or --adopt)")


def _read(pid, where):
    try:
        return registry.read(pid, where)
    except registry.Unreadable as e:
        raise Refused(f"the registry's entry cannot be read: {e}") from None


def _check_alive(entry):
    st = procs.stat(entry.pid)
    if st is None or st.gone:
        raise Refused(f"the registry's entry {entry.path} is stale: process {entry.pid}"
                      " is gone")
    if entry.start is not None and entry.start != st.start:
        raise Refused(f"the registry's entry {entry.path} is stale: process {entry.pid} is"
                      " another process now")
    entry.start = st.start


def register(crew, name, where, pid=None, target=None, job=None, env=None, kind="crew",
             exempt=None, cwd=None, session_key=None, user=None):
    """Register session NAME from the registry, or repair its registration;
    return (the Session, "registered" or "repaired")."""
    entry, pane = find(where, pid, target, job, env)
    fields = {**sessions.agent_fields(entry.pid, entry.start), "agent": AGENT,
              "agent_registry": where, **pane}
    if entry.session_id:
        fields["agent_session_id"] = entry.session_id
    if entry.job_id:
        fields["agent_job"] = entry.job_id
    if cwd or entry.cwd:
        fields["cwd"] = os.path.realpath(cwd or entry.cwd)
    sess = sessions.Session(crew, name)
    if sess.exists() and not sess.ended():
        return _repair(sess, entry, fields), "repaired"
    sess = sessions.register(crew, name, kind=kind, exempt=exempt, session_key=session_key,
                             user=user, extra=fields)
    return sess, "registered"


def _repair(sess, entry, fields):
    with hold(sess.lock_path):
        meta = dict(sess.reread().meta)
        if sess.ended():
            raise Refused(f"session '{sess.name}' has ended meanwhile: register it again")
        pid, start, alive = sess.recorded_agent()
        same = (pid, start) == (entry.pid, entry.start)
        if alive and not same:
            raise Refused(f"session '{sess.name}' has a live agent, process {pid}, that is not"
                          f" the registry's process {entry.pid}")
        here = (fields.get("tmux"), fields.get("tmux_server"))
        same_pane = bool(here[0]) and (meta.get("tmux"), meta.get("tmux_server")) == here
        same_talk = bool(entry.session_id) and meta.get("agent_session_id") == entry.session_id
        # A background session is its job: the daemon starts a killed one again
        # under the same job id (its entry may name the conversation a moment late).
        same_job = bool(entry.job_id) and meta.get("agent_job") == entry.job_id
        if not (same or same_pane or same_talk or same_job):
            raise Refused(f"session '{sess.name}' is registered and not ended, and the registry's"
                          f" process {entry.pid} is neither in its pane, its conversation nor"
                          f" its job")
        meta.update(fields)
        sessions.write_meta(sess.meta_path, meta)
        said = f"from the agent registry: agent process {entry.pid}"
        if entry.session_id:
            said += f", conversation {entry.session_id}"
        sess.append_held("registered", said)
    sess.reread()
    return sess
