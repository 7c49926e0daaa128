"""Only the crew's owner steers the crew (issue 28, part 2): the crew
directory is trusted as OpenSSH's StrictModes trusts ~/.ssh.

The other user here is a real Unix user (created by the set-up when the
tests run as root, and skipped loudly otherwise); root's own commands run
with the capabilities that override file modes dropped (bound_by_modes), so
that what a mode forbids is forbidden; each under umask 000, 022 and 077."""
import glob
import grp
import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
import struct

import pytest

import agent_clis
from agent_rigs import (DEADLINE, codex_home, gemini_settings, stand_in_server,
                        stop_codex_daemons, stop_geminis, write_codex_config)
from claude_harness import run_checked
from conftest import BIN, REPO, bound_by_modes, captain_types, cmd, wait_for
from crewfile.agents import claudecron
from crewfile.core.logfile import TailStats
from crewfile.nudges import schedules
from crewfile.session.sessions import Session, register
from crewfile.session.window import keep_transcript
from crewfile.views import tokens

FAKE = os.path.join(REPO, "tests", "fake-agent")
PRIMARY = os.path.join(REPO, "tests", "transcripts", "claude-primary.jsonl")   # 96 tokens
LIB = os.path.join(REPO, "lib")
OTHER = "crewfile-other"
UMASKS = [0o000, 0o022, 0o077]
MESSAGE = "touch /tmp/PWNED-by-another-user"


class OtherUser:
    """A second real Unix user; run() runs a command as it (setpriv: its
    uid, its gid, no supplementary groups)."""

    def __init__(self, uid, gid, python):
        self.uid, self.gid, self.python = uid, gid, python
        self.bin, self.lib = BIN, LIB

    def prefix(self):
        return ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups", "--"]

    def run(self, argv, umask=0o022, env=None):
        full_env = dict(os.environ, HOME="/", **(env or {}))
        full_env.pop("CREWFILE_DIR", None)
        proc = subprocess.run([*self.prefix(), *argv], env=full_env, capture_output=True,
                              text=True, timeout=60, preexec_fn=lambda: os.umask(umask))
        return proc

    def command(self, name, *args, umask=0o022):
        return self.run([self.python, os.path.join(self.bin, name), *map(str, args)], umask=umask)


@pytest.fixture(scope="session")
def other_user():
    if os.geteuid() != 0:
        pytest.skip("ownership tests need a second Unix user: run the tests as root,"
                    " which creates one (useradd)")
    if not shutil.which("setpriv") or not shutil.which("useradd"):
        pytest.skip("ownership tests need setpriv(1) and useradd(8) (util-linux, passwd)")
    try:
        entry = pwd.getpwnam(OTHER)
    except KeyError:
        made = subprocess.run(["useradd", "--system", "--no-create-home", "--shell",
                               "/usr/sbin/nologin", OTHER], capture_output=True, text=True)
        if made.returncode not in (0, 9):        # 9: made meanwhile by another run
            pytest.fail(f"useradd {OTHER}: {made.stderr}")
        entry = pwd.getpwnam(OTHER)
    # This interpreter may live where the other user cannot go (root's home):
    # then the system's, of the same version.
    for python in (sys.executable, f"/usr/bin/python{sys.version_info[0]}.{sys.version_info[1]}"):
        user = OtherUser(entry.pw_uid, entry.pw_gid, python)
        if os.access(python, os.X_OK) and user.run([python, "-c", "pass"]).returncode == 0:
            break
    else:
        pytest.skip(f"no Python {sys.version_info[0]}.{sys.version_info[1]} the user {OTHER} can run")
    # The checkout may be where the other user cannot go either (a clone in
    # root's home, or in a 0700 temporary directory): then a readable copy
    # of the commands and the library, as an installed crewfile would be.
    copy = None
    if user.run([python, os.path.join(BIN, "session-add"), "--help"]).returncode != 0:
        copy = tempfile.mkdtemp(prefix="cf-code-")
        os.chmod(copy, 0o755)
        for part in ("bin", "lib"):
            shutil.copytree(os.path.join(REPO, part), os.path.join(copy, part),
                            ignore=shutil.ignore_patterns("__pycache__"))
        for top, dirs, files in os.walk(copy):
            for d in dirs:
                os.chmod(os.path.join(top, d), 0o755)
            for f in files:
                os.chmod(os.path.join(top, f), 0o755 if top.endswith("bin") else 0o644)
        user.bin, user.lib = os.path.join(copy, "bin"), os.path.join(copy, "lib")
    yield user
    if copy:
        shutil.rmtree(copy, ignore_errors=True)


