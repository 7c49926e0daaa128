"""Asides: the captain's acts, the captain-only conclusion, maildir delivery,
reconcile, report-ls; every exit code and message, state read back through lib."""
import json
import os
import stat
import subprocess
import sys
import uuid

import pytest

from conftest import (REPO, AttachedClient, believed_once_caught_up, captain_keys, captain_runs,
                      captain_types, wait_for, BIN)
from crewfile.asides import aside, captain, reports
from crewfile.core import paths, records
from crewfile.core.errors import NotFound
from crewfile.core.logfile import TailStats
from crewfile.session.sessions import Session, register
from transcript import append_prompt

FAKE = os.path.join(REPO, "tests", "fake-agent")
AGENT = f"{sys.executable} {FAKE}"


def kinds(crew, name, skip=("registered", "started", "turn-started", "turn-ended")):
    sess = Session(crew, name)
    return [(r.kind, r.text) for r in sess.last_records(1000, TailStats()) if r.kind not in skip]


def status_bytes(crew, name):
    with open(crew.session_file(name, paths.STATUS), "rb") as f:
        return f.read()


def box(crew, which):
    d = crew.sub(paths.REPORTS, which)
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


@pytest.fixture
def a1(aside_window):
    """An aside whose window only reads keys (the library's view), and the
    captain at a terminal looking at it (captain_types types there)."""
    return aside_window("a1")


@pytest.fixture
def report(tmp_path):
    p = tmp_path / "report.md"
    p.write_text("# cache design\nLRU, 5 min TTL.\n")
    return p


# --- the captain's input --------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("/aside-done", ("captain-done", "")),
    ("  /aside-done  ", ("captain-done", "")),
    ("/aside-done ship it", ("captain-done", "ship it")),
    ("/aside-done\tship it\n", ("captain-done", "ship it")),
    ("/aside-doneship", ("captain", "/aside-doneship")),
    ("please /aside-done", ("captain", "please /aside-done")),
    ("/aside-don", ("captain", "/aside-don")),
    ("", ("captain", "")),
    ("two\nlines", ("captain", "two\nlines")),
])
def test_parse_captain_input(text, expected):
    assert captain.parse_captain_input(text) == expected


def test_long_captain_input_is_clipped_and_still_recorded(crew, a1):
    text = "\x01" * 10000          # escapes to 4 bytes each: would exceed a record
    assert captain.record_captain_input(crew, "a1", text) == "captain"
    rec = a1.last_records(1, TailStats())[0]
    assert rec.text.startswith("\x01" * captain.CAPTAIN_TEXT_MAX)
    assert rec.text.endswith(f"[... {10000 - captain.CAPTAIN_TEXT_MAX} more characters]")


def test_a_captain_input_that_is_not_utf8_is_still_recorded(crew, a1):
    assert captain.record_captain_input(crew, "a1", "caf\udce9 /aside-done") == "captain"
    assert a1.last_records(1, TailStats())[0].text == "caf\\udce9 /aside-done"
    assert captain_types(crew, "a1", "/aside-done \ud800") == "captain-done"


def test_record_captain_input_works_for_any_session_and_needs_one(crew):
    register(crew, "w1")
    assert captain.record_captain_input(crew, "w1", "hello") == "captain"
    assert kinds(crew, "w1") == [("captain", "hello")]
    with pytest.raises(NotFound):
        captain.record_captain_input(crew, "nobody", "hello")


def test_scan_follows_the_captains_latest_act(crew, a1):
    state = lambda: aside.scan(a1).state
    assert state() == aside.OPEN                           # no act yet
    captain.record_captain_input(crew, "a1", "hello")
    assert state() == aside.OPEN
    captain_types(crew, "a1", "/aside-done")
    assert state() == aside.CAPTAIN_CONCLUDED
    captain.record_captain_input(crew, "a1", "wait")          # typed again: void
    assert state() == aside.OPEN
    captain_types(crew, "a1", "/aside-done ok")
    delivered = reports.deliver(crew, "a1", b"the report")       # as aside-conclude does
    a1.append("concluded", delivered)
    assert state() == aside.CONCLUDED
    captain_types(crew, "a1", "/aside-done")   # repeated: the same conclusion
    assert state() == aside.CONCLUDED
    a1.append("closed", reports.accept(crew, delivered))        # as aside-reconcile does
    assert state() == aside.CLOSED
    captain_types(crew, "a1", "/aside-done")
    assert state() == aside.CLOSED
    captain.record_captain_input(crew, "a1", "late")   # typed into the window before the kill
    assert state() == aside.OPEN


