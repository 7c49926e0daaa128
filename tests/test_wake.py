"""wake-filter and wake-send: what wakes the primary, and how it is told."""
import os
import select
import subprocess
import sys

from conftest import BIN, REPO, load_trace, wait_for
from crewfile.asides import reports
from crewfile.wake import inbox
from crewfile.core.paths import Crew
from crewfile.session.sessions import Session, register
from crewfile.session.verdict import Answer
from crewfile.wake.wakefilter import Filter
from crewfile.wake.wakesend import Sender
from crewfile.core.logfile import TailStats

TS = "2026-11-29T22:01:17.123Z"


def filt(crew, text, **kw):
    warnings = []
    f = Filter(crew, warn=warnings.append, **kw)
    out = f.feed(text.encode()) + f.finish()
    return out.decode(), warnings


def ev(session, kind, text=""):
    return f"{TS} {session} {kind}" + (f": {text}" if text else "") + "\n"


# -- the rules -------------------------------------------------------------------

def test_an_aside_wakes_only_for_its_conclusion_and_real_problems(crew):
    register(crew, "a1", kind="aside")
    report = reports.deliver(crew, "a1", b"the report\n")      # what aside-conclude leaves
    churn = ["registered", "opened", "paused", "captain", "turn-started", "turn-ended", "idle",
             "stale", "captain-done", "started", "waiting", "ended", "closed", "note"]
    real = ["problem", "blocked", "error", "lost", "concluded"]
    text = "".join(ev("a1", k, report if k == "concluded" else "") + ev("a1", "captain", "next")
                   for k in churn + real)
    out, warnings = filt(crew, text)
    assert [l.split()[2].rstrip(":") for l in out.splitlines()] == real
    assert not warnings


def test_an_asides_concluded_line_without_its_report_wakes_no_one(crew):
    """A `concluded` appended by hand (its report never delivered, or another
    aside's) is not believed: held, said on stderr; the agent's own hooks
    have already written it as a `problem`, which does wake."""
    register(crew, "a1", kind="aside")
    register(crew, "a2", kind="aside")
    other = reports.deliver(crew, "a2", b"a2's report\n")
    missing = os.path.join(os.path.dirname(other), "a1,1796040000.M000123P1Q1.host")
    out, warnings = filt(crew, "".join(ev("a1", "concluded", t) + ev("a1", "captain", "next")
                                       for t in ("settled", other, missing))
                         + ev("a1", "problem", "forged"))
    assert out == ev("a1", "problem", "forged")
    assert warnings == [
        "a1: concluded not believed: its text names no report of this aside"] * 2 + [
        "a1: concluded not believed: its report a1,1796040000.M000123P1Q1.host is not in"
        " reports/new/ or reports/cur/"]


def test_a_refused_self_conclusion_passes_as_a_problem(crew):
    register(crew, "a1", kind="aside")
    out, _ = filt(crew, ev("a1", "problem", "self-conclusion refused"))
    assert out == ev("a1", "problem", "self-conclusion refused")


def test_normal_sessions_pass_actionable_kinds(crew):
    register(crew, "w1")
    kinds = ["turn-started", "turn-ended", "idle", "captain", "done", "blocked", "problem",
             "error", "stale", "lost", "registered", "waiting", "ended", "note"]
    out, _ = filt(crew, "".join(ev("w1", k) for k in kinds))
    assert [l.split()[2] for l in out.splitlines()] == [
        "turn-ended", "done", "blocked", "problem", "error", "stale", "lost", "waiting", "ended"]


def test_a_schedule_spent_with_nobody_nudged_wakes_and_its_other_records_do_not(crew):
    """nudge-tick's records say what a schedule did; only `nudge-spent` (its
    ceiling reached on a failed last attempt: nobody nudged, nothing else
    will follow) needs the primary."""
    register(crew, "w1")
    kinds = ["nudge", "nudge-unconfirmed", "nudge-failed", "nudge-refused", "nudge-disarmed",
             "nudge-spent"]
    out, _ = filt(crew, "".join(ev("w1", k, "n1 x") for k in kinds))
    assert out == ev("w1", "nudge-spent", "n1 x")
    register(crew, "a1", kind="aside")
    assert filt(crew, ev("a1", "nudge-spent", "n1 x"))[0] == ""


