"""Sessions through the real commands: registration, status, state, errors."""
import json
import os
import pwd
import subprocess
import sys
import threading
import time

import pytest

from conftest import BIN, cmd
from crewfile.core import liveness, records
from crewfile.core.atomic import prepare, read_text, replace
from crewfile.session.reader import state
from crewfile.session.sessions import Session, register


def status_lines(crew, name):
    path = os.path.join(crew.root, "sessions", name, "status")
    with open(path, "rb") as f:
        return f.read().decode().splitlines()


def test_register_append_show(crew):
    assert cmd("session-add", "w1", "--cwd", crew.root.rsplit("/", 1)[0]).returncode == 0
    assert cmd("status-append", "w1", "turn-started").returncode == 0
    assert cmd("status-append", "w1", "paused", "awaiting", "captain").returncode == 0
    out = cmd("status-show", "w1", "--json")
    assert out.returncode == 0, out.stderr
    st = json.loads(out.stdout)
    assert st["last_kind"] == "paused" and st["last_text"] == "awaiting captain"
    assert st["generating"] == "yes" and st["live"] == "unknown" and not st["ended"]
    assert os.stat(crew.root).st_mode & 0o777 == 0o700
    for f in ("meta", "status", "lock"):
        assert os.stat(os.path.join(crew.root, "sessions", "w1", f)).st_mode & 0o777 == 0o600


def test_generating_follows_the_newest_turn_record(crew):
    register(crew, "w1")
    s = Session(crew, "w1")
    assert state(s)["generating"] == "no"          # registered: nothing running
    s.append("turn-started")
    s.append("paused", "awaiting captain")
    assert state(s)["generating"] == "yes"
    s.append("waiting", "permission")
    assert state(s)["waiting"] and state(s)["generating"] == "yes"
    s.append("turn-ended")
    assert state(s)["generating"] == "no"


def test_unknown_generating_without_turn_records(crew):
    register(crew, "w1")
    with open(os.path.join(crew.root, "sessions", "w1", "status"), "w") as f:
        f.write("2026-11-29T22:01:17.123Z note: only notes\n")
    assert state(Session(crew, "w1"))["generating"] == "unknown"


def test_duplicate_refused_until_ended(crew):
    assert cmd("session-add", "w1").returncode == 0
    r = cmd("session-add", "w1")
    assert r.returncode == 1 and r.stderr == "session-add: session 'w1' is already registered and not ended\n"
    Session(crew, "w1").append("ended", "prompt_input_exit")   # as the agent's hook writes it
    assert cmd("session-add", "w1", "--kind", "primary").returncode == 0
    assert json.loads(read_text(os.path.join(crew.root, "sessions", "w1", "meta")))["kind"] == "primary"


@pytest.mark.parametrize("name", ["../x", "a/b", "", "x\x1by", "x" * 300, ".hidden", "-x", "a..b"])
def test_bad_names_exit_2_and_write_nothing(crew, name):
    r = cmd("session-add", "--", name)
    assert r.returncode == 2 and r.stderr.startswith("session-add: ") and r.stderr.count("\n") == 1
    assert not os.path.exists(os.path.join(crew.root, "sessions")) or \
        os.listdir(os.path.join(crew.root, "sessions")) == []
    assert not os.path.exists(os.path.join(os.path.dirname(crew.root), "x"))


@pytest.mark.parametrize("name,shown", [
    ("a\\b", "bad session name 'a\\\\b': use letters, digits and . _ @ + - (not first: . -), no '/' or '..'"),
    ("x\x1by", "session name contains a control character: 'x\\x1by'"),
])
def test_a_bad_name_is_escaped_once(crew, name, shown):
    """Issue 30.10: session-add 'a\\b' printed the name escaped twice (repr, then the escaper)."""
    r = cmd("session-add", "--", name)
    assert (r.returncode, r.stderr) == (2, f"session-add: {shown}\n")