def test_scan_reads_no_further_back_than_the_captains_last_input(crew, a1):
    captain.record_captain_input(crew, "a1", "hello")
    with open(a1.status_path, "ab") as f:
        f.write(b"garbage before the captain's input\n")
        f.write(records.new_line("captain", "latest").encode())
        f.write(records.new_line("turn-ended").encode())
    stats = TailStats()
    assert aside.scan(a1, stats).act.text == "latest"
    assert stats.garbage == 0          # the garbage line, older, was never read


# --- aside-conclude ----------------------------------------------------------------

def test_conclude_before_the_captain_is_refused_and_surfaced(crew, a1, run, report):
    captain.record_captain_input(crew, "a1", "hello")
    r = run("aside-conclude", "a1", "--report", report)
    assert r.returncode == 1
    assert r.stderr == ("aside-conclude: the captain has not concluded this aside;"
                        " keep the conversation going\n")
    assert r.stdout == ""
    assert kinds(crew, "a1")[-1] == ("problem", "self-conclusion refused")
    assert box(crew, "new") == [] and box(crew, "tmp") == []


def test_conclude_with_no_captain_act_at_all_is_refused(crew, a1, run, report):
    r = run("aside-conclude", "a1", "--report", report)
    assert r.returncode == 1 and "has not concluded" in r.stderr
    assert box(crew, "new") == []


def test_conclude_after_the_captain_delivers_once(crew, a1, run, report):
    captain_types(crew, "a1", "/aside-done ship it")
    r = run("aside-conclude", "a1", "--report", report)
    assert r.returncode == 0, r.stderr
    path = r.stdout.strip()
    assert os.path.dirname(path) == crew.sub("reports", "new")
    assert open(path).read() == report.read_text()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert reports.parse_name(os.path.basename(path))[0] == "a1"
    assert kinds(crew, "a1")[-2:] == [("captain-done", "ship it"), ("concluded", path)]
    assert box(crew, "tmp") == []
    # A second run: refused, no second report, nothing appended.
    before = status_bytes(crew, "a1")
    r = run("aside-conclude", "a1", "--report", report)
    assert r.returncode == 1
    assert r.stderr == f"aside-conclude: already concluded: the report is {path}\n"
    assert box(crew, "new") == [os.path.basename(path)]
    assert status_bytes(crew, "a1") == before


def test_conclude_from_stdin(crew, a1, run):
    captain_types(crew, "a1", "/aside-done")
    r = run("aside-conclude", "a1", "--report", "-", input="from stdin\n")
    assert r.returncode == 0
    assert open(r.stdout.strip()).read() == "from stdin\n"


def test_a_captain_input_after_the_conclusion_voids_it(crew, a1, run, report):
    captain_types(crew, "a1", "/aside-done")
    captain.record_captain_input(crew, "a1", "one more thing")
    r = run("aside-conclude", "a1", "--report", report)
    assert r.returncode == 1 and "has not concluded" in r.stderr
    assert box(crew, "new") == []


def test_reopened_and_concluded_again_gives_a_second_report(crew, a1, run, report):
    captain_types(crew, "a1", "/aside-done")
    first = run("aside-conclude", "a1", "--report", report, check=True).stdout.strip()
    captain.record_captain_input(crew, "a1", "actually, one more thing")
    captain_types(crew, "a1", "/aside-done")
    second = run("aside-conclude", "a1", "--report", report, check=True).stdout.strip()
    assert first != second
    assert len(box(crew, "new")) == 2
    assert aside.scan(a1).concluded.text == second


@pytest.mark.parametrize("case", ["unknown", "not-aside", "bad-name", "no-file", "empty",
                                  "blank", "directory", "no-report-option"])
