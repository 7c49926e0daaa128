"""Shared fixtures: a fresh crew directory per test, the real commands, a
private tmux server (never the one the person running the tests works in)."""
import ctypes
import importlib.util
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(REPO, "bin")
sys.path.insert(0, os.path.join(REPO, "lib"))

from crewfile.asides import aside, captain, evidence  # noqa: E402
from crewfile.asides.evidence import newest_input  # noqa: E402
from crewfile.core.atomic import replace  # noqa: E402
from crewfile.core.paths import Crew  # noqa: E402
from crewfile.session.prompt import prompt_tail, still_holds  # noqa: E402
from crewfile.session.sessions import Session, pane_fields, register  # noqa: E402
from terminal import AttachedClient, Tmux, wait_for  # noqa: E402,F401 (the person at a terminal)
from transcript import append_prompt  # noqa: E402

SKIPPED = os.path.join(REPO, ".cache", "skipped")
_skipped = []


def pytest_sessionstart(session):
    """A new run: forget the skips of the last one."""
    try:
        os.unlink(SKIPPED)
    except FileNotFoundError:
        pass


def pytest_runtest_logreport(report):
    if report.skipped and not hasattr(report, "wasxfail"):
        why = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        why = " ".join(why.removeprefix("Skipped: ").split()).strip("* ")
        _skipped.append((report.nodeid, why))


def pytest_terminal_summary(terminalreporter):
    """Every skipped test named with its reason (pytest's -rs folds them by
    place), and written to .cache/skipped (test, a tab, the reason), which
    `make test` reads out again at its very end, with bats' skips."""
    if not _skipped:
        return
    terminalreporter.section(f"{len(_skipped)} TESTS SKIPPED", sep="!", red=True, bold=True)
    for test, why in _skipped:
        terminalreporter.line(f"SKIPPED {test}: {why}", red=True)
    os.makedirs(os.path.dirname(SKIPPED), exist_ok=True)
    with open(SKIPPED, "w") as f:
        f.writelines(f"{test}\t{why}\n" for test, why in _skipped)


@pytest.fixture
def crew(tmp_path, monkeypatch):
    """A fresh crew directory, also exported as CREWFILE_DIR."""
    root = tmp_path / "crew"
    monkeypatch.setenv("CREWFILE_DIR", str(root))
    monkeypatch.delenv("TMUX", raising=False)
    return Crew(str(root))


def bound_by_modes():
    """The argv prefix that runs a command bound by file modes: nothing for a
    user, who is; for root, setpriv(1) (util-linux) drops the capabilities
    that override them, so a directory of mode 0500 really refuses a write."""
    if os.geteuid() != 0:
        return []
    caps = "-dac_override,-dac_read_search"
    return ["setpriv", f"--inh-caps={caps}", f"--bounding-set={caps}", "--"]


def drop_mode_overrides():
    """bound_by_modes for this process (a forked child that runs a command
    without exec): as root, capset(2) drops the same two capabilities from
    the effective and permitted sets; nothing for a user."""
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)       # _LINUX_CAPABILITY_VERSION_3, self
    data = (ctypes.c_uint32 * 6)()                      # 2 x (effective, permitted, inheritable)
    if libc.capget(header, data) != 0:
        raise OSError(ctypes.get_errno(), "capget")
    keep = ~(1 << 1 | 1 << 2) & 0xFFFFFFFF              # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
    for i in range(3):
        data[i] &= keep
    if libc.capset(header, data) != 0:
        raise OSError(ctypes.get_errno(), "capset")