@pytest.fixture
def shared_tmp():
    """A directory like /tmp (sticky, writable by all) where the other user
    can make its own crew; removed afterwards."""
    base = tempfile.mkdtemp(prefix="cf-trust-")
    os.chmod(base, 0o1777)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def as_root(name, *args, umask=0o022, bound=True):
    """A command as root, under *umask*; bound by file modes unless not *bound*."""
    proc = subprocess.run([*(bound_by_modes() if bound else []), sys.executable,
                           os.path.join(BIN, name),
                           *map(str, args)], capture_output=True, text=True, timeout=60,
                          preexec_fn=lambda: os.umask(umask))
    return proc


def tree(root):
    """Every path under *root* with its type, owner, mode, size, mtime and
    content: what 'nothing changed on disk' compares."""
    seen = {}
    for here, dirs, files in os.walk(root):
        for name in [""] + dirs + files:
            path = os.path.join(here, name) if name else here
            st = os.lstat(path)
            body = open(path, "rb").read() if stat.S_ISREG(st.st_mode) else None
            seen[path] = (st.st_mode, st.st_uid, st.st_size, st.st_mtime_ns, body)
    return seen


def modes(*levels):
    return {p: (stat.S_IMODE(os.lstat(p).st_mode)) for p in levels}


def agent(crew, tmux, name):
    sess, pane = tmux.agent_window(crew, name, FAKE)
    tmux.wait_screen(pane, "ready>")
    wait_for(lambda: "started" in kinds(sess), what=f"{name}'s started record")
    return sess, pane


def kinds(sess):
    return [r.kind for r in sess.last_records(100, TailStats())]


PLANT = """
import json, os, sys
sys.path.insert(0, {lib!r})
from crewfile.core.paths import Crew
from crewfile.session.sessions import register
from crewfile.nudges import schedules
from crewfile.core.atomic import replace
crew = Crew({root!r})
register(crew, "evil", extra={fields!r})
sid = schedules.add(crew, 60, {message!r}, session="evil")["id"]
path = os.path.join(crew.root, "nudges", sid)
s = json.load(open(path))
s["base"]["mono"] -= 61
s["base"]["wall"] -= 61
replace(path, json.dumps(s))
for here, dirs, files in os.walk(crew.root):        # as the issue found them
    os.chmod(here, 0o755)
    for f in files:
        os.chmod(os.path.join(here, f), 0o644)
"""


@pytest.mark.parametrize("bound", [True, False], ids=["caps-dropped", "all-caps"])
@pytest.mark.parametrize("umask", UMASKS, ids=lambda m: f"umask{m:03o}")
def test_issue_28_another_users_crew_types_nothing_into_roots_pane(crew, tmux, other_user,
                                                                  shared_tmp, umask, bound):
    """As the issue found it, with root's full capabilities (which read and
    write through any mode), and with those dropped."""
    # Root's real agent in its pane, registered in root's own crew.
    w1, pane = agent(crew, tmux, "w1")
    fields = {k: v for k, v in w1.meta.items()
              if k not in ("name", "kind", "exempt", "created", "user")}
    # The other user makes a crew directory where root will be told to look,
    # plants a session naming root's pane and agent, and a due schedule
    # whose message is a command.
    evil = os.path.join(shared_tmp, "crew")
    planted = other_user.run([other_user.python, "-c", PLANT.format(
        lib=other_user.lib, root=evil, fields=fields, message=MESSAGE)], umask=umask)
    assert planted.returncode == 0, planted.stderr
    assert os.lstat(evil).st_uid == other_user.uid
    before, screen = tree(evil), tmux.screen(pane)

    r = as_root("nudge-tick", "--dir", evil, umask=umask, bound=bound)

    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr == (f"nudge-tick: crew directory not trusted: {evil} is owned by uid"
                        f" {other_user.uid}, not by you or root (fix: chown 0 {evil},"
                        " or use another --dir)\n")
    assert tree(evil) == before                            # nothing changed on disk
    assert tmux.screen(pane) == screen                     # nothing typed into the pane
    assert "captain" not in kinds(w1) and "nudge" not in kinds(w1)


def test_another_users_own_crew_naming_roots_pane_types_nothing_into_it(crew, tmux, other_user,
                                                                       shared_tmp):
    """The other way round: the other user's nudge-tick (its cron line) in a
    crew of its own, trusted by it, whose session names root's pane, agent
    and tmux server, with a due schedule. Its tick cannot reach root's
    server (the socket's directory is root's alone), so nothing is typed."""
    w1, pane = agent(crew, tmux, "w1")
    fields = {k: v for k, v in w1.reread().meta.items()
              if k not in ("name", "kind", "exempt", "created", "user")}
    assert fields["pid"] and fields["tmux_socket"] == tmux.sock
    own = os.path.join(shared_tmp, "crew")
    planted = other_user.run([other_user.python, "-c", PLANT.format(
        lib=other_user.lib, root=own, fields=fields, message=MESSAGE)])
    assert planted.returncode == 0, planted.stderr
    screen = tmux.screen(pane)

    r = other_user.command("nudge-tick", "--dir", own)

    assert r.returncode == 0, r.stderr
    assert " evil " in r.stdout and "refused" in r.stdout and "delivered" not in r.stdout
    assert tmux.screen(pane) == screen                     # nothing typed into the pane
    assert "captain" not in kinds(w1) and "nudge" not in kinds(w1)
    assert not os.path.exists("/tmp/PWNED-by-another-user")