def test_bad_input_to_status_append_writes_nothing(crew):
    cmd("session-add", "w1", check=True)
    before = status_lines(crew, "w1")
    cases = [(["w1", "Bad"], 2), (["w1", "note", "x" * 20000], 2), (["nope", "idle"], 3),
             (["w1"], 2), (["--bogus", "w1", "idle"], 2)]
    for args, code in cases:
        r = cmd("status-append", *args)
        assert r.returncode == code, (args, r.stderr)
        assert r.stderr.startswith("status-append: ")
    bad_utf8 = subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "..", "bin",
                                                            "status-append"), "w1", "note", b"caf\xe9"],
                              capture_output=True)
    assert bad_utf8.returncode == 2 and b"UTF-8" in bad_utf8.stderr
    assert status_lines(crew, "w1") == before


def test_stdin_records_keep_good_lines_and_report_bad_ones(crew):
    cmd("session-add", "w1", check=True)
    r = cmd("status-append", "w1", "-", input=b"idle\nturn-ended: done\nNot A Kind\ncaf\xe9: x\nblocked: db\n")
    assert r.returncode == 2
    assert "stdin line 3" in r.stderr and "stdin line 4" in r.stderr
    kinds = [records.parse(l).kind for l in status_lines(crew, "w1")]
    assert kinds == ["registered", "idle", "turn-ended", "blocked"]
    r = cmd("status-append", "w1", "log", "-", input="line one\nline\ttwo\n")
    assert r.returncode == 0
    assert [records.parse(l).text for l in status_lines(crew, "w1")[-2:]] == ["line one", "line\ttwo"]


def test_status_show_answers_from_good_records_around_garbage(crew):
    cmd("session-add", "w1", check=True)
    with open(os.path.join(crew.root, "sessions", "w1", "status"), "ab") as f:
        f.write(b"2026-11-29T22:01:17.123Z turn-started\n\xff\xfe garbage\nnot a record\n"
                b"2026-11-29T22:01:18.123Z turn-ended: ok\n2026-11-29T22:01:19.123Z idle: par")
    r = cmd("status-show", "w1", "--json")
    assert r.returncode == 0
    st = json.loads(r.stdout)
    assert st["last_kind"] == "turn-ended" and st["generating"] == "no"
    assert "partial" in r.stderr and "2 malformed" in r.stderr


def test_symlink_planted_as_status_log_is_not_followed(crew, tmp_path):
    cmd("session-add", "w1", check=True)
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    status = os.path.join(crew.root, "sessions", "w1", "status")
    os.unlink(status)
    os.symlink(victim, status)
    r = cmd("status-append", "w1", "idle")
    assert r.returncode == 111 and r.stderr.endswith("/status: a symlink is not followed\n")
    assert victim.read_text() == "precious\n"


def test_symlink_planted_as_session_directory_is_not_followed(crew, tmp_path):
    os.makedirs(os.path.join(crew.root, "sessions"), mode=0o700)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, os.path.join(crew.root, "sessions", "w1"))
    r = cmd("session-add", "w1")
    assert r.returncode == 111 and "symlink" in r.stderr
    assert os.listdir(elsewhere) == []


def test_metadata_rewrites_are_never_seen_partial(crew):
    register(crew, "w1")
    meta = os.path.join(crew.root, "sessions", "w1", "meta")
    stop = threading.Event()
    seen = []

    def reader():
        while not stop.is_set():
            text = read_text(meta)
            seen.append(text)
            json.loads(text)                  # never partial, never empty

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        for i in range(300):
            Session(crew, "w1").update_meta(counter=i, padding="p" * (i * 13 % 5000))
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert len(seen) > 10 and all(seen)
    assert json.loads(read_text(meta))["counter"] == 299