def cmd(name, *args, input=None, env=None, check=False, timeout=60, bound=False, cwd=None):
    """Run bin/NAME with this interpreter (in *cwd*); returns CompletedProcess (text).
    bound=True: bound by file modes even as root (see bound_by_modes)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    if isinstance(input, str):
        input = input.encode()
    prefix = bound_by_modes() if bound else []
    proc = subprocess.run([*prefix, sys.executable, os.path.join(BIN, name), *map(str, args)],
                          input=input, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=full_env, timeout=timeout, cwd=cwd)
    proc.stdout = proc.stdout.decode("utf-8", "replace")
    proc.stderr = proc.stderr.decode("utf-8", "replace")
    if check and proc.returncode != 0:
        raise AssertionError(f"{name} {args} -> {proc.returncode}: {proc.stderr}")
    return proc


@pytest.fixture
def run():
    return cmd


class PaneEnded(AssertionError):
    """A pane waited on is gone or its command ended: no use waiting on."""


class TmuxServer(Tmux):
    """A private tmux server on a socket in the test's own temp dir."""

    # What a pane started with keep=True prints when its command ends.
    EXITED = "[test pane: command exited "
    # What Codex shows under a prompt it took while its start is still running.
    STARTING = "Waiting for startup"

    def __init__(self, sock):
        super().__init__(sock)
        self.context = []     # callables: more to show when a wait on a pane fails

    def new_window(self, command, name="w", session="crew", env=None, keep=False):
        """Start *command* in a new window; return its pane id (%N). With
        *keep*, the window outlives the command and shows its exit status
        (the waits below then fail at once, showing it): an agent that ends
        early is not a pane gone with 'no current target'."""
        if keep:
            command = f'{command}; echo "{self.EXITED}$?]"; exec sleep 3600'
        envargs = []
        for k, v in (env or {}).items():
            envargs += ["-e", f"{k}={v}"]
        exists = subprocess.run(["tmux", "-S", self.sock, "has-session", "-t", session],
                                capture_output=True).returncode == 0
        if not exists:
            # exit-empty off: a test that closes the last window does not leave
            # a server shutting down under the next new-session ("server
            # exited unexpectedly"); kill() ends it and waits until it is gone.
            return self("new-session", "-d", "-s", session, "-n", name, "-x", "200", "-y", "50",
                        "-P", "-F", "#{pane_id}", *envargs, command,
                        ";", "set-option", "-s", "exit-empty", "off").strip()
        return self("new-window", "-d", "-t", session, "-n", name, "-P", "-F", "#{pane_id}",
                    *envargs, command).strip()

    def window_with_id(self, pane_id, name, command, session="other"):
        """A window named *name* whose pane has id *pane_id* (windows are opened
        until the server numbers one so): a session's pane id as another
        server would misread it. Returns the pane id."""
        while True:
            pane = self.new_window(command, name=name, session=session)
            if pane == pane_id:
                return pane
            assert int(pane[1:]) < int(pane_id[1:]), (pane, pane_id)

    def pane_pid(self, pane):
        """The pid of the process the pane runs (its first process)."""
        return int(self("display-message", "-p", "-t", pane, "#{pane_pid}").strip())

    def screen(self, pane, history=False):
        args = ["capture-pane", "-p", "-J", "-t", pane]
        if history:
            args += ["-S", "-"]
        return self(*args, check=False)

    def wait_screen(self, pane, predicate, timeout=20):
        """Wait until the pane's screen satisfies predicate (or contains a
        string); a pane gone or its command ended fails at once, saying so."""
        test = predicate if callable(predicate) else (lambda s: predicate in s)
        deadline = time.monotonic() + timeout
        while True:
            text = self.screen(pane)
            if test(text):
                return text
            if self.EXITED in text or not self.pane_exists(pane):
                raise PaneEnded(f"pane {pane} ended, never showed {predicate!r}"
                                     + self.explain(pane))
            if time.monotonic() > deadline:
                raise AssertionError(f"pane {pane} never showed {predicate!r}"
                                     + self.explain(pane))
            time.sleep(0.02)

    def enter_until_taken(self, pane, text, taken, markers, timeout=120, look=5.0,
                          person=None, after=0):
        """Press Enter on *text* typed at the pane's prompt, as the captain
        does (at *person*'s terminal, in a whole second after epoch time
        *after*, if given: see AttachedClient.type_after; else with
        send-keys): again (three times at most) while *taken*() is false and the
        prompt line still holds the text *look* seconds after an Enter.
        Agent CLIs make an Enter that comes right behind typed keys a
        newline (Gemini CLI: one read within 30 ms of a key, its
        bufferFastReturn; Codex: a paste burst), and a look at the screen
        can come sooner than that. A spare Enter on an empty prompt line
        sends nothing."""
        deadline = time.monotonic() + timeout
        for _ in range(3):
            if person:
                person.type_after(after, b"\r")
            else:
                self("send-keys", "-t", pane, "Enter")
            again = time.monotonic() + look
            while not taken():
                now = time.monotonic()
                if now > again:
                    screen = self.screen(pane)
                    # Codex keeps a taken prompt on its line while its start
                    # runs (hooks, a slow machine: over 15 s at load 15), and
                    # would take a second Enter as a second prompt
                    if still_holds(screen, text, markers) and self.STARTING not in screen:
                        break
                if now > deadline:
                    raise AssertionError(f"{text!r} was never taken" + self.explain(pane))
                time.sleep(0.05)
            else:
                return
        raise AssertionError(f"{text!r} stayed on the prompt line after three Enters"
                             + self.explain(pane))

    def pane_exists(self, pane):
        return pane in self("list-panes", "-a", "-F", "#{pane_id}", check=False).split()

    def explain(self, pane):
        """The pane's screen with its history (or that it is gone), and the
        test's own context (a stand-in server's requests): for a failure."""
        if self.pane_exists(pane):
            seen = [f"; screen with history:\n{self.screen(pane, history=True).rstrip()}"]
        else:
            seen = ["; the pane is gone (started without keep=True, its end is not known)"]
        for more in self.context:
            try:
                seen.append(str(more()))
            except Exception as e:      # a failure report must not fail itself
                seen.append(f"({more!r}: {e!r})")
        return "\n".join(seen)

    def choose(self, pane, key, chosen, timeout=120):
        """Press *key* in a dialog until the screen shows *chosen* (the option
        marked, or a predicate): a key pressed as the dialog appears can be
        lost, so it is pressed again. Codex drains the terminal's input just
        after drawing a screen that takes a security-sensitive decision (its
        tui/input_boundary.rs): strace showed that drain read a 'y' meant for
        its permission dialog, which then stayed up for good."""
        deadline = time.monotonic() + timeout
        while True:
            # a pane gone: the wait below says so, with what is known
            self("send-keys", "-t", pane, key, check=False)
            try:
                return self.wait_screen(pane, chosen, timeout=2)
            except PaneEnded:
                raise
            except AssertionError:
                if time.monotonic() > deadline:
                    raise

    def wait_prompt(self, pane, timeout=20):
        """Wait until the pane's agent is back at an empty prompt line (its turn
        printed and done): what aside-reconcile needs to see before a teardown."""

        def empty(screen):
            found = prompt_tail(screen)
            return found is not None and found[0] == ""
        return self.wait_screen(pane, empty, timeout)

    def kill(self):
        """Kill the server and wait until it no longer answers on its socket."""
        subprocess.run(["tmux", "-S", self.sock, "kill-server"], capture_output=True)
        wait_for(lambda: subprocess.run(["tmux", "-S", self.sock, "list-sessions"],
                                        capture_output=True).returncode != 0,
                 what="the tmux server to be gone")

    def agent_window(self, crew, name, command, **meta):
        """Register session NAME, then open *command* in a window for it: in
        this order, so the agent's first record (its hook, at start) finds its
        session, as aside-open does it. Returns (session, pane id)."""
        sess = register(crew, name, **meta)
        pane = self.new_window(command, name=name, env={"CREWFILE_SESSION": name,
                                                        "CREWFILE_DIR": crew.root})
        sess.update_meta(**pane_fields(pane, {"CREWFILE_TMUX": self.sock}))
        return sess, pane