@pytest.mark.parametrize("umask", UMASKS, ids=lambda m: f"umask{m:03o}")
def test_every_level_crewfile_creates_is_0700_and_the_owner_is_served(other_user, shared_tmp,
                                                                      umask):
    root = os.path.join(shared_tmp, "a", "b", "crew")
    r = other_user.command("session-add", "w1", "--dir", root, umask=umask)
    assert (r.returncode, r.stderr) == (0, "")
    levels = [os.path.join(shared_tmp, "a"), os.path.join(shared_tmp, "a", "b"), root,
              os.path.join(root, "sessions"), os.path.join(root, "sessions", "w1")]
    assert modes(*levels) == {p: 0o700 for p in levels}
    assert {os.lstat(p).st_uid for p in levels} == {other_user.uid}
    r = other_user.command("session-ls", "--dir", root, umask=umask)    # its own crew: served
    assert (r.returncode, r.stderr) == (0, ""), r.stderr
    assert r.stdout.splitlines()[1].split()[0] == "w1"
    # Root is refused it, at the first level the other user owns.
    r = as_root("session-ls", "--dir", root, umask=umask)
    top = os.path.join(shared_tmp, "a")
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr == (f"session-ls: crew directory not trusted: {top} is owned by uid"
                        f" {other_user.uid}, not by you or root (fix: chown 0 {top},"
                        " or use another --dir)\n")


@pytest.mark.parametrize("umask", UMASKS, ids=lambda m: f"umask{m:03o}")
def test_roots_own_new_crew_is_0700_at_every_level(tmp_path, umask):
    root = tmp_path / "x" / "y" / "crew"
    r = as_root("session-add", "w1", "--dir", root, umask=umask)
    assert (r.returncode, r.stderr) == (0, "")
    levels = [str(tmp_path / "x"), str(tmp_path / "x" / "y"), str(root),
              str(root / "sessions"), str(root / "sessions" / "w1")]
    assert modes(*levels) == {p: 0o700 for p in levels}
    assert stat.S_IMODE(os.lstat(tmp_path).st_mode) == 0o700          # existing: untouched


def refusal(command, path, why):
    fix = (f"is writable by group or others (fix: chmod go-w {path})" if why == "writable"
           else f"is owned by uid {why}, not by you or root (fix: chown 0 {path},"
                " or use another --dir)")
    return f"{command}: crew directory not trusted: {path} {fix}\n"


def test_directories_above_and_the_crew_directory_itself(other_user, tmp_path):
    """The rule, level by level: writable by others above (refused) unless
    sticky (served); the crew directory itself never writable by others,
    sticky or not; a level owned by another user refused; each refusal
    names the level and the fix."""
    up = tmp_path / "up"
    root = up / "crew"
    assert as_root("session-add", "w1", "--dir", root).returncode == 0

    os.chmod(up, 0o777)
    r = as_root("session-ls", "--dir", root)
    assert (r.returncode, r.stderr) == (1, refusal("session-ls", up, "writable"))
    os.chmod(up, 0o1777)                                   # sticky, as /tmp: allowed above
    r = as_root("session-ls", "--dir", root)
    assert (r.returncode, r.stderr) == (0, "")
    os.chmod(up, 0o755)

    for mode in (0o1777, 0o770, 0o702):
        os.chmod(root, mode)
        r = as_root("session-ls", "--dir", root)
        assert (r.returncode, r.stderr) == (1, refusal("session-ls", root, "writable")), mode
    os.chmod(root, 0o700)

    os.chown(up, other_user.uid, other_user.gid)
    r = as_root("session-ls", "--dir", root)
    assert (r.returncode, r.stderr) == (1, refusal("session-ls", up, other_user.uid))
    os.chown(up, 0, 0)
    assert as_root("session-ls", "--dir", root).returncode == 0