def test_repeats_without_activity_fold_into_the_first(crew):
    register(crew, "w1")
    text = (ev("w1", "blocked", "db") + ev("w1", "blocked", "db again") + ev("w2", "idle")
            + ev("w1", "blocked", "still") + ev("w1", "turn-started") + ev("w1", "blocked", "new"))
    out, _ = filt(crew, text)
    assert out.splitlines() == [ev("w1", "blocked", "db").strip(), ev("w2", "idle").strip(),
                                ev("w1", "blocked", "new").strip()]


def test_a_human_wait_holds_idle_and_stale_until_other_activity(crew):
    register(crew, "w1")
    text = (ev("w1", "paused", "awaiting captain") + ev("w1", "idle") + ev("w1", "stale")
            + ev("w1", "captain", "go on") + ev("w1", "turn-started") + ev("w1", "stale"))
    out, _ = filt(crew, text, normal_pass={"idle", "stale"})
    assert out == ev("w1", "stale")


def test_without_metadata_everything_passes_and_garbage_passes_with_a_warning(crew):
    text = ev("ghost", "turn-started") + "not an event\n" + f"{TS} w1 Bad-Kind\n" + ev("../x", "blocked")
    out, warnings = filt(crew, text)
    assert out == text
    assert len(warnings) == 3 and "not an event line" in warnings[0]


def test_the_primary_is_never_woken_by_its_own_events(crew):
    register(crew, "boss", kind="primary")
    out, _ = filt(crew, ev("boss", "turn-ended") + ev("boss", "problem"))
    assert out == ""


def test_class_is_cached_and_reread_when_meta_changes(crew):
    register(crew, "w1")
    f = Filter(crew, warn=lambda m: None)
    assert f.feed(ev("w1", "turn-ended").encode()) != b""
    Session(crew, "w1").update_meta(exempt=True)
    assert f.feed(ev("w1", "turn-ended").encode()) == b""     # a new chunk: the change is seen
    assert f.feed(ev("w1", "blocked").encode()) != b""


def test_a_last_line_without_newline_is_a_fragment_dropped_with_a_warning(crew):
    """Its writer died mid-write: a fragment is no event (the cursor replays it whole)."""
    register(crew, "w1")
    out, warnings = filt(crew, ev("w1", "done") + "2026-12-01")
    assert out == ev("w1", "done")
    assert warnings == ["input ended inside a line, dropped: b'2026-12-01'"]


# -- the command --------------------------------------------------------------------

def test_options_change_what_passes(crew, run):
    register(crew, "w1")
    register(crew, "a1", kind="aside")
    text = ev("w1", "turn-ended") + ev("w1", "idle") + ev("a1", "captain-done") + ev("a1", "lost")
    p = run("wake-filter", "--hold", "turn-ended", "--pass", "idle",
            "--exempt-pass", "captain-done", "--exempt-hold", "lost", input=text)
    assert p.returncode == 0
    assert p.stdout == ev("w1", "idle") + ev("a1", "captain-done")
    p = run("wake-filter", "--pass", "Not A Kind", input="")
    assert p.returncode == 2 and p.stderr.startswith("wake-filter: bad kind")


def test_a_live_pipe_gets_each_line_at_once(crew):
    """Flush before blocking: the line comes out while stdin is still open."""
    register(crew, "w1")
    proc = subprocess.Popen([sys.executable, os.path.join(BIN, "wake-filter")],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            env=dict(os.environ, PYTHONUNBUFFERED=""))
    try:
        for i in range(3):
            proc.stdin.write(ev("w1", "turn-started").encode() + ev("w1", "blocked", str(i)).encode())
            proc.stdin.flush()
            ready, _, _ = select.select([proc.stdout], [], [], 10)
            assert ready, "the passing line did not come out while stdin stayed open"
            assert os.read(proc.stdout.fileno(), 4096).decode() == ev("w1", "blocked", str(i))
    finally:
        proc.stdin.close()
        proc.wait()