def test_conclude_bad_input_changes_nothing(crew, a1, run, tmp_path, case):
    register(crew, "w1")
    captain_types(crew, "a1", "/aside-done")
    before = status_bytes(crew, "a1")
    empty = tmp_path / "empty"
    empty.write_text("")
    blank = tmp_path / "blank"
    blank.write_text(" \n\n")
    argv, code, message = {
        "unknown": (["nobody", "--report", empty], 3, "no session 'nobody'"),
        "not-aside": (["w1", "--report", blank], 2, "'w1' is not an aside (kind crew)"),
        "bad-name": (["../a1", "--report", empty], 2, "bad session name"),
        "no-file": (["a1", "--report", tmp_path / "nope"], 2, "no report file"),
        "empty": (["a1", "--report", empty], 2, "the report is empty"),
        "blank": (["a1", "--report", blank], 2, "the report is empty"),
        "directory": (["a1", "--report", tmp_path], 2, "is a directory"),
        "no-report-option": (["a1"], 2, "missing --report"),
    }[case]
    r = run("aside-conclude", *argv)
    assert r.returncode == code, r.stderr
    assert r.stderr.startswith("aside-conclude: ") and message in r.stderr
    assert status_bytes(crew, "a1") == before
    assert box(crew, "new") == [] and box(crew, "tmp") == []


# --- aside-say, aside-done -------------------------------------------------------

def test_aside_say_and_done_record_the_captains_acts_with_evidence(crew, tmux, opened, run):
    """Run as the captain's key binding runs them (by the tmux server, outside the agent)."""
    assert captain_runs(tmux, "aside-say", "a1", "what", "about", "TTL?") == (0, "captain\n")
    assert captain_runs(tmux, "aside-say", "a1", "--", "/aside-done", "looks", "good") == (
        0, "captain-done\n")
    assert captain_runs(tmux, "aside-done", "a1", "--note", "ship it") == (0, "")
    assert kinds(crew, "a1")[-3:] == [("captain", "what about TTL?"),
                                      ("captain-done", "looks good"), ("captain-done", "ship it")]
    sess = Session(crew, "a1")
    acts = open(crew.session_file("a1", paths.ACTS)).read().splitlines()
    assert [a.split("\t")[1].partition(" keys ")[0] for a in acts] == ["caller tmux", "caller tmux"]
    assert all(a.split(" keys ")[1].isdigit() for a in acts)
    assert aside.believed(sess, aside.scan(sess)) is None


def test_captain_acts_from_inside_or_outside_tmux_are_refused_and_surfaced(
        crew, tmux, opened, run):
    """The agent's own shell (RUN: in the fake agent), a detached process, a
    process outside the aside's tmux server: refused, a problem record each,
    nothing recorded as the captain's."""
    aside_done = f"{sys.executable} {os.path.join(REPO, 'bin', 'aside-done')}"
    aside_say = f"{sys.executable} {os.path.join(REPO, 'bin', 'aside-say')}"
    tmux("send-keys", "-t", opened, "-l", f"RUN: {aside_done} a1; {aside_say} a1 hi")
    tmux("send-keys", "-t", opened, "Enter")
    tmux.wait_screen(opened, "agent: ran, exit 1")
    screen = tmux.screen(opened)
    assert "aside-done: not believed to be the captain: it was run by the aside's own agent" in screen
    r = run("aside-done", "a1")          # from the test: not below the aside's tmux server
    assert r.returncode == 1 and "not run from a tmux window or key binding" in r.stderr
    r = run("aside-say", "a1", "hello")
    assert r.returncode == 1
    problems = [t for k, t in kinds(crew, "a1") if k == "problem"]
    assert problems == [
        "self-conclusion refused: aside-done: it was run by the aside's own agent",
        "captain input refused: aside-say: it was run by the aside's own agent",
        "self-conclusion refused: aside-done: it was not run from a tmux window or key binding"
        " of the aside's tmux server (a detached process has no captain behind it)",
        "captain input refused: aside-say: it was not run from a tmux window or key binding"
        " of the aside's tmux server (a detached process has no captain behind it)"]
    assert "captain-done" not in [k for k, _ in kinds(crew, "a1")]
    assert ("captain", "hi") not in kinds(crew, "a1") and ("captain", "hello") not in kinds(crew, "a1")


def test_a_command_typed_in_another_window_is_the_captain(crew, tmux, opened, run):
    other = tmux.new_window("sh", name="captain")
    line = f"{sys.executable} {os.path.join(REPO, 'bin', 'aside-done')} a1 --note typed; echo rc=$?"
    person = AttachedClient(tmux, other)
    try:
        person.type_after(0, line + "\r")
        tmux.wait_screen(other, "rc=0")
    finally:
        person.close()
    assert kinds(crew, "a1")[-1] == ("captain-done", "typed")
    acts = open(crew.session_file("a1", paths.ACTS)).read().splitlines()
    assert acts[-1].partition(" keys ")[0].endswith(f"\tcaller {other}")