def test_in_a_sandbox_that_cannot_name_root_roots_levels_count_as_roots(other_user,
                                                                        shared_tmp, tmp_path):
    """Codex runs its shell commands, as a user other than root, in a user
    namespace that maps that user alone: `/` shows as owned by the overflow
    uid, and the agent's aside-conclude was refused. There it counts as
    root's; outside a namespace, a level the real uid 65534 owns is refused."""
    inside = ["unshare", "--map-current-user"]
    # An interpreter reached through a group's or an ACL's grant is not there
    # inside (those are unmapped): then the system's, of the same version.
    python = next((p for p in (other_user.python, "/usr/bin/python%d.%d" % sys.version_info[:2])
                   if other_user.run(inside + [p, "-c", "pass"]).returncode == 0), None)
    if python is None:
        pytest.skip("unshare(1) cannot make a user namespace here with a Python in it"
                    " (util-linux >= 2.38 and unprivileged user namespaces needed)")
    root = os.path.join(shared_tmp, "crew")
    assert other_user.command("session-add", "w1", "--dir", root).returncode == 0
    shown = other_user.run(inside + ["stat", "-c", "%u", "/"])
    overflow = int(open("/proc/sys/kernel/overflowuid").read())
    assert shown.stdout == f"{overflow}\n"
    r = other_user.run(inside + [python, os.path.join(other_user.bin, "status-append"),
                                 "--dir", root, "w1", "blocked", "from inside"])
    assert (r.returncode, r.stderr) == (0, "")
    with open(os.path.join(root, "sessions", "w1", "status")) as f:
        assert f.read().endswith(" blocked: from inside\n")

    up = tmp_path / "up"
    mine = up / "crew"
    assert as_root("session-add", "w1", "--dir", mine).returncode == 0
    os.chown(up, overflow, overflow)                # the real user nobody
    r = as_root("session-ls", "--dir", mine)
    assert (r.returncode, r.stderr) == (1, refusal("session-ls", up, overflow))


def test_a_directory_inside_the_crew_that_others_may_write_is_not_believed(other_user,
                                                                          shared_tmp):
    """The crew directory 0755 (others may enter it, not write it) and a
    directory inside it writable by others: there the other user could
    rename or remove the owner's files (files the owner's, so believed):
    swap two sessions, drop a schedule. Such a directory is refused, named
    with its fix; one session's alone is that entry's."""
    root = os.path.join(shared_tmp, "crew")
    for name in ("w1", "w2"):
        assert as_root("session-add", name, "--dir", root).returncode == 0
    os.chmod(root, 0o755)
    sessions = Path(root, "sessions")
    os.chmod(sessions, 0o777)
    moved = other_user.run(["mv", str(sessions / "w1"), str(sessions / "w3")])
    assert moved.returncode == 0, moved.stderr                  # what the mode allows
    r = as_root("session-ls", "--dir", root)
    assert (r.returncode, r.stdout) == (111, "")
    assert r.stderr == (f"session-ls: {sessions}: writable by group or others: not believed"
                        f" (fix: chmod go-w {sessions})\n")
    os.chmod(sessions, 0o700)
    os.chmod(sessions / "w2", 0o757)
    r = as_root("session-ls", "--dir", root)
    why = f"{sessions / 'w2'}: writable by group or others: not believed"
    assert r.returncode == 5
    assert r.stderr == f"session-ls: w2: {why} (fix: chmod go-w {sessions / 'w2'})\n"
    assert [line.split()[:2] for line in r.stdout.splitlines()[1:]] == [["w2", "?"], ["w3", "crew"]]


def test_a_linked_crew_directory_is_judged_where_it_leads_and_by_the_link(other_user, tmp_path):
    real = tmp_path / "real"
    assert as_root("session-add", "w1", "--dir", real / "crew").returncode == 0
    link = tmp_path / "link"
    os.symlink(real / "crew", link)
    r = as_root("session-ls", "--dir", link)
    assert (r.returncode, r.stderr) == (0, "")             # a link to a trusted crew: served
    os.chown(real, other_user.uid, other_user.gid)         # where it leads: another's
    r = as_root("session-ls", "--dir", link)
    assert (r.returncode, r.stderr) == (1, refusal("session-ls", real, other_user.uid))
    os.chown(real, 0, 0)
    os.lchown(link, other_user.uid, other_user.gid)        # the link itself: another's
    r = as_root("session-ls", "--dir", link)
    assert (r.returncode, r.stderr) == (1, refusal("session-ls", link, other_user.uid))


def test_the_hook_in_another_users_crew_writes_nothing(other_user, shared_tmp):
    evil = os.path.join(shared_tmp, "crew")
    assert other_user.command("session-add", "w1", "--dir", evil).returncode == 0
    before = tree(evil)
    payload = json.dumps({"hook_event_name": "SessionStart", "session_id": "s1",
                          "source": "startup", "cwd": "/"})
    r = subprocess.run([*bound_by_modes(), sys.executable, os.path.join(BIN, "crew-hook")],
                       input=payload, capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, CREWFILE_DIR=evil, CREWFILE_SESSION="w1"))
    assert r.returncode == 0                               # a hook never fails its agent
    assert f"crew directory not trusted: {evil} is owned by uid {other_user.uid}" in r.stderr
    assert r.stderr.count("\n") == 1
    assert tree(evil) == before