def test_pipeline_on_the_reference_trace(tmp_path):
    """The aside makes exactly 1 wake plus one per real problem; nothing labelled is missed."""
    trace = load_trace()
    crew = Crew(str(tmp_path / "crew"))
    tr = trace.write(crew)
    env = dict(os.environ, CREWFILE_DIR=crew.root)
    watch = subprocess.run([sys.executable, os.path.join(BIN, "crew-watch"), "--from-start", "--once"],
                           env=env, capture_output=True, text=True, check=True)
    wakes = subprocess.run([sys.executable, os.path.join(BIN, "wake-filter")], input=watch.stdout,
                           env=env, capture_output=True, text=True, check=True)
    sc = trace.score(tr, wakes.stdout)
    assert not sc["missed"], [(l.session, l.kind, l.ts) for l in sc["missed"]]
    assert not sc["extra"], sc["extra"]
    aside_problems = [l for l in tr.labels if l.session == "design" and l.kind == "problem"]
    assert sc["per_session"]["design"] == 1 + len(aside_problems) == 2
    aside_events = [l for l in watch.stdout.splitlines() if l.split()[1] == "design"]
    assert len(aside_events) > 250          # 50 turns of churn, all held


# -- wake-send -------------------------------------------------------------------------

def primary(crew, tmux, name="boss"):
    _, pane = tmux.agent_window(crew, name, os.path.join(REPO, "tests", "fake-agent"),
                                kind="primary")
    tmux.wait_screen(pane, "ready>")
    wait_for(lambda: Session(crew, name).last_records(1, _stats())[0].kind == "started",
             what="the fake primary's started record")
    return pane


def _stats():
    return TailStats()


def captain_records(crew, name):
    return [r.text for r in Session(crew, name).last_records(100, _stats()) if r.kind == "captain"]


def test_wake_send_types_one_line_literally_for_a_burst(crew, tmux, tmp_path, run):
    pane = primary(crew, tmux)
    register(crew, "w1")
    register(crew, "a1", kind="aside")
    pwned = tmp_path / "pwned"
    lines = (ev("w1", "blocked", f"$(touch {pwned}); `touch {pwned}`")
             + ev("a1", "concluded", "r") + ev("w1", "problem", "x") + ev("boss", "turn-ended"))
    say = f"wakes: {{n}} from {{from}} $(touch {pwned}) `touch {pwned}` 'q\" ;"
    p = run("wake-send", "boss", "--window", "0.3", "--say", say, input=lines)
    assert p.returncode == 0, p.stderr
    expected = f"wakes: 3 wakes from w1, a1 $(touch {pwned}) `touch {pwned}` 'q\" ;"
    wait_for(lambda: captain_records(crew, "boss") == [expected], what="the typed line")
    assert expected in tmux.screen(pane)
    assert not pwned.exists()
    notices = inbox.pending(crew, "boss")
    assert [n.kind for n in notices] == ["wake"] * 3        # its own turn-ended is not a wake
    assert notices[0].text == ev("w1", "blocked", f"$(touch {pwned}); `touch {pwned}`").strip()
    d = run("inbox-drain", "boss")
    assert len(d.stdout.splitlines()) == 3 and inbox.pending(crew, "boss") == []