def test_a_key_binding_pressed_by_the_captain_concludes(crew, tmux, opened):
    """C-b D in a real client attached through a pseudo-terminal; tmux runs the binding."""
    tmux("bind-key", "D", "run-shell",
         f"env CREWFILE_DIR={crew.root} {sys.executable} {os.path.join(REPO, 'bin', 'aside-done')}"
         " a1 --note 'by key'")
    client = AttachedClient(tmux, "crew")
    try:
        client.press(b"\x02D")
        wait_for(lambda: kinds(crew, "a1")[-1] == ("captain-done", "by key"), what="captain-done")
    finally:
        client.close()
    acts = open(crew.session_file("a1", paths.ACTS)).read().splitlines()
    assert acts[-1].partition(" keys ")[0].endswith("\tcaller tmux")


def test_status_append_never_writes_the_captains_words(crew, a1, run):
    register(crew, "w1")
    for name, kind, what in (("a1", "captain-done", "self-conclusion refused"),
                             ("w1", "captain", "captain input refused")):
        r = run("status-append", name, kind, "forged")
        assert r.returncode == 1 and "are the captain's acts" in r.stderr
        r = run("status-append", name, "-", input=f"{kind}: forged\nnote: fine\n")
        assert r.returncode == 2
        assert kinds(crew, name) == [("problem", f"{what}: status-append may not write {kind}"
                                                 " records")] * 2 + [("note", "fine")]


def test_a_hand_written_captain_done_is_not_obeyed(crew, a1, run, report):
    """printf >> status under flock(1): the record has no evidence; conclude
    refuses it and says so, once."""
    captain_types(crew, "a1", "let's talk")
    subprocess.run(["flock", a1.lock_path, "sh", "-c",
                    f'printf "%s captain-done: settled\\n" "$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)"'
                    f' >> "{a1.status_path}"'], check=True)
    assert aside.scan(a1).state == aside.CAPTAIN_CONCLUDED        # claimed ...
    r = run("aside-conclude", "a1", "--report", report)            # ... not believed
    assert r.returncode == 1 and "captain-done record is not believed" in r.stderr
    assert kinds(crew, "a1")[-1] == ("problem", "self-conclusion refused: a captain-done record"
                                     " is not believed: it has no evidence of the captain (not"
                                     " written by a prompt hook or aside-done)")
    assert box(crew, "new") == []
    assert aside.audit(a1) is None                                 # reported once, not twice


def test_a_conclusion_is_believed_only_while_the_transcript_agrees(crew, a1, run, report):
    captain_types(crew, "a1", "/aside-done")
    sess = Session(crew, "a1")
    assert aside.believed(sess, aside.scan(sess)) is None
    # A prompt the hook did not see (its record lost): the transcript is newer.
    append_prompt(sess.meta["transcript_path"], "hmm, wait", "a-later-prompt")
    why = aside.believed(sess, aside.scan(sess))
    assert why == "the agent's transcript has a newer prompt than that /aside-done"
    assert run("aside-conclude", "a1", "--report", report).returncode == 1


def test_a_conclusion_waits_for_the_transcript_to_catch_up(crew, a1, monkeypatch):
    """Claude Code appends the /aside-done prompt to its transcript a moment after
    making it: a tool call of that turn (aside-conclude) can look first. A prompt id
    the transcript does not hold yet is waited for, not read as voided."""
    captain_types(crew, "a1", "let's talk")
    sess = Session(crew, "a1")
    path, pid = sess.meta["transcript_path"], str(uuid.uuid4())
    captain_keys(sess, "/aside-done\r")
    assert captain.record_captain_input(crew, "a1", "/aside-done", pid, path) == "captain-done"
    assert believed_once_caught_up(monkeypatch, sess,
                                   lambda: append_prompt(path, "/aside-done", pid)) == [None]
    # A prompt after it voids it at once, waited for or not.
    append_prompt(path, "hmm, wait", "a-later-prompt")
    assert aside.believed(sess, aside.scan(sess)) == (
        "the agent's transcript has a newer prompt than that /aside-done")