def test_a_file_another_user_owns_is_not_believed_and_the_rest_is_served(crew, tmux, other_user):
    """A trusted crew with one session's meta owned by another user: that
    session alone is refused and said once; its schedule is held (never
    typed, never disarmed); the others are listed and nudged."""
    w1, pane1 = agent(crew, tmux, "w1")
    w2, pane2 = agent(crew, tmux, "w2")
    add = [cmd("nudge-add", "--session", n, "--every", "60", "--message", f"go {n}")
           for n in ("w1", "w2")]
    sids = [a.stdout.strip() for a in add]
    for sid in sids:
        path = os.path.join(crew.root, "nudges", sid)
        s = json.load(open(path))
        s["base"]["mono"] -= 61
        s["base"]["wall"] -= 61
        with open(path, "w") as f:
            json.dump(s, f)
    meta = os.path.join(w2.dir, "meta")
    os.chown(meta, other_user.uid, other_user.gid)
    os.chmod(meta, 0o644)                                  # readable: only its owner is wrong
    screen2 = tmux.screen(pane2)

    r = cmd("session-ls", bound=True)
    why = f"{meta}: owned by uid {other_user.uid}, not by you or root: not believed"
    assert r.returncode == 5
    assert r.stderr == f"session-ls: w2: {why}\n"
    rows = [line.split()[:2] for line in r.stdout.splitlines()[1:]]
    assert rows[0][0] == "w1" and rows[0][1] == "crew"
    assert rows[1] == ["w2", "?"]

    r = cmd("nudge-tick", bound=True)
    assert r.returncode == 0, r.stderr
    assert f"{sids[0]} w1 delivered" in r.stdout
    assert f"{sids[1]} - refused: damaged: session metadata unreadable: {why}\n" in r.stdout
    wait_for(lambda: "captain" in kinds(w1), what="w1's nudge taken")
    held = schedules.get(crew, sids[1])
    assert (held["armed"], held["attempts"], held["last_outcome"]) == (True, 0, "refused")
    assert tmux.screen(pane2) == screen2
    assert "captain" not in kinds(w2)


def make_due(crew, sid):
    path = os.path.join(crew.root, "nudges", sid)
    s = json.load(open(path))
    s["base"]["mono"] -= s["every"] + 1
    s["base"]["wall"] -= s["every"] + 1
    with open(path, "w") as f:
        json.dump(s, f)


@pytest.mark.parametrize("how", ["mode-000", "link-to-etc", "fifo", "regular-file"])
def test_a_session_directory_that_cannot_be_used_is_named_and_its_schedule_held(crew, how):
    """Issue 30, items 2 and 3: sessions/w1 unreadable, or something else in
    its place. session-ls lists w2 and marks w1 (said once, exit 5);
    nudge-tick holds w1's schedule, never disarms it as not live."""
    register(crew, "w1")
    register(crew, "w2")
    sid = cmd("nudge-add", "--session", "w1", "--every", "60", "--message", "go",
              check=True).stdout.strip()
    make_due(crew, sid)
    d = os.path.join(crew.root, "sessions", "w1")
    if how == "mode-000":
        os.chmod(d, 0)
    else:
        shutil.rmtree(d)
        if how == "link-to-etc":
            os.symlink("/etc", d)
        elif how == "fifo":
            os.mkfifo(d)
        else:
            open(d, "w").close()
    why = {"mode-000": f"{d}/status: Permission denied",
           "link-to-etc": f"{d}: a symlink is not followed"}.get(how, f"{d}: not a directory")
    try:
        r = cmd("session-ls", bound=True)
        assert (r.returncode, r.stderr) == (5, f"session-ls: w1: {why}\n")
        rows = [line.split()[:3] for line in r.stdout.splitlines()[1:]]
        assert rows == [["w1", "?", "?"], ["w2", "crew", "no"]]

        r = cmd("nudge-tick", bound=True)
        meta_why = why.replace("/status:", "/meta:")
        assert (r.returncode, r.stderr) == (0, "")
        assert r.stdout.endswith(f" {sid} - refused: damaged: session metadata unreadable:"
                                 f" {meta_why}\n")
        assert r.stdout.count("\n") == 1
        held = schedules.get(crew, sid)
        assert (held["armed"], held["attempts"], held["last_code"]) == (True, 0, "damaged")
    finally:
        if how == "mode-000":
            os.chmod(d, 0o700)


def test_a_tmux_server_another_user_may_not_reach_is_unknown_not_gone(tmux, other_user):
    """tmux answers `error connecting to SOCKET (Permission denied)` for a
    server whose socket another user may not reach. Read as gone, the
    session would be not-live: a schedule disarmed, crew-respawn free to
    start its agent again. It is unknown; a socket with nothing behind it
    is still gone."""
    ask = ("import sys; sys.path.insert(0, {lib!r}); from crewfile.session.tmux import Server;"
           " s = Server({sock!r}); print(s.state); print(s.error)")
    nothing = os.path.join(tempfile.gettempdir(), f"crewfile-no-tmux-{os.getpid()}")
    said = {}
    for sock in (tmux.sock, nothing):
        r = other_user.run([other_user.python, "-c", ask.format(lib=other_user.lib, sock=sock)])
        assert r.returncode == 0, r.stderr
        said[sock] = r.stdout.split("\n")[:2]
    assert said[tmux.sock][0] == "unknown" and "Permission denied" in said[tmux.sock][1], said
    assert said[nothing][0] == "gone", said


