"""Asides: sessions the captain drives, which only the captain can conclude.

The rules: docs/files/asides.md. Every decision is taken under the session
lock, the one every captain record is appended under, so a captain input is
either before the decision (and counts) or after it.
"""
import os
import signal
import stat
import time

from crewfile.asides import evidence, reports
from crewfile.asides.captain import PROBLEM, clip, parse_captain_input
from crewfile.asides.evidence import CAPTAIN, CAPTAIN_DONE, INPUT_REFUSED, SELF_CONCLUSION
from crewfile.core import paths, records
from crewfile.core.errors import BadInput, CaptainPresent, CrewfileError, Refused, SystemFailure
from crewfile.core.locks import hold
from crewfile.core.names import check_name
from crewfile.core.text import unescape
from crewfile.session import window
from crewfile.session.prompt import captain_at
from crewfile.session.sessions import Session, register
from crewfile.session.verdict import LIVE, NO, liveness
from crewfile.session.delivery import captain_quiet
from crewfile.core.notify import DirWatch

MAX_REPORT = 16 << 20
NOT_CONCLUDED = "the captain has not concluded this aside; keep the conversation going"
# The states scan() derives.
OPEN, CAPTAIN_CONCLUDED, CONCLUDED, CLOSED = "open", "captain-done", "concluded", "closed"


def checkpoint(step):
    """Crash here if CREWFILE_CRASH_AT names this step (a real SIGKILL, for tests)."""
    if os.environ.get("CREWFILE_CRASH_AT") == step:
        os.kill(os.getpid(), signal.SIGKILL)


class Scan:
    """Where an aside stands. `acts`: this run's captain-done records, newest
    first (claims: `believed` judges them). `forged`: (record, why) for the
    newest `closed` or `concluded` not believed, left out of the state."""
    state, act, concluded, closed, since, forged = OPEN, None, None, None, None, None


def scan(sess, stats=None):
    """The aside's state (docs/files/asides.md, *States*). `since`: the
    timestamp the walk stopped at; the current conclusion, if any, is newer."""
    out = Scan()
    run = []                # newest first, back to the captain's newest input
    for rec in sess.backwards(stats):
        if rec.kind in ("registered", CAPTAIN):
            out.since, out.act = rec.ts, (rec if rec.kind == CAPTAIN else None)
            break
        run.append(rec)
    out.acts = [rec for rec in run if rec.kind == CAPTAIN_DONE]
    out.act = out.acts[0] if out.acts else out.act
    for i, rec in enumerate(run):
        if rec.kind == "closed":
            why = _closed_why(sess, rec, [r for r in run[i + 1:] if r.kind == CAPTAIN_DONE],
                              out.since)
            if why is None:
                out.state, out.closed = CLOSED, rec
                return out
            out.forged = out.forged or (rec, why)
    for rec in run:
        if rec.kind == "concluded":         # the newest believed one counts
            why = _report_why(sess, rec.text, since=out.since)
            if why is None:
                out.concluded = rec
                break
            out.forged = out.forged or (rec, why)
    if out.acts:
        out.state = CONCLUDED if out.concluded else CAPTAIN_CONCLUDED
    else:
        out.concluded = None
    return out


def _report_why(sess, path, states=(paths.REPORT_NEW, paths.REPORT_CUR), since=None):
    """None if *path* names a report of this aside where aside-conclude put it (in
    one of *states*), delivered at or after *since* (the captain's newest input:
    an older report belongs to an earlier conclusion); else why not."""
    base = os.path.basename(path)
    found = reports.parse_name(base)
    if not os.path.isabs(path) or found is None or found[0] != sess.name:
        return "its text names no report of this aside"
    if since is not None and records.timestamp(found[1]) < since:     # one width: sorts as time
        return f"its report {base} was delivered before the captain's newest input"
    # By its name in this crew's maildir, not by the path's spelling: the
    # crew directory may be named through a link by one command and not another.
    for state in states:
        try:
            if stat.S_ISREG(os.lstat(sess.crew.sub(paths.REPORTS, state, base)).st_mode):
                return None
        except OSError:
            continue
    return f"its report {base} is not in " + " or ".join(f"reports/{s}/" for s in states)


def concluded_event_why(crew, name, text):
    """Why an event line's `concluded` (its escaped TEXT) is not believed, or None:
    for the readers that act on an event alone (wake-filter, crew-notify)."""
    return _report_why(Session(crew, name), unescape(text))