def test_a_prompt_hook_refuses_a_conclusion_it_cannot_check(crew, a1):
    captain_types(crew, "a1", "hello")
    path = Session(crew, "a1").meta["transcript_path"]
    assert captain.record_captain_input(crew, "a1", "/aside-done") == "problem"     # no prompt id
    assert captain.record_captain_input(crew, "a1", "/aside-done", "p1", "/tmp/x.jsonl") == "problem"
    newest = [l for l in open(path).read().splitlines()][-1]
    replayed = newest.split('"promptId":"')[1].split('"')[0]
    assert captain.record_captain_input(crew, "a1", "/aside-done", replayed, path) == "problem"
    assert [t.split(": ", 2)[2] for k, t in kinds(crew, "a1") if k == "problem"] == [
        "no prompt id: it cannot be checked against the agent's transcript",
        "the payload names another transcript than the agent's",
        "the agent's transcript already holds that prompt (a replayed payload)"]
    assert "captain-done" not in [k for k, _ in kinds(crew, "a1")]


def test_aside_done_and_say_refuse_non_asides_and_closed_ones(crew, run):
    register(crew, "w1")
    r = run("aside-done", "w1")
    assert (r.returncode, r.stderr) == (2, "aside-done: 'w1' is not an aside (kind crew)\n")
    assert run("aside-done", "nobody").returncode == 3
    assert run("aside-say", "nobody", "hi").returncode == 3
    # as aside-open ends an aside whose window could not be opened (no window
    # recorded: the one case a `closed` naming no report is believed)
    a1 = register(crew, "a1", kind="aside")
    a1.append("closed", "window not opened: x")
    r = run("aside-done", "a1")
    assert (r.returncode, r.stderr) == (1, "aside-done: aside 'a1' is closed\n")
    assert run("aside-say", "a1", "hi").returncode == 1
    assert kinds(crew, "w1") == [] and kinds(crew, "a1") == [("closed", "window not opened: x")]


# --- maildir ---------------------------------------------------------------------

def test_unique_names_parse_and_differ(crew):
    a, b = reports.unique_name("a.b-c"), reports.unique_name("a.b-c")
    assert a != b
    assert reports.parse_name(a)[0] == "a.b-c"
    assert reports.parse_name(a + paths.SCROLLBACK_SUFFIX) is None
    assert reports.parse_name(".hidden") is None and reports.parse_name("junk") is None
    assert reports.parse_name("a,1x.M000001P1Q1.h") is None       # not digits
    assert reports.parse_name("a,100000000000.M000001P1Q1.h") is None    # past year 5138


def test_clean_tmp_removes_only_old_leftovers(crew):
    tmp = reports.box(crew, paths.REPORT_TMP)
    old, fresh = os.path.join(tmp, "old"), os.path.join(tmp, "fresh")
    for p in (old, fresh):
        open(p, "w").close()
    os.utime(old, (1, 1))
    assert reports.clean_tmp(crew) == 1
    assert os.listdir(tmp) == ["fresh"]


def test_report_ls(crew, aside_window, a1, run, report):
    aside_window("b2")
    for name in ("a1", "b2"):
        captain_types(crew, name, "/aside-done")
        run("aside-conclude", name, "--report", report, check=True)
    os.makedirs(crew.sub("reports", "new", ".stray"), exist_ok=True)   # ignored
    r = run("report-ls")
    header, *lines = r.stdout.splitlines()
    assert r.returncode == 0 and len(lines) == 2
    assert header.split() == ["STATE", "ASIDE", "TIME", "PATH"]
    state, name, ts, path = lines[0].split(None, 3)
    assert (state, name) == ("new", "a1") and os.path.isfile(path) and ts.endswith("Z")
    assert lines[0].index(path) == header.index("PATH")           # aligned under its name
    assert [l.split()[1] for l in run("report-ls", "--aside", "b2").stdout.splitlines()[1:]] == ["b2"]
    objs = json.loads(run("report-ls", "--json").stdout)           # one document
    assert [(o["state"], o["aside"], o["scrollback"]) for o in objs] == [
        ("new", "a1", None), ("new", "b2", None)]
    assert objs[0]["size"] == len(report.read_bytes())
    assert [json.loads(l) for l in run("report-ls", "--json-lines").stdout.splitlines()] == objs
    r = run("report-ls", "--json", "--json-lines")
    assert (r.returncode, r.stdout) == (2, "") and "exclude each other" in r.stderr