# -- an agent CLI's files outside the crew directory (its transcript, its
# rollout): believed only when the effective user owns them, root included,
# and no other user may write them.

def give_away(path, user):
    os.chown(path, user.uid, user.gid)
    os.chmod(path, 0o644)                                  # readable: only its owner is wrong


def not_yours(path, uid):
    return f"{path}: owned by uid {uid}, not by you: not believed"


def done_typed(crew, aside_window, tmp_path):
    """An aside a1 where the captain typed /aside-done: (its Session, its
    transcript's path, a report to conclude with)."""
    aside_window("a1")
    captain_types(crew, "a1", "/aside-done")
    sess = Session(crew, "a1")
    report = tmp_path / "report.md"
    report.write_text("# done\n")
    return sess, sess.meta["transcript_path"], report


def test_an_aside_conclusion_is_not_believed_from_another_users_transcript(crew, aside_window,
                                                                           other_user, tmp_path):
    sess, path, report = done_typed(crew, aside_window, tmp_path)
    give_away(path, other_user)

    r = cmd("aside-conclude", "a1", "--report", report)

    assert (r.returncode, r.stdout) == (111, "")
    assert r.stderr == f"aside-conclude: {not_yours(path, other_user.uid)}\n"
    assert "concluded" not in kinds(sess)
    new = crew.sub("reports", "new")
    assert not os.path.isdir(new) or not os.listdir(new)      # no report delivered
    os.chown(path, 0, 0)                                   # root's own, as root: believed
    r = cmd("aside-conclude", "a1", "--report", report)
    assert r.returncode == 0, r.stderr
    assert kinds(sess)[-1] == "concluded"


def test_tokens_of_another_users_transcript_are_not_counted(crew, other_user, tmp_path):
    path = tmp_path / "firstmate.jsonl"
    shutil.copy(PRIMARY, path)
    register(crew, "firstmate", kind="primary").update_meta(transcript_path=str(path))
    assert cmd("crew-status").stdout == "1 idle 96 tok\n"          # its tally now cached
    give_away(path, other_user)

    assert tokens.read(str(path)) is None
    r = cmd("crew-status")
    assert (r.returncode, r.stdout) == (0, "1 idle\n"), r.stderr
    r = cmd("crew-top", "--once")
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert out[1].split()[7] == "-"
    assert "wake turns: firstmate names no transcript that can be read" in out


def test_another_users_transcript_is_not_kept_nor_read_for_a_goal(other_user, tmp_path):
    source, kept = tmp_path / "t.jsonl", tmp_path / "kept"
    source.write_text(json.dumps({"type": "attachment", "attachment": {
        "type": "goal_status", "met": False, "condition": "tests pass"}}) + "\n")
    assert keep_transcript({"transcript_path": str(source)}, str(kept)) == (str(kept), None)
    assert claudecron.armed_goal(str(source)) == "tests pass"
    os.unlink(kept)
    give_away(source, other_user)

    assert keep_transcript({"transcript_path": str(source)}, str(kept)) == (
        None, f"its transcript was not kept: {not_yours(source, other_user.uid)}")
    assert not kept.exists()
    assert claudecron.armed_goal(str(source)) is None


def test_no_exception_for_root_a_users_crewfile_refuses_roots_transcript(other_user, shared_tmp):
    source = os.path.join(shared_tmp, "t.jsonl")
    with open(source, "w") as f:
        f.write("{}\n")
    os.chmod(source, 0o644)
    ask = ("import sys; sys.path.insert(0, {lib!r});"
           " from crewfile.session.window import keep_transcript;"
           " print(keep_transcript({{'transcript_path': {source!r}}}, {kept!r})[1])")
    kept = os.path.join(shared_tmp, "kept")
    r = other_user.run([other_user.python, "-c",
                        ask.format(lib=other_user.lib, source=source, kept=kept)])
    assert (r.returncode, r.stderr) == (0, "")
    assert r.stdout == f"its transcript was not kept: {not_yours(source, 0)}\n"
    assert not os.path.exists(kept)


def writable_by_others(path):
    return f"{path}: writable by others: not believed (fix: chmod o-w {path})"


def test_an_aside_conclusion_is_not_believed_from_a_transcript_others_may_write(
        crew, aside_window, tmp_path):
    """The user's own transcript, but world-writable: any user could have
    written the captain's words there. No second user needed: run as anyone."""
    sess, path, report = done_typed(crew, aside_window, tmp_path)
    os.chmod(path, 0o646)

    r = cmd("aside-conclude", "a1", "--report", report)

    assert (r.returncode, r.stdout) == (111, "")
    assert r.stderr == f"aside-conclude: {writable_by_others(path)}\n"
    assert "concluded" not in kinds(sess)
    os.chmod(path, 0o644)                                  # the fix it names
    r = cmd("aside-conclude", "a1", "--report", report)
    assert r.returncode == 0, r.stderr
    assert kinds(sess)[-1] == "concluded"