@pytest.fixture
def tmux(monkeypatch):
    if not shutil.which("tmux"):
        pytest.fail("tmux is not installed (make test installs it)")
    short = tempfile.mkdtemp(prefix="cf-tmux-")   # socket paths must stay under ~107 bytes
    sock = os.path.join(short, "sock")
    monkeypatch.setenv("CREWFILE_TMUX", sock)
    monkeypatch.delenv("TMUX", raising=False)
    server = TmuxServer(sock)
    yield server
    server.kill()
    shutil.rmtree(short, ignore_errors=True)


@pytest.fixture
def second_server():
    """Another private tmux server, which CREWFILE_TMUX does not name."""
    d = tempfile.mkdtemp(prefix="cf-tmux2-")
    server = TmuxServer(os.path.join(d, "sock"))
    yield server
    server.kill()
    shutil.rmtree(d, ignore_errors=True)


def crash_and_respawn(tmux, sess, command, timeout=120):
    """Kill every process of the session's agent (its process group: Gemini
    CLI runs itself again as a child), wait for its dead pane, check that
    crew-respawn's dry run would run *command* in the session's tree, run
    it; return the session read again."""
    meta = sess.reread().meta
    os.killpg(meta["pid"], signal.SIGKILL)
    wait_for(lambda: tmux("display-message", "-p", "-t", meta["tmux"],
                          "#{pane_dead}").strip() == "1", timeout=timeout, what="the dead pane")
    r = cmd("crew-respawn", "--dry-run", "--json")
    assert json.loads(r.stdout) == [{"name": sess.name, "action": "would-respawn",
                                     "detail": f"in {meta['cwd']}: {command}"}], r.stderr
    r = cmd("crew-respawn", sess.name)
    assert r.returncode == 0, r.stderr
    return sess.reread()