def test_session_ls_lists_live_tmux_sessions(crew, tmux):
    pane = tmux.new_window("sleep 600", name="w1")
    cmd("session-add", "w1", "--tmux", pane, "--pid", tmux.pane_pid(pane), check=True)
    cmd("session-add", "w2", "--tmux", "crew:gone", check=True)
    cmd("session-add", "w3", "--tmux", pane, check=True)          # no agent process recorded
    out = cmd("session-ls", "--json")
    rows = {r["name"]: r for r in json.loads(out.stdout)}
    assert rows["w1"]["live"] == "yes" and rows["w1"]["tmux"] == pane
    assert rows["w1"]["tmux_socket"] == tmux.sock
    assert rows["w2"]["live"] == "no"
    assert rows["w3"]["live"] == "unknown" and rows["w3"]["why"] == "agent-unknown"
    assert "w3: live unknown: agent-unknown" in out.stderr and "--pid" in out.stderr
    tmux("kill-pane", "-t", pane)
    rows = {r["name"]: r for r in json.loads(cmd("session-ls", "--json").stdout)}
    assert rows["w1"]["live"] == "no"
    text = cmd("session-ls").stdout.splitlines()
    assert text[0].split() == ["NAME", "KIND", "EXEMPT", "LIVE", "GEN", "AGE", "LAST", "CWD"]


def test_pid_liveness_checks_start_time(crew):
    proc = subprocess.Popen(["sleep", "600"])
    try:
        cmd("session-add", "w1", "--pid", proc.pid, check=True)
        assert state(Session(crew, "w1"))["live"] == "yes"
        Session(crew, "w1").update_meta(pid_start=1)        # a recycled pid: another process
        assert state(Session(crew, "w1"))["live"] == "no"
    finally:
        proc.kill()
        proc.wait()
    Session(crew, "w1").update_meta(pid_start=None)
    assert state(Session(crew, "w1"))["live"] == "no"