def test_a_transcript_a_group_with_another_user_may_write_is_not_believed(crew, other_user,
                                                                          tmp_path):
    """Group-writable, the group another user's: not believed; the user's
    own private group (root's here: no other member) may write it."""
    path = tmp_path / "firstmate.jsonl"
    shutil.copy(PRIMARY, path)
    register(crew, "firstmate", kind="primary").update_meta(transcript_path=str(path))
    os.chown(path, 0, other_user.gid)
    os.chmod(path, 0o664)

    assert tokens.read(str(path)) is None
    assert keep_transcript({"transcript_path": str(path)}, str(tmp_path / "kept")) == (
        None, f"its transcript was not kept: {path}: writable by group {other_user.gid},"
              f" which is not yours alone: not believed (fix: chmod g-w {path})")
    assert cmd("crew-status").stdout == "1 idle\n"
    if own_private_group():
        os.chown(path, 0, os.getegid())                    # root's group, root's alone
        assert cmd("crew-status").stdout == "1 idle 96 tok\n"


def grant_write_by_acl(path, uid):
    """An access ACL letting the user *uid* write *path* (setfacl -m u:UID:rw,
    in the kernel's xattr format: version 2, then tag, permissions, id)."""
    none = 0xFFFFFFFF
    entries = [(0x01, 6, none), (0x02, 6, uid), (0x04, 4, none), (0x10, 6, none),
               (0x20, 4, none)]      # user::rw- user:UID:rw- group::r-- mask::rw- other::r--
    os.setxattr(path, "system.posix_acl_access",
                struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *e) for e in entries))


def test_a_transcript_an_acl_lets_another_user_write_is_not_believed(crew, other_user,
                                                                    shared_tmp):
    """The group bits of a file with an ACL are its mask: 0664 in the user's
    own group, yet another user named in the ACL may write it."""
    if not own_private_group():
        pytest.skip("root's group has other members here: refused for that first")
    path = os.path.join(shared_tmp, "firstmate.jsonl")
    shutil.copy(PRIMARY, path)
    os.chown(path, 0, os.getegid())
    os.chmod(path, 0o644)
    register(crew, "firstmate", kind="primary").update_meta(transcript_path=path)
    try:
        grant_write_by_acl(path, other_user.uid)
    except OSError as e:
        pytest.skip(f"no ACL on this file system: {e.strerror}")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o664
    forged = other_user.run(["sh", "-c", f"echo '{{}}' >> {path}"])
    assert forged.returncode == 0, forged.stderr                # what the ACL allows

    assert tokens.read(path) is None
    assert keep_transcript({"transcript_path": path}, os.path.join(shared_tmp, "kept")) == (
        None, f"its transcript was not kept: {path}: writable by others through its ACL:"
              f" not believed (fix: chmod g-w {path})")
    assert cmd("crew-status").stdout == "1 idle\n"
    os.chmod(path, 0o644)                                  # the fix it names: the mask r--
    assert cmd("crew-status").stdout == "1 idle 96 tok\n"


def own_private_group():
    """Is this user's primary group its own alone (Debian's user private groups)?"""
    me = pwd.getpwuid(os.geteuid())
    return (set(grp.getgrgid(me.pw_gid).gr_mem) <= {me.pw_name}
            and all(u.pw_uid == me.pw_uid for u in pwd.getpwall() if u.pw_gid == me.pw_gid))


def codex_rollout(tmp_path, port):
    """Codex's rollout of one `codex exec` turn under umask 002 (its home is
    agent_rigs', ended and removed by the caller's stop)."""
    home = codex_home()
    work = tmp_path / "work"
    work.mkdir()
    write_codex_config(home, port, work)
    env = dict(os.environ, CODEX_HOME=home, HOME=home, FAKE_KEY="x")
    run_checked([agent_clis.codex(REPO), "exec", "--skip-git-repo-check", "hello"], env=env,
                cwd=work, timeout=DEADLINE, preexec_fn=lambda: os.umask(0o002))
    return glob.glob(os.path.join(home, "sessions", "*", "*", "*", "rollout-*.jsonl")), home