def _closed_why(sess, rec, acts, since):
    """None if `closed` *rec* is believed, else why not. The evidence of *acts*
    (the captain-done before it, since the captain's newest input *since*) is
    only looked up, not judged again: the transcript has moved on since."""
    if not os.path.isabs(rec.text):
        return None if not sess.meta.get("tmux") else "it names no report, and a window is recorded"
    why = _report_why(sess, rec.text, (paths.REPORT_CUR,), since=since)
    if why or any(evidence.replayed(act, since) is None and evidence.evidence_of(sess, act) is not None
                  for act in acts):
        return why
    return "no captain-done record with its evidence in acts comes before it"


def audit_claims(sess, claims):
    """Say, once each, the *claims* (evidence.unjudged's) not believed. Run by
    the agent's own hooks: at once after the tool call that appended one."""
    forged, ended = [], [rec for rec in claims if rec.kind == "ended"]
    found = liveness(sess.meta) if ended else None
    if found is not None and found.live == LIVE:
        forged += [(rec, f"its agent process {found.agent.pid} is live") for rec in ended]
    if sess.meta.get("kind") == "aside" and any(rec.kind != "ended" for rec in claims):
        st = scan(sess)
        if st.forged is not None:
            forged.append(st.forged)
    if forged:
        with hold(sess.lock_path):
            for rec, why in forged:
                _say_once(sess, rec, why)


def _say_once(sess, rec, why):
    """Append `problem: record not believed: KIND of TS: WHY` unless one is
    already there after *rec*; the caller holds the session lock."""
    text = f"record not believed: {rec.kind} of {rec.ts}: {why}"
    for newer in sess.backwards():
        if newer.ts <= rec.ts and newer.line() == rec.line():
            break
        if newer.kind == PROBLEM and newer.text == text:
            return                          # said already
    sess.append_held(PROBLEM, text)


def believed(sess, st):
    """None if a captain-done record of the scan's current run is believed, else why not."""
    why = None
    for rec in st.acts:
        w = evidence.verdict(sess, rec, st.since)
        if w is None:
            return None
        why = why or w
    return why or "there is no captain-done record"


def _unbelieved(sess, why):
    """Say *why* (if any) as a `problem`, under the caller's session lock; return it."""
    if why:
        sess.append_held(PROBLEM, f"{SELF_CONCLUSION}: a captain-done record is not"
                                  f" believed: {why}")
    return why


def audit(sess):
    """Report an unjudged captain-done record that is not believed; return why, or None.
    Run by the agent's own hooks, so a hand-made record is a problem at once; one
    per attempt (evidence.unjudged stops at the newest such problem)."""
    with hold(sess.lock_path):
        since = scan(sess).since
        for rec in evidence.unjudged(sess):
            why = _unbelieved(sess, evidence.verdict(sess, rec, since))
            if why:
                return why
    return None


def aside_session(crew, name):
    """The registered aside NAME (NotFound if unregistered, BadInput if not an aside)."""
    sess = Session(crew, name)
    kind = sess.meta.get("kind")
    if kind != "aside":
        raise BadInput(f"{name!r} is not an aside (kind {kind})")
    return sess


def say(crew, name, text):
    """A captain input to aside NAME from a command (an agent without a prompt hook); the kind."""
    kind, note = parse_captain_input(text)
    _caller_act(crew, name, kind, note, "aside-say")
    return kind


def captain_done(crew, name, note=None):
    """The captain's explicit conclusion of aside NAME, from a command outside the agent."""
    _caller_act(crew, name, CAPTAIN_DONE, clip(note or ""), "aside-done")


def _caller_act(crew, name, kind, note, command):
    """Record the captain act `kind: note` in the open aside NAME; Refused (and a
    problem record) unless this process may act as the captain (evidence.caller_verdict,
    hands): its evidence is `caller WHERE keys SECOND`."""
    sess = aside_session(crew, name)
    if scan(sess).state == CLOSED:
        raise Refused(f"aside {name!r} is closed")
    why, where = evidence.caller_verdict(sess.meta)
    if not why:
        why, keys = evidence.hands(sess, None if where == "tmux" else where)
    if why:
        what = SELF_CONCLUSION if kind == CAPTAIN_DONE else INPUT_REFUSED
        sess.append(PROBLEM, f"{what}: {command}: {why}")
        raise Refused(f"not believed to be the captain: {why}")
    if kind == CAPTAIN:
        sess.append(kind, note)
    else:
        evidence.record_act(sess, kind, note, f"{evidence.CALLER} {where} {keys}")


# --- opening ------------------------------------------------------------------