def test_report_ls_on_an_empty_crew(crew, run):
    r = run("report-ls")
    assert (r.returncode, r.stdout, r.stderr) == (0, "STATE  ASIDE  TIME  PATH\n", "")
    assert run("report-ls", "--json").stdout == "[]\n"
    assert run("report-ls", "--json-lines").stdout == ""


# --- on real tmux: open, reconcile -----------------------------------------------

@pytest.fixture
def opened(crew, tmux, run):
    """Aside a1 open in tmux session `crew`, the fake agent at its prompt."""
    tmux("new-session", "-d", "-s", "crew", "-x", "120", "-y", "30")
    r = run("aside-open", "a1", "--topic", "cache design", "--cmd", AGENT,
            "--tmux-session", "crew", env={"CREWFILE_PRIMARY": "firstmate"})
    assert r.returncode == 0, r.stderr
    pane = Session(crew, "a1").meta["tmux"]
    tmux.wait_screen(pane, "ready>")
    return pane


def test_aside_open(crew, tmux, opened, run):
    meta = Session(crew, "a1").meta
    assert meta["kind"] == "aside" and meta["exempt"] is True
    assert meta["primary"] == "firstmate" and meta["topic"] == "cache design"
    assert meta["tmux"] == opened and meta["tmux_target"] == "crew:1"
    assert tmux("display-message", "-p", "-t", opened, "#{window_name}").strip() == "a1"
    # The agent knew who it was: its own `started` record landed in a1's log.
    wait_for(lambda: "started" in [k for k, _ in kinds(crew, "a1", skip=())], what="started")
    assert [k for k in kinds(crew, "a1") if k[0] != "closed"] == [
        ("opened", "cache design"), ("paused", "awaiting captain")]
    st = json.loads(run("status-show", "a1", "--json").stdout)
    assert st["live"] == "yes" and st["exempt"] is True


def test_aside_open_refuses_an_open_name(crew, tmux, opened, run):
    # The windows by id and place: a name tmux renames as a shell starts is no change of ours.
    windows = tmux("list-windows", "-a", "-F", "#{window_id} #{session_name}:#{window_index}")
    r = run("aside-open", "a1", "--cmd", AGENT, "--tmux-session", "crew")
    assert (r.returncode, r.stderr) == (1, "aside-open: 'a1' is already open\n")
    assert tmux("list-windows", "-a", "-F", "#{window_id} #{session_name}:#{window_index}") == windows


def test_aside_open_agent_command_from_the_environment(crew, tmux, run):
    r = run("aside-open", "a2", "--tmux-session", "side", env={"CREWFILE_AGENT_CMD": AGENT})
    assert (r.returncode, r.stdout) == (0, "side:0\n")     # the named session is created
    tmux.wait_screen(Session(crew, "a2").meta["tmux"], "ready>")


def test_aside_open_without_tmux_server_fails_and_frees_the_name(crew, tmux, run):
    r = run("aside-open", "a3", "--cmd", AGENT)      # no session named, no server running
    assert r.returncode == 111 and r.stderr.startswith("aside-open: tmux new-window")
    assert kinds(crew, "a3")[-1][0] == "closed"
    assert run("aside-open", "a3", "--cmd", AGENT, "--tmux-session", "crew").returncode == 0


def test_aside_open_bad_input(crew, run):
    assert run("aside-open", "a/b", "--cmd", "true").returncode == 2
    assert run("aside-open", "ok", "--primary", "../x", "--cmd", "true").returncode == 2
    assert not os.path.exists(crew.sub("sessions"))


def test_reconcile_refuses_until_concluded(crew, tmux, opened, run, report):
    r = run("aside-reconcile", "a1")
    assert (r.returncode, r.stderr) == (
        1, "aside-reconcile: 'a1' is not concluded: the captain has not concluded this aside\n")
    assert captain_runs(tmux, "aside-done", "a1") == (0, "")
    r = run("aside-reconcile", "a1")
    assert r.returncode == 1 and "agent has not handed over its report" in r.stderr
    assert opened in tmux("list-panes", "-a", "-F", "#{pane_id}")
    assert kinds(crew, "a1")[-1] == ("captain-done", "")