def gemini_chat(tmp_path, port):
    """Gemini CLI's chat file of one headless turn under umask 002, its work
    folder trusted as Gemini records a user's answer."""
    home, work = str(tmp_path / "home"), tmp_path / "work"
    work.mkdir()
    gemini_settings(home)
    with open(os.path.join(home, ".gemini", "trustedFolders.json"), "w") as f:
        json.dump({str(work): "TRUST_FOLDER"}, f)
    env = dict(os.environ, HOME=home, GEMINI_API_KEY="x", TMPDIR=str(tmp_path),
               GOOGLE_GEMINI_BASE_URL=f"http://127.0.0.1:{port}")
    env.pop("GEMINI_CLI_TRUST_WORKSPACE", None)
    run_checked([agent_clis.gemini(REPO), "-y", "-p", "hello"], env=env, cwd=work,
                stdin=subprocess.DEVNULL, timeout=DEADLINE, preexec_fn=lambda: os.umask(0o002))
    return glob.glob(os.path.join(home, ".gemini", "tmp", "*", "chats", "session-*.jsonl")), home


def stop_codex(home):
    stop_codex_daemons(home)
    shutil.rmtree(home, ignore_errors=True)


# agent: (installed, its stand-in model server, one turn's file, the end of what it left)
CLI_FILES = {"codex": (agent_clis.codex, "responses_server.py", codex_rollout, stop_codex),
             "gemini": (agent_clis.gemini, "gemini_server.py", gemini_chat, stop_geminis)}


@pytest.mark.parametrize("agent", sorted(CLI_FILES))
def test_a_real_clis_own_file_under_umask_002_is_believed_and_world_writable_is_not(
        agent, tmp_path):
    """Codex and Gemini CLI write their files 0664 under umask 002 (Claude
    Code its transcripts 0600): the user's private group may write, so the
    file is believed (its tokens counted); made world-writable, it is not."""
    installed, server, turn, stop = CLI_FILES[agent]
    if not installed(REPO):
        pytest.skip(f"{agent} not installed in .cache (make {agent})")
    if not own_private_group():
        pytest.skip("this user's primary group has other members: its 0664 files are"
                    " rightly not believed")
    home = None
    try:
        with stand_in_server(server, str(tmp_path / "requests.log")) as port:
            found, home = turn(tmp_path, port)
        assert len(found) == 1, found
        path = found[0]
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o664
        tally = tokens.read(path)
        assert tally is not None and tally.total > 0
        os.chmod(path, 0o666)
        assert tokens.read(path) is None
    finally:
        if home:
            stop(home)


@pytest.mark.parametrize("mode,group", [(0o666, "own"), (0o662, "own"), (0o660, "other")],
                         ids=["others-write", "others-write-only", "another-group"])
def test_a_file_inside_the_crew_another_user_may_write_is_not_believed(other_user, shared_tmp,
                                                                        mode, group):
    """The crew directory 0755 (others may enter it) and one session's files
    made writable by others (a umask 000 shell, a chmod): the other user
    can write records there, so w1's status and meta are not believed
    (said with the fix); w2 is served. The same files group-writable by
    the owner's own private group are believed (umask 002)."""
    root = os.path.join(shared_tmp, "crew")
    for name in ("w1", "w2"):
        assert as_root("session-add", name, "--dir", root).returncode == 0
        assert as_root("status-append", name, "--dir", root, "working").returncode == 0
    os.chmod(root, 0o755)
    sessions = Path(root, "sessions")
    os.chmod(sessions, 0o755)
    for name in ("w1", "w2"):
        os.chmod(sessions / name, 0o755)
    status, meta = sessions / "w1" / "status", sessions / "w1" / "meta"
    gid = other_user.gid if group == "other" else 0
    for path in (status, meta):
        os.chown(path, 0, gid)
        os.chmod(path, mode)
    if mode & 0o002:
        forged = other_user.run(["sh", "-c", f"echo forged >> {status}"])
        assert forged.returncode == 0, forged.stderr              # what the mode allows
    if group == "other":
        why = f"writable by group {gid}, which is not yours alone: not believed (fix: chmod g-w"
    else:
        why = "writable by others: not believed (fix: chmod o-w"
    said = [f"{path}: {why} {path})\n" for path in (status, meta)]   # the first it opens
    r = as_root("status-show", "w1", "--dir", root)
    assert (r.returncode, r.stdout) == (111, "")
    assert r.stderr in [f"status-show: {line}" for line in said]
    r = as_root("session-ls", "--dir", root)
    assert r.returncode == 5
    assert r.stderr in [f"session-ls: w1: {line}" for line in said]
    assert [line.split()[:2] for line in r.stdout.splitlines()[1:]] == [["w1", "?"], ["w2", "crew"]]
    r = as_root("status-show", "w2", "--dir", root)
    assert (r.returncode, r.stderr) == (0, "")

    for path in (status, meta):                 # the owner's private group (root's): believed
        os.chown(path, 0, 0)
        os.chmod(path, 0o664)
    if not own_private_group():
        return                                  # root's group is shared here (as on Fedora)
    r = as_root("status-show", "w1", "--dir", root)
    forged = "status-show: w1: skipped 1 malformed line\n" if mode & 0o002 else ""
    assert (r.returncode, r.stderr) == (0, forged)