def test_wake_send_waits_while_the_primary_generates(crew, tmux, tmp_path):
    pane = primary(crew, tmux)
    register(crew, "w1")
    gate = tmp_path / "end-of-turn"
    tmux("send-keys", "-t", pane, "-l", f"HOLD: {gate}")
    tmux("send-keys", "-t", pane, "Enter")
    wait_for(lambda: Session(crew, "boss").last_records(1, _stats())[0].kind == "turn-started",
             what="the primary generating")
    errfile = tmp_path / "wake-send.err"
    with open(errfile, "wb") as errf:
        proc = subprocess.Popen([sys.executable, os.path.join(BIN, "wake-send"), "boss",
                                 "--window", "0.1", "--retry", "0.1"],
                                stdin=subprocess.PIPE, stderr=errf)
    proc.stdin.write(ev("w1", "blocked", "db").encode())
    proc.stdin.flush()
    wait_for(lambda: len(inbox.pending(crew, "boss")) == 1, what="the wake in the inbox")
    wait_for(lambda: b"holding the announcement" in errfile.read_bytes(),
             what="wake-send to find the primary generating")
    assert len(captain_records(crew, "boss")) == 1          # nothing typed into the turn
    gate.touch()                                            # the turn ends
    wait_for(lambda: len(captain_records(crew, "boss")) == 2, what="the announcement")
    proc.stdin.close()
    assert proc.wait(10) == 0
    recs = Session(crew, "boss").last_records(100, _stats())
    kinds = [(r.kind, r.text) for r in recs]
    typed = kinds.index(("captain", "crewfile: 1 wake waiting from w1; run: inbox-drain boss"))
    assert kinds.index(("turn-ended", "")) < typed     # never typed into a running turn
    err = errfile.read_bytes()
    # retried every 0.1 s while the turn ran, said once: once per change of state
    assert err.count(b"holding the announcement") == 1, err
    assert b"1 wake(s) for boss (they are in its inbox): generating" in err


def test_sender_announces_each_wake_once_and_not_what_was_drained(crew):
    """The bookkeeping, with the tmux part replaced by a recorder."""
    register(crew, "boss", kind="primary")
    said = []
    answers = [False, True, True]
    now = [0.0]
    s = Sender(crew, "boss", window=0.5, retry=2.0, clock=lambda: now[0],
               deliver=lambda sess, text: (said.append(text) or answers.pop(0), Answer("generating", "x")))
    s.wake(ev("w1", "blocked").strip())
    s.wake(ev("w2", "done").strip())
    assert s.due() is None and inbox.pending(crew, "boss") == []     # taken, not yet posted
    assert s.flush() is True
    assert s.due() == 0.5
    assert s.tick() is False and s.due() == 2.0           # refused: retried later
    now[0] = 2.0
    assert s.tick() is True and s.due() == 4.0           # then it watches for a partial take
    assert said[-1] == "crewfile: 2 wakes waiting from w1, w2; run: inbox-drain boss"
    assert s.tick() is False and len(said) == 2           # announced already: not again
    s.wake(ev("w3", "lost").strip())
    s.flush()
    inbox.drain(crew, "boss")                             # the primary's hook took them
    assert s.tick() is False and len(said) == 2 and s.due() is None


def test_an_unconfirmed_announcement_is_not_typed_again(crew):
    """Issue 18: Enter pressed, no turn recorded: it may be taken late, so it
    counts as announced (never typed twice); logged as unconfirmed; the
    wakes stay in the inbox for the primary's next prompt hook."""
    register(crew, "boss", kind="primary")
    said, logged = [], []
    s = Sender(crew, "boss", clock=lambda: 0.0, log=logged.append,
               deliver=lambda sess, text: (said.append(text) or False,
                                           Answer("unconfirmed", "no turn-started came")))
    s.wake(ev("w1", "done").strip())
    s.flush()
    assert s.tick() is False and len(said) == 1
    assert s.tick() is False and len(said) == 1           # not typed a second time
    assert any("unconfirmed (no turn-started came); they stay in its inbox" in m
               for m in logged), logged
    assert [n.text for n in inbox.pending(crew, "boss")] == [ev("w1", "done").strip()]


def test_the_rest_of_a_partly_taken_backlog_is_announced_again(crew):
    register(crew, "boss", kind="primary")
    said = []
    s = Sender(crew, "boss", clock=lambda: 0.0,
               deliver=lambda sess, text: (said.append(text) or True, "delivered"))
    for i in range(5):
        s.wake(ev(f"w{i}", "done").strip())
    s.flush()
    assert s.tick() is True and len(said) == 1
    assert s.tick() is False and len(said) == 1           # nothing taken: not again
    inbox.drain(crew, "boss", take=lambda notices: 2)     # the hook showed two of five
    assert s.tick() is True and said[-1].startswith("crewfile: 3 wakes waiting from w2, w3, w4")
    assert len(inbox.pending(crew, "boss")) == 3