def test_reconcile_keeps_everything_then_kills_the_window(crew, tmux, opened, run, report):
    tmux("send-keys", "-t", opened, "-l", "remember the TTL")
    tmux("send-keys", "-t", opened, "Enter")
    wait_for(lambda: ("captain", "remember the TTL") in kinds(crew, "a1"), what="captain record")
    tmux.wait_prompt(opened)
    assert captain_runs(tmux, "aside-done", "a1") == (0, "")
    new = run("aside-conclude", "a1", "--report", report, check=True).stdout.strip()
    r = run("aside-reconcile", "a1")
    assert r.returncode == 0, r.stderr
    cur = new.replace("/new/", "/cur/")
    assert r.stdout == (f"report: {cur}\nscrollback: {cur}.scrollback\n"
                        f"transcript: {cur}.transcript\n")     # the fake agent keeps one
    assert box(crew, "new") == [] and open(cur).read() == report.read_text()
    assert "remember the TTL" in open(cur + ".scrollback").read()
    assert opened not in tmux("list-panes", "-a", "-F", "#{pane_id}")
    assert kinds(crew, "a1")[-1] == ("closed", cur)
    st = json.loads(run("status-show", "a1", "--json").stdout)
    assert st["ended"] is True and st["live"] == "no"
    assert [l.split()[0] for l in run("report-ls").stdout.splitlines()[1:]] == ["cur"]
    assert json.loads(run("report-ls", "--json").stdout)[0]["scrollback"] == cur + ".scrollback"
    # Again: nothing left to do, nothing doubled.
    before = status_bytes(crew, "a1")
    assert run("aside-reconcile", "a1").stdout == r.stdout
    assert status_bytes(crew, "a1") == before
    # The name is free again.
    assert run("aside-open", "a1", "--cmd", AGENT, "--tmux-session", "crew").returncode == 0


def test_reconcile_takes_reports_of_voided_conclusions_too(crew, tmux, opened, run, report):
    assert captain_runs(tmux, "aside-done", "a1") == (0, "")
    run("aside-conclude", "a1", "--report", report, check=True)
    assert captain_runs(tmux, "aside-say", "a1", "wait, one more")[0] == 0
    assert captain_runs(tmux, "aside-done", "a1") == (0, "")
    run("aside-conclude", "a1", "--report", report, check=True)
    run("aside-reconcile", "a1", check=True)
    assert box(crew, "new") == [] and len(reports.listing(crew, aside="a1")) == 2


def test_reconcile_when_the_window_is_already_gone(crew, tmux, opened, run, report):
    assert captain_runs(tmux, "aside-done", "a1") == (0, "")
    run("aside-conclude", "a1", "--report", report, check=True)
    tmux("kill-window", "-t", opened)
    r = run("aside-reconcile", "a1")
    assert r.returncode == 0
    assert r.stderr == "aside-reconcile: a1: the window was already gone: no scrollback to save\n"
    assert "scrollback: -" in r.stdout.splitlines()
    assert kinds(crew, "a1")[-1][0] == "closed" and box(crew, "new") == []


def test_reconcile_of_an_aside_without_a_window(crew, a1, run, report):
    captain_types(crew, "a1", "/aside-done")
    run("aside-conclude", "a1", "--report", report, check=True)
    path = crew.session_file("a1", paths.META)          # its window no longer recorded
    meta = {k: v for k, v in json.load(open(path)).items() if not k.startswith("tmux")}
    with open(path, "w") as f:
        json.dump(meta, f)
    r = run("aside-reconcile", "a1")
    assert r.returncode == 0
    assert r.stderr == "aside-reconcile: a1: it has no tmux window: no scrollback to save\n"
    assert kinds(crew, "a1")[-1][0] == "closed" and box(crew, "new") == []


def test_reconcile_never_kills_a_pane_that_is_no_longer_the_asides(crew, tmux, opened, run,
                                                                   report):
    assert captain_runs(tmux, "aside-done", "a1") == (0, "")
    run("aside-conclude", "a1", "--report", report, check=True)
    Session(crew, "a1").update_meta(pid=1)     # as if the server restarted and reused %N
    r = run("aside-reconcile", "a1")
    assert r.returncode == 0 and "already gone" in r.stderr
    assert opened in tmux("list-panes", "-a", "-F", "#{pane_id}")