def protocol_section(heading):
    """The text of protocol.md's `### HEADING` section: a table the code mirrors."""
    with open(os.path.join(REPO, "protocol.md"), encoding="utf-8") as f:
        text = f.read()
    return text.split(f"\n### {heading}\n", 1)[1].split("\n### ", 1)[0]


def load_trace():
    """tests/trace.py loaded by its path: `import trace` is the standard library's."""
    spec = importlib.util.spec_from_file_location("crew_trace", os.path.join(REPO, "tests", "trace.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def spawn_fake(crew, cwd, agent, command, *extra):
    """`crew-spawn w1 --agent AGENT --cmd COMMAND` (COMMAND a line running
    tests/fake-agent as that agent would start) in *cwd*, no worktree, in
    tmux session `crew`; returns w1's Session."""
    r = cmd("crew-spawn", "w1", "--agent", agent, "--cmd", command, "--no-worktree",
            "--tmux-session", "crew", *extra, cwd=cwd, timeout=300)
    assert r.returncode == 0, r.stderr
    return Session(crew, "w1")


def make_due(crew, sid):
    """Move the schedule's floor into the past (what waiting `every` seconds does)."""
    path = os.path.join(crew.root, "nudges", sid)
    s = json.load(open(path))
    s["base"]["mono"] -= s["every"] + 1
    s["base"]["wall"] -= s["every"] + 1
    replace(path, json.dumps(s))


def captain_types(crew, name, text, person=None):
    """The captain submits *text* to session NAME's agent, as Claude Code does
    it: keys typed by a person in a tmux client looking at the session's pane
    (*person*, else the AttachedClient open on the session's server; the
    session needs a pane), then the prompt hook (record_captain_input with a
    prompt id), then the prompt in the agent's transcript (meta
    transcript_path; one is made and recorded if the session has none).
    Returns the kind recorded."""
    sess = Session(crew, name)
    path = sess.meta.get("transcript_path")
    if not path:
        path = os.path.join(os.path.dirname(crew.root), f"transcript-{name}.jsonl")
        sess.update_meta(transcript_path=path)
    captain_keys(sess, text.encode("utf-8", "replace") + b"\r", person)
    prompt_id = str(uuid.uuid4())
    kind = captain.record_captain_input(crew, name, text, prompt_id, path)
    append_prompt(path, text, prompt_id)
    return kind


@pytest.fixture
def aside_window(crew, tmux):
    """make(name): aside NAME registered in a window that only reads keys,
    and the captain at a terminal looking at it (AttachedClient, closed at
    the end): the library's view of an aside whose captain can type."""
    people = []

    def make(name, **meta):
        sess, pane = tmux.agent_window(crew, name, "cat >/dev/null", kind="aside", **meta)
        people.append(AttachedClient(tmux, pane))
        return sess.reread()
    yield make
    for person in reversed(people):
        person.close()


@pytest.fixture
def concluded(crew, tmux, run, tmp_path):
    """Aside a1 (fake agent) concluded after one captain turn: (pane, report's path in cur/ to be)."""
    tmux("new-session", "-d", "-s", "crew", "-x", "120", "-y", "30")
    agent = f"{sys.executable} {os.path.join(REPO, 'tests', 'fake-agent')}"
    run("aside-open", "a1", "--cmd", agent, "--tmux-session", "crew", check=True)
    pane = Session(crew, "a1").meta["tmux"]
    tmux.wait_screen(pane, "ready>")
    tmux("send-keys", "-t", pane, "-l", "the words that must survive")
    tmux("send-keys", "-t", pane, "Enter")
    # The turn's own reply first: the empty prompt before the keys were read
    # is no sign the captain's input is recorded (aside-done must come after).
    tmux.wait_screen(pane, "agent: ok")
    tmux.wait_prompt(pane)
    assert captain_runs(tmux, "aside-done", "a1") == (0, "")
    report = tmp_path / "r"
    report.write_text("report\n")
    new = run("aside-conclude", "a1", "--report", report, check=True).stdout.strip()
    return pane, new.replace("/reports/new/", "/reports/cur/")


def captain_keys(sess, keys, person=None):
    """A person types *keys* into session *sess*'s pane (meta tmux) in a tmux
    client looking at it: *person*, else the AttachedClient open on the
    session's server (none: nothing typed, as a captain who is not there)."""
    person = person or AttachedClient.on(sess.meta.get("tmux_socket")
                                         or os.environ.get("CREWFILE_TMUX"))
    if person is not None and sess.meta.get("tmux"):
        person.look_at(sess.meta["tmux"])
        person.type_after(last_captain_input(sess), keys)


def believed_once_caught_up(monkeypatch, sess, catch_up):
    """aside.believed's result when the prompt is recorded late (by *catch_up*): one race, every agent."""
    monkeypatch.setattr(evidence, "TRANSCRIPT_WAIT", 120.0)
    looked, real, out = threading.Event(), evidence._prompt_verdict, []

    def spy(*a):
        got = real(*a)
        looked.set()
        return got
    monkeypatch.setattr(evidence, "_prompt_verdict", spy)
    t = threading.Thread(target=lambda: out.append(aside.believed(sess, aside.scan(sess))))
    t.start()
    assert looked.wait(60)                     # it has looked: the prompt is not there yet
    catch_up()
    t.join(120)
    return out


def last_captain_input(sess):
    """The time of session *sess*'s newest captain input record (0 if none)."""
    return newest_input(sess.reread()) or 0


def captain_runs(tmux, *argv, env=None):
    """Run bin/ARGV[0] as the captain's key binding does: a person presses C-b Y
    in a tmux client attached to the server (AttachedClient), bound to
    run-shell, so the tmux server runs it, outside every agent. The key is
    pressed in a whole second after the newest captain input of the session
    ARGV[1] names, as a person's hands are slower than that. Returns (exit
    code, stdout+stderr)."""
    words = [sys.executable, os.path.join(BIN, argv[0]), *map(str, argv[1:])]
    full = {k: os.environ[k] for k in ("CREWFILE_DIR", "CREWFILE_TMUX") if k in os.environ}
    full.update(env or {})
    since = 0
    if len(argv) > 1 and full.get("CREWFILE_DIR"):
        sess = Session(Crew(full["CREWFILE_DIR"]), str(argv[1]))
        since = last_captain_input(sess) if sess.exists() else 0
    with tempfile.TemporaryDirectory() as d:
        out, rc = os.path.join(d, "out"), os.path.join(d, "rc")
        line = "env " + " ".join(shlex.quote(f"{k}={v}") for k, v in full.items()) + " "
        line += " ".join(map(shlex.quote, words)) + f" >{shlex.quote(out)} 2>&1"
        line += f"; echo $? >{shlex.quote(rc)}.new && mv {shlex.quote(rc)}.new {shlex.quote(rc)}"
        tmux("bind-key", "Y", "run-shell", line)
        person = AttachedClient.on(tmux.sock)
        mine = person is None
        if mine:
            person = AttachedClient(tmux)
        try:
            person.type_after(since, b"\x02Y")
            wait_for(lambda: os.path.exists(rc), timeout=60, what=f"{argv[0]} run by C-b Y")
        finally:
            tmux("unbind-key", "Y", check=False)
            if mine:
                person.close()
        with open(rc) as f, open(out) as g:
            return int(f.read()), g.read()


# -- the session-end check: no process left behind ------------------------------------
# A failed test once left tests/model_server.py running for 21 minutes. At
# the end of the run every process this run started and left alive fails the
# run, named, and is then stopped. "Started by this run": it carries this
# run's mark in its environment (every child inherits it, and tmux servers
# pass it to their panes), or its command line, environment or working
# directory names this run's temporary directories. Never matched by a
# name alone: the developer's own tmux, and another checkout's test run, are
# none of ours.

RUN_MARK = "CREWFILE_TEST_RUN"
LEFT_BEHIND_GRACE = 10      # seconds for a process told to stop to be gone


def pytest_configure(config):
    os.environ[RUN_MARK] = f"{os.getpid()}-{time.time_ns()}"


def left_behind(session):
    """{pid: command line} of the processes this run started that still live."""
    mark = f"{RUN_MARK}={os.environ[RUN_MARK]}".encode()
    base = str(session.config._tmp_path_factory.getbasetemp()).encode()
    inside = base + b"/"        # not pytest-5 for pytest-50, another run's
    mine = {os.getpid()}
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) in mine:
            continue
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                if f.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                    continue        # exited; its parent reaps it
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read()
            with open(f"/proc/{pid}/environ", "rb") as f:
                environ = f.read()
            try:
                cwd = os.readlink(f"/proc/{pid}/cwd").encode()
            except OSError:
                cwd = b""
        except (OSError, IndexError):
            continue
        ours = (mark in environ.split(b"\0") or inside in cmdline or inside in environ
                or cwd == base or cwd.startswith(inside))
        if ours and cmdline:
            out[int(pid)] = cmdline.replace(b"\0", b" ").decode("utf-8", "replace").strip()
    return out


def pytest_sessionfinish(session, exitstatus):
    """Fail the run naming every process it left alive, then stop them."""
    try:            # a process told to stop may still be exiting
        wait_for(lambda: not left_behind(session), timeout=LEFT_BEHIND_GRACE, every=0.1)
        return
    except AssertionError:
        alive = left_behind(session)
    if not alive:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    lines = [f"pid {pid}: {command[:300]}" for pid, command in sorted(alive.items())]
    if reporter is not None:
        reporter.section(f"{len(alive)} PROCESSES LEFT ALIVE BY THE TESTS", sep="!", red=True,
                         bold=True)
        for line in lines:
            reporter.line(line, red=True)
    else:
        sys.stderr.write("".join(f"left alive: {line}\n" for line in lines))
    for pid in alive:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