def open_aside(crew, name, topic=None, cmd=None, tmux_session=None, primary=None):
    """Register aside NAME, then (so its first hook finds it) start its agent
    in a new tmux window; return the window target."""
    check_name(name, "aside name")
    if primary:
        check_name(primary, "primary name")
    cmd = cmd or os.environ.get("CREWFILE_AGENT_CMD") or "claude"
    cwd = os.path.realpath(os.getcwd())
    sess = Session(crew, name)
    if sess.exists() and not sess.ended():
        raise Refused(f"{name!r} is already open")
    extra = {k: v for k, v in (("primary", primary), ("topic", topic)) if v}
    sess = register(crew, name, kind="aside", cwd=cwd, extra=extra)
    try:
        target = window.open_agent(sess, cmd, tmux_session=tmux_session, cwd=cwd)
    except CrewfileError as e:
        sess.append("closed", f"window not opened: {e}")
        raise
    sess.append_lines([records.new_line("opened", topic or ""),
                       records.new_line("paused", "awaiting captain")])
    return target


# --- the agent's hand-over ----------------------------------------------------

def conclude(crew, name, data):
    """The agent hands over its report; return (path in reports/new, adopted):
    a report an earlier run published but was killed before recording is
    adopted, not delivered twice (docs/commands/aside-conclude.md)."""
    sess = aside_session(crew, name)
    if not data.strip():
        raise BadInput("the report is empty")
    if len(data) > MAX_REPORT:
        raise BadInput(f"the report is larger than {MAX_REPORT} bytes")
    with hold(sess.lock_path):
        st = scan(sess)
        if st.forged:
            _say_once(sess, *st.forged)          # a `problem`: it wakes the primary
        if st.state == CLOSED:
            raise Refused(f"aside {name!r} is closed")
        if st.state == CONCLUDED:
            raise Refused(f"already concluded: the report is {st.concluded.text}")
        if st.state == OPEN:
            sess.append_held(PROBLEM, SELF_CONCLUSION)
            raise Refused(NOT_CONCLUDED)
        why = _unbelieved(sess, believed(sess, st))
        if why:
            raise Refused(f"the captain has not concluded this aside: its captain-done record"
                          f" is not believed ({why}); keep the conversation going")
        path, adopted = _orphan(crew, name, st.since), True
        if path is None:
            path, adopted = reports.deliver(crew, name, data,
                                            checkpoint=lambda s: checkpoint("conclude:" + s)), False
        checkpoint("conclude:delivered")
        sess.append_held("concluded", path)
    return path, adopted


def _orphan(crew, name, since):
    """The newest report of NAME in new/ delivered at or after timestamp *since*, or None."""
    # Record timestamps have one fixed width: as strings they sort as times
    # (and comparing them needs no calendar import on this path).
    found = [r for r in reports.listing(crew, aside=name, states=(paths.REPORT_NEW,))
             if not r.error and (since is None or records.timestamp(r.time) >= since)]
    return found[-1].path if found else None


# --- the primary's reconcile ----------------------------------------------------

class Reconciled:
    __slots__ = ("report", "scrollback", "transcript", "warning")

    def __init__(self):
        self.report = self.scrollback = self.transcript = self.warning = None

    def warn(self, why):
        if why:
            self.warning = f"{self.warning}; {why}" if self.warning else why


def _keep_transcript(sess, out):
    """Keep the agent's transcript beside the report in cur/, unless kept already."""
    path = out.report + paths.TRANSCRIPT_SUFFIX
    if os.path.lexists(path):
        out.transcript = path
        return
    out.transcript, why = window.keep_transcript(sess.meta, path)
    out.warn(why)


def captain_at_window(sess, found, since=None, quiet=None):
    """None when the captain is surely not at the aside's window, else why
    (prompt.captain_at, the one captain check; a dead pane takes no keys)."""
    if not found or found.dead:
        return None
    who, why = captain_at(found.pane, found.socket,
                          within=captain_quiet() if quiet is None else quiet, since=since,
                          meta=sess.meta)
    return None if who == NO else str(why)


def _refuse_held(sess, found, since, quiet, what="nothing changed"):
    """CaptainPresent unless the captain is surely not at the aside's window."""
    why = captain_at_window(sess, found, since, quiet)
    if why:
        raise CaptainPresent(f"the captain may be about to reopen {sess.name!r} ({why}): {what};"
                             f" aside-reconcile --wait does it once the window is quiet")


def _after(rec):
    """The first whole second after record *rec*: keys from then on came after it
    (client_activity has one-second resolution; the act's own Enter is before)."""
    return int(rec.time) + 1