BYSTANDER = "sh -c 'echo NOT-THE-ASIDE; exec sleep 600'"


def test_reconcile_acts_on_the_asides_own_server_never_the_environments(
        crew, tmux, opened, run, report, second_server):
    # The same pane id and window name on a server that CREWFILE_TMUX names.
    other = second_server.window_with_id(opened, "a1", BYSTANDER)
    second_server.wait_screen(other, "NOT-THE-ASIDE")
    assert captain_runs(tmux, "aside-done", "a1") == (0, "")
    run("aside-conclude", "a1", "--report", report, check=True)
    r = run("aside-reconcile", "a1", env={"CREWFILE_TMUX": second_server.sock})
    assert (r.returncode, r.stderr) == (0, "")
    saved = r.stdout.splitlines()[1].split(": ", 1)[1]
    text = open(saved).read()
    assert "ready>" in text and "NOT-THE-ASIDE" not in text
    assert opened not in tmux("list-panes", "-a", "-F", "#{pane_id}")
    assert second_server("list-panes", "-a", "-F", "#{pane_id} #{window_name}").count(
        f"{other} a1\n") == 1


def test_reconcile_of_a_pane_registered_without_its_server_touches_no_server(
        crew, tmux, run, report):
    pane = tmux.new_window(BYSTANDER, name="a1")
    register(crew, "a1", kind="aside", tmux=pane)
    path = crew.session_file("a1", paths.META)          # as an old registration wrote it
    meta = {k: v for k, v in json.load(open(path)).items() if not k.startswith("tmux_")}
    with open(path, "w") as f:
        json.dump(meta, f)
    person = AttachedClient(tmux, pane)
    try:
        captain_types(crew, "a1", "/aside-done")
    finally:
        person.close()
    run("aside-conclude", "a1", "--report", report, check=True)
    r = run("aside-reconcile", "a1")
    assert r.returncode == 0
    assert r.stderr == ("aside-reconcile: a1: its tmux server was not recorded: its window,"
                        " if any, was left alone (no scrollback saved)\n")
    assert "scrollback: -" in r.stdout.splitlines()
    assert pane in tmux("list-panes", "-a", "-F", "#{pane_id}")


def test_the_scrollback_survives_the_agent_exiting(crew, tmux, opened, run, report):
    tmux("send-keys", "-t", opened, "-l", "bye now")
    tmux("send-keys", "-t", opened, "Enter")
    tmux("send-keys", "-t", opened, "C-d")          # EOF: the fake agent ends
    wait_for(lambda: ("ended", "eof") in kinds(crew, "a1"), what="ended")
    wait_for(lambda: tmux("display-message", "-p", "-t", opened, "#{pane_dead}").strip() == "1",
             what="dead pane")
    assert captain_runs(tmux, "aside-done", "a1") == (0, "")
    run("aside-conclude", "a1", "--report", report, check=True)
    out = run("aside-reconcile", "a1", check=True).stdout
    sb = out.split("scrollback: ")[1].split("\n")[0]
    assert "bye now" in open(sb).read()
    assert opened not in tmux("list-panes", "-a", "-F", "#{pane_id}")


def test_concurrent_conclusions_deliver_exactly_one_report(crew, a1, report):
    captain_types(crew, "a1", "/aside-done")
    procs = [subprocess.Popen([sys.executable, os.path.join(BIN, "aside-conclude"), "a1",
                               "--report", str(report)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(6)]
    codes = sorted(p.wait() for p in procs)
    assert codes == [0, 1, 1, 1, 1, 1]
    assert len(box(crew, "new")) == 1
    assert [k for k, _ in kinds(crew, "a1")].count("concluded") == 1


def test_a_shell_writers_captain_record_counts(crew, a1, run, report):
    """A captain record appended with flock(1), as protocol.md shows, voids a conclusion."""
    captain_types(crew, "a1", "/aside-done")
    subprocess.run(["flock", a1.lock_path, "sh", "-c",
                    f'printf "%s captain: typed in a shell\\n" "$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)"'
                    f' >> "{a1.status_path}"'], check=True)
    r = run("aside-conclude", "a1", "--report", report)
    assert r.returncode == 1 and "has not concluded" in r.stderr