def test_a_process_named_with_parentheses_and_spaces_is_read_right():
    """/proc/PID/stat's second field is the command name in parentheses,
    which may itself hold ') (' and spaces: the fields are read after the last ')'."""
    code = ("import ctypes, sys, time\n"
            "ctypes.CDLL(None).prctl(15, b'a) R 1 (b c)', 0, 0, 0)\n"   # PR_SET_NAME
            "sys.stdout.write('named\\n'); sys.stdout.flush(); time.sleep(600)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"named\n"
        with open(f"/proc/{proc.pid}/comm") as f:
            assert f.read() == "a) R 1 (b c)\n"
        st = liveness.stat(proc.pid)
        # (its state is R or S as it runs: not asserted; a misread name gives ppid 1)
        assert (st.pid, st.ppid, st.gone, st.stopped) == (proc.pid, os.getpid(), False, False)
        assert st.start == liveness.process_start(proc.pid) > 0
        assert st.comm == "a) R 1 (b c)"
        assert liveness.descends_from(proc.pid, os.getpid())
        chain = liveness.lineage(proc.pid)
        assert [c.pid for c in chain[:2]] == [proc.pid, os.getpid()]
        assert [c.pid for c in liveness.ancestors(proc.pid)] == [c.pid for c in chain[1:]]
        assert chain[-1].ppid <= 1 and 1 not in [c.pid for c in chain]
    finally:
        proc.kill()
        proc.wait()
    assert liveness.stat(proc.pid) is None


def test_a_process_start_time_lies_between_the_moments_around_its_start():
    """started_at gives the wall-clock time of a start in clock ticks: it
    was /proc/stat's btime (whole seconds) plus the ticks, up to 1 s early,
    so a record the process wrote at once read as older than the process."""
    tick = 1 / os.sysconf("SC_CLK_TCK")            # a start time's resolution
    before = time.time()
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    after = time.time()
    try:
        began = liveness.started_at(liveness.process_start(proc.pid))
        assert before - tick <= began <= after, (before, began, after)
    finally:
        proc.kill()
        proc.wait()


def test_future_records_have_age_zero(crew):
    register(crew, "w1")
    Session(crew, "w1").append("idle", now=4102444800)     # a clock that jumped ahead
    assert cmd("status-show", "w1").stdout.count("age: 0s") == 1


def test_atomic_replace_refuses_to_write_through_a_planted_temp_link(tmp_path):
    target = tmp_path / "f"
    replace(str(target), "one")
    assert target.read_text() == "one"
    ahead = prepare(str(target))
    pid, n = os.path.basename(ahead.tmp).split(".")[-2:]      # `.f.tmp.PID.N`
    ahead.discard()
    os.symlink(tmp_path / "victim", tmp_path / f".f.tmp.{pid}.{int(n) + 1}")   # replace's next
    replace(str(target), "two")
    assert target.read_text() == "two" and not (tmp_path / "victim").exists()
    assert os.listdir(tmp_path) == ["f"]


def test_atomic_replace_made_ahead_publishes_once_or_leaves_nothing(tmp_path):
    """prepare() makes the temporary now; commit() publishes it (the one
    replace); discard() removes it; two made ahead of one file never share
    a name (several threads of one process may each hold one)."""
    target = str(tmp_path / "f")
    first, second = prepare(target), prepare(target)
    assert first.tmp != second.tmp
    assert sorted(os.listdir(tmp_path)) == sorted(os.path.basename(p.tmp) for p in (first, second))
    second.discard()
    first.commit("one")
    first.discard()                        # after a commit: nothing to do
    assert os.listdir(tmp_path) == ["f"] and read_text(target) == "one"
    with prepare(target) as ahead:
        assert len(os.listdir(tmp_path)) == 2
    assert ahead.tmp is None and os.listdir(tmp_path) == ["f"] and read_text(target) == "one"


# -- session-rm -----------------------------------------------------------------

def test_session_rm_archives_an_ended_session_and_frees_the_name(crew, run):
    register(crew, "w1", cwd="/tmp")
    Session(crew, "w1").append("ended", "exit")
    p = run("session-rm", "w1")
    assert p.returncode == 0, p.stderr
    dest = p.stdout.strip()
    assert os.path.dirname(dest) == crew.sub("archive", "sessions", "w1")
    assert sorted(os.listdir(dest)) >= ["lock", "meta", "status"]
    assert "ended: exit" in open(os.path.join(dest, "status")).read()
    assert not os.path.exists(crew.sub("sessions", "w1"))
    assert run("session-ls", "--all").stdout.splitlines()[1:] == []
    assert run("session-add", "w1").returncode == 0              # the name is free again
    Session(crew, "w1").append("ended")
    second = run("session-rm", "w1").stdout.strip()
    assert second != dest and os.path.isdir(dest) and os.path.isdir(second)


def test_session_rm_refuses_a_live_or_unknown_session_unless_forced(crew, run, tmux):
    pane = tmux.new_window("sleep 600", name="w1")
    register(crew, "w1", tmux=pane, pid=tmux.pane_pid(pane))
    register(crew, "nopane")                                     # liveness unknown
    for name, why in (("w1", "is live"), ("nopane", "is perhaps live")):
        p = run("session-rm", name)
        assert (p.returncode, p.stdout) == (1, ""), p.stderr
        assert p.stderr.startswith(f"session-rm: session {name!r} {why}")
        assert os.path.exists(crew.sub("sessions", name, "meta"))
    p = run("session-rm", "w1", "--force")
    assert p.returncode == 0 and os.path.isdir(p.stdout.strip())
    assert not os.path.exists(crew.sub("sessions", "w1"))


def test_session_rm_of_a_session_whose_pane_is_gone(crew, run, tmux):
    pane = tmux.new_window("sleep 600", name="w1")
    tmux.new_window("sleep 600", name="keep")
    register(crew, "w1", tmux=pane)
    tmux("kill-pane", "-t", pane)
    assert run("session-rm", "w1").returncode == 0


def test_session_rm_errors(crew, run, tmp_path):
    p = run("session-rm", "nobody")
    assert (p.returncode, p.stderr) == (3, "session-rm: no session 'nobody'\n")
    p = run("session-rm", "../x")
    assert p.returncode == 2 and p.stdout == ""
    os.makedirs(crew.sub("sessions"))
    os.symlink(tmp_path, crew.sub("sessions", "planted"))
    p = run("session-rm", "planted", "--force")
    assert p.returncode == 111 and os.path.islink(crew.sub("sessions", "planted"))


def test_user_comes_from_the_password_database_without_USER(crew, run):
    env = {k: v for k, v in os.environ.items() if k != "USER"}
    p = subprocess.run([sys.executable, os.path.join(BIN, "session-add"), "w1"], env=env,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert Session(crew, "w1").meta["user"] == pwd.getpwuid(os.getuid()).pw_name