def test_wake_send_to_a_primary_without_a_pane_keeps_every_wake(crew, run):
    register(crew, "boss", kind="primary")
    p = run("wake-send", "boss", "--window", "0.05", input=ev("w1", "blocked") + ev("w2", "done"))
    assert p.returncode == 0
    assert "holding the announcement of 2 wake(s) for boss (they are in its inbox): not-live" \
        in p.stderr
    assert [n.text for n in inbox.pending(crew, "boss")] == [ev("w1", "blocked").strip(),
                                                              ev("w2", "done").strip()]
    p = run("wake-send", "nobody", input="")
    assert p.returncode == 0 and p.stderr == ""       # nothing to hold: nothing to wait for
    p = run("wake-send", "no/body", input="")
    assert p.returncode == 2 and p.stderr.startswith("wake-send: ")


def test_wake_send_cuts_a_wake_too_long_for_one_notice(crew, run):
    """A record's text may be longer than a notice can carry within one inbox
    record: the wake is posted cut, never refused or lost."""
    register(crew, "boss", kind="primary")
    p = run("wake-send", "boss", "--window", "0.05", input=ev("w1", "blocked", "x" * 12000))
    assert p.returncode == 0
    [notice] = inbox.pending(crew, "boss")
    assert notice.text == ev("w1", "blocked", "x" * 12000)[:8192] + " [cut]"


def test_wake_send_posts_no_fragment_of_a_last_line(crew, run):
    """An upstream SIGKILLed mid-write leaves a line cut short at the end of
    the input: it is said on stderr, never a notice."""
    register(crew, "boss", kind="primary")
    p = run("wake-send", "boss", "--window", "0.05", input=ev("w1", "done") + "2026-12-01")
    assert p.returncode == 0
    assert "wake-send: input ended inside a line, dropped: b'2026-12-01'" in p.stderr
    assert [n.text for n in inbox.pending(crew, "boss")] == [ev("w1", "done").strip()]


def test_wake_send_holds_wakes_for_a_primary_registered_later(crew):
    """The issue's walkthrough: wake-send started before the primary exists."""
    proc = subprocess.Popen([sys.executable, os.path.join(BIN, "wake-send"), "boss", "--window",
                             "0.05", "--retry", "0.05"], stdin=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ, "CREWFILE_DIR": crew.root})
    proc.stdin.write((ev("w1", "done", "shipped") + ev("w2", "blocked")).encode())
    proc.stdin.flush()
    line = proc.stderr.readline()
    assert line == b"wake-send: boss is not registered; holding 2 wake(s) until it is\n"
    register(crew, "boss", kind="primary")
    wait_for(lambda: len(inbox.pending(crew, "boss")) == 2, what="the held wakes posted")
    proc.stdin.close()
    assert proc.wait(10) == 0
    err = proc.stderr.read()
    assert b"not registered" not in err           # said once, not once per retry
    assert b"posting to boss's inbox again" in err


def test_refusals_are_said_once_per_change_of_state_not_per_retry(crew):
    """A primary lost, then busy, then taking it: two lines and the announcement."""
    register(crew, "boss", kind="primary")
    said, logged = [], []
    answers = ([(False, Answer("not-live", "pane gone"))] * 5
               + [(False, Answer("generating", "a turn runs"))] * 3 + [(True, Answer("delivered"))])
    now = [0.0]
    s = Sender(crew, "boss", clock=lambda: now[0], log=logged.append,
               deliver=lambda sess, text: (said.append(text) or answers.pop(0)))
    s.wake(ev("w1", "done").strip())
    s.flush()
    while answers:
        now[0] = s.due()
        s.tick()
    assert [l.split(": ", 1)[1] if ": " in l else l for l in logged][:2] == [
        "not-live: pane gone", "generating: a turn runs"]
    assert len(logged) == 3 and logged[2].startswith("announced 1 wake(s) to boss")
    assert len(said) == 9 and len(inbox.pending(crew, "boss")) == 1      # the wake waited