def reconcile(crew, name, quiet=None, since_act=True):
    """Take in aside NAME's report, keep its conversation, close it, then kill
    its window: each step safe to redo (docs/commands/aside-reconcile.md).
    Keys count from the conclusion on (since_act) or, once a wait has seen the
    window quiet, only in the last *quiet* seconds."""
    sess = aside_session(crew, name)
    out = Reconciled()
    with hold(sess.lock_path):
        st = scan(sess)
        if st.forged:
            _say_once(sess, *st.forged)          # a `problem`: it wakes the primary
        pane = window.find(sess.meta, "cannot save the window's scrollback")
        if st.state == CLOSED:
            since = _after(st.closed) if since_act else None
            _refuse_held(sess, pane, since, quiet, "it is closed, its window left open")
            out.report = st.closed.text if os.path.isabs(st.closed.text) else None
            if out.report:
                out.scrollback = out.report + paths.SCROLLBACK_SUFFIX
                if pane and not os.path.lexists(out.scrollback):
                    window.save_scrollback(pane, out.scrollback)
                _keep_transcript(sess, out)
        elif st.state != CONCLUDED:
            why = ("the captain concluded it but the agent has not handed over its report"
                   if st.state == CAPTAIN_CONCLUDED else NOT_CONCLUDED.split(";")[0])
            raise Refused(f"{name!r} is not concluded: {why}")
        else:
            why = _unbelieved(sess, believed(sess, st))
            if why:
                raise Refused(f"{name!r} is not concluded: its captain-done record is not"
                              f" believed ({why})")
            since = _after(st.act) if since_act else None
            _refuse_held(sess, pane, since, quiet)
            for r in reports.listing(crew, aside=name, states=(paths.REPORT_NEW,)):
                if not r.error:                    # a planted link stays for report-ls to show
                    reports.accept(crew, r.path)   # reports of voided conclusions, too
            out.report = reports.accept(crew, st.concluded.text)
            checkpoint("reconcile:moved")
            out.scrollback = out.report + paths.SCROLLBACK_SUFFIX
            if pane:
                window.save_scrollback(pane, out.scrollback)
            elif not os.path.lexists(out.scrollback):
                out.scrollback = None
                out.warn(window.not_found(sess.meta))
            checkpoint("reconcile:scrollback")
            _keep_transcript(sess, out)
            checkpoint("reconcile:transcript")
            sess.append_held("closed", out.report)
            checkpoint("reconcile:closed")
    if pane:
        pane = window.find(sess.meta, "cannot close the window")
        # The captain may have come back in the last moment: then the window stays.
        _refuse_held(sess, pane, since, quiet,
                     f"it is closed (report {out.report}), its window left open")
        if pane:
            window.kill(pane)
    return out


WAIT_DEFAULT = 600.0              # seconds aside-reconcile --wait waits at most
WAIT_INTERVAL = 1.0               # seconds between looks at the window while waiting


def reconcile_wait(crew, name, timeout=WAIT_DEFAULT, say=None):
    """reconcile() once the captain has left the window alone captain_quiet()
    seconds in a row (docs/commands/aside-reconcile.md); *say* gets each new reason."""
    quiet = captain_quiet()
    deadline = time.monotonic() + timeout
    said = None
    while True:
        try:
            return reconcile(crew, name, quiet, since_act=said is None)
        except CaptainPresent as e:
            if time.monotonic() >= deadline:
                raise
            if say and str(e) != said:
                say(str(e))
                said = str(e)
        except Refused as e:
            if said is not None and scan(aside_session(crew, name)).state == OPEN:
                raise Refused(f"{name!r} was reopened: the captain sent input after the"
                              f" conclusion, which is void; nothing moved or killed") from None
            raise
        _await_quiet(aside_session(crew, name), deadline, quiet)


def _await_quiet(sess, deadline, quiet):
    """Return once the captain has been away *quiet* seconds in a row, the
    aside is not concluded any more, or the deadline passed."""
    watch = DirWatch()
    watch.add(sess.dir)
    try:
        away_since = None
        while time.monotonic() < deadline:
            changed = watch.wait(min(WAIT_INTERVAL, max(0.0, deadline - time.monotonic())))
            if changed and scan(sess).state not in (CONCLUDED, CLOSED):
                return
            try:
                held = captain_at_window(sess, window.find(sess.meta, "cannot look"),
                                         quiet=quiet)
            except SystemFailure:
                held = True                   # tmux cannot be asked: unsure, keep waiting
            if held:
                away_since = None
            elif away_since is None:
                away_since = time.monotonic()
            elif time.monotonic() - away_since >= quiet:
                return
    finally:
        watch.close()
