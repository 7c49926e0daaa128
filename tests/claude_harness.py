"""Run the REAL Claude Code CLI offline, interactively, in a private tmux server,
against the project's scripted stand-in model, tests/model_server.py.

Standard library only (the crewfile helpers at the end import pytest and crewfile
lazily); imported by pytest.  See tests/CLAUDE_FINDINGS.md for what the hooks were
observed to deliver.

Install (per checkout, never globally): `make claude-code` installs the exact
release the Makefile names into <repo>/.cache/claude-code-VERSION; the native
binary is then
    <repo>/.cache/claude-code-VERSION/node_modules/@anthropic-ai/claude-code-linux-x64/claude
(`find_claude(repo)` locates it: the newest installed, or the release
CREWFILE_CLAUDE_VERSION names; env CREWFILE_CLAUDE overrides; see agent_clis).

Usage:
    rig = ClaudeRig(tmp_path, tmp_path / "tmux.sock",
                    {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "..."}]}]}},
                    env={"CREWFILE_SESSION": "s1"},           # reaches the hooks
                    commands={"aside-done": "Say done."},     # .claude/commands/*.md
                    script=["SAY: hello", "RUN: echo hi"])    # model_server --script lines
    rig.start()                     # waits until the input prompt is ready
    rig.send("hello")               # send-keys -l, then a separate Enter
    rig.turn("RUN: echo hi")        # send + wait for a Stop event + ready box
    rig.wait_file(path, lambda text: "Stop" in text)
    rig.requests()                  # request bodies that reached the model
    rig.stop()                      # kill tmux server, stop fake server

First-run dialogs and how they are avoided (all written by the rig):
  * theme / onboarding        -> $HOME/.claude.json  "hasCompletedOnboarding": true
  * "Do you want to use this API key?"
                              -> "customApiKeyResponses": {"approved": [<last 20 chars of key>]}
  * "Do you trust the files in this folder?"
                              -> "projects": {<cwd>: {"hasTrustDialogAccepted": true}}
  * "Bypass permissions" / root refusal
                              -> we never use --dangerously-skip-permissions (refused as root);
                                 we pass --permission-mode default --allowedTools Bash
  * release notes / tips / update checks / telemetry
                              -> "lastReleaseNotesSeen": <version>, env DISABLE_AUTOUPDATER=1,
                                 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1, DISABLE_TELEMETRY=1,
                                 DISABLE_ERROR_REPORTING=1
Screen markers: the input box is ready when the pane shows "? for shortcuts"
(READY_RE); a turn is running while it shows "esc to interrupt" (BUSY_RE).
A turn has ended when the rig's own Stop hook has run (turns_done): 2.1.332
draws in the alternate screen, so the pane keeps no scrollback to count
end-of-turn lines in (tests/CLAUDE_FINDINGS.md).
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import select
import shlex
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Iterable, Mapping, Optional, Union

sys.path.insert(0, str(Path(__file__).resolve().parent))
import agent_clis  # noqa: E402  (beside this file; pytest and demo/ import it alike)

READY_RE = re.compile(r"\? for shortcuts")
INPUT_MARK = "\u276f"      # the input line's marker (then a no-break space)
BUSY_RE = re.compile(r"esc to interrupt")
API_KEY = "sk-ant-api03-crewfile-offline-dummy-key-0123456789abcdef"
REPO = Path(__file__).resolve().parent.parent


MODEL_SERVER = REPO / "tests" / "model_server.py"


def find_claude(root: Union[str, Path, None] = None) -> Optional[str]:
    """Path of the installed native claude binary to run, or None (see agent_clis)."""
    return agent_clis.claude(root)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(pred: Callable[[], object], timeout: float, interval: float = 0.2, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


class ClaudeRig:
    def __init__(self, tmp: Union[str, Path], tmux_socket: Union[str, Path],
                 settings: Optional[dict] = None, *, env: Optional[Mapping[str, str]] = None,
                 commands: Optional[Mapping[str, str]] = None,
                 script: Union[None, str, Iterable[str]] = None,
                 project: Union[str, Path, None] = None, root: Union[str, Path, None] = None,
                 binary: Optional[str] = None, extra_args: Iterable[str] = (),
                 fake_reply: Optional[str] = None, size: tuple = (200, 50),
                 allowed_tools: Iterable[str] = ("Bash",), server_args: Iterable[str] = ()):
        self.tmp = Path(tmp).resolve()
        self.sock = str(tmux_socket)
        self.settings = settings or {}
        self.env = dict(env or {})
        self.commands = dict(commands or {})
        self.binary = binary or find_claude(root)
        if not self.binary:
            raise FileNotFoundError("claude binary not installed (see find_claude)")
        self.home = self.tmp / "home"
        self.project = Path(project).resolve() if project else self.tmp / "project"
        self.log = self.tmp / "requests.log"
        self.stops = self.tmp / "stops.jsonl"       # one line per Stop event (turns_done)
        self.script_path = self.tmp / "model-script.txt" if script is not None else None
        self._script = script
        self.extra_args = list(extra_args)
        self.allowed_tools = list(allowed_tools)   # () -> a tool call gets a permission dialog
        self.fake_reply = fake_reply
        self.server_args = list(server_args)       # more model_server options (the soak's)
        self.size = size
        self.port: Optional[int] = None
        self.fake: Optional[subprocess.Popen] = None
        self.pane: Optional[str] = None
        self.started_at: Optional[float] = None
        self.ready_after: Optional[float] = None

    # ---------------------------------------------------------------- setup
    def _tmux(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        argv = ["tmux", "-S", self.sock, "-f", "/dev/null", *args]
        if check:
            return run_checked(argv)
        return subprocess.run(argv, capture_output=True, text=True)

    def version(self) -> str:
        out = subprocess.run([self.binary, "--version"], capture_output=True, text=True).stdout
        return out.split()[0] if out.strip() else ""

    def _write_files(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        self.project.mkdir(parents=True, exist_ok=True)
        state = {
            "hasCompletedOnboarding": True,
            "lastOnboardingVersion": self.version(),
            "lastReleaseNotesSeen": self.version(),
            "numStartups": 1,
            "customApiKeyResponses": {"approved": [API_KEY[-20:]], "rejected": []},
            "projects": {str(self.project): {"hasTrustDialogAccepted": True,
                                             "hasCompletedProjectOnboarding": True,
                                             "allowedTools": []}},
        }
        (self.home / ".claude.json").write_text(json.dumps(state, indent=1))
        (self.home / ".claude").mkdir(exist_ok=True)
        self.write_settings(self.settings)
        if self.commands:
            d = self.project / ".claude" / "commands"
            d.mkdir(parents=True, exist_ok=True)
            for name, body in self.commands.items():
                (d / f"{name}.md").write_text(body)
        if self.script_path is not None:
            self.set_script(self._script)

    def write_settings(self, settings: dict) -> None:
        """(Re)write $HOME/.claude/settings.json; a running session picks changes up.
        The rig's own Stop hook is added to the file (not to self.settings): it
        counts finished turns for turn() (see turns_done)."""
        self.settings = settings
        written = json.loads(json.dumps(settings))
        hooks = written.setdefault("hooks", {})
        hooks["Stop"] = list(hooks.get("Stop", ())) + [{"hooks": [{
            "type": "command", "command": f"cat >> {shlex.quote(str(self.stops))};"
                                          f" echo >> {shlex.quote(str(self.stops))}"}]}]
        (self.home / ".claude" / "settings.json").write_text(json.dumps(written, indent=1))

    def set_script(self, lines: Union[str, Iterable[str]]) -> None:
        """Replace the model's script queue (only if the rig was created with script=...)."""
        assert self.script_path is not None, "create the rig with script=[] to use a script"
        text = lines if isinstance(lines, str) else "".join(l + "\n" for l in lines)
        self.script_path.write_text(text)

    def _start_fake(self, timeout: float = 60) -> None:
        """Start tests/model_server.py on a port the kernel picks; it says which."""
        argv = [sys.executable, str(MODEL_SERVER), "--log", str(self.log)]
        if self.script_path is not None:
            argv += ["--script", str(self.script_path)]
        if self.fake_reply is not None:
            argv += ["--reply", self.fake_reply]
        argv += self.server_args
        with open(self.tmp / "model-server.stderr", "ab") as err:
            self.fake = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err)
        ready, _, _ = select.select([self.fake.stdout], [], [], timeout)
        line = self.fake.stdout.readline().decode() if ready else ""
        if not line.startswith("port "):
            self.fake.kill()
            self.fake.wait()
            raise RuntimeError(f"the model server did not start: {line!r}, see "
                               f"{self.tmp / 'model-server.stderr'}")
        self.port = int(line.split()[1])

    def claude_env(self) -> dict:
        env = {
            "HOME": str(self.home),
            "ANTHROPIC_API_KEY": API_KEY,
            "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{self.port}",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "TERM": "xterm-256color",
        }
        env.update(self.env)
        return env

    def prepare(self) -> str:
        """Write HOME/settings, start the fake model; return the shell command that
        runs claude (for a window someone else opens, e.g. aside-open's
        CREWFILE_AGENT_CMD; then attach() its pane)."""
        self._write_files()
        self._start_fake()
        return self.command()

    def command(self) -> str:
        argv = [self.binary, "--permission-mode", "default", *self.extra_args]
        if self.allowed_tools:
            argv[3:3] = ["--allowedTools", ",".join(self.allowed_tools)]
        # env wrapper: the variables reach claude and therefore every hook it runs,
        # whatever the tmux server's global environment is.
        return ("cd " + shlex.quote(str(self.project)) + " && exec env "
                + " ".join(shlex.quote(f"{k}={v}") for k, v in self.claude_env().items())
                + " " + " ".join(shlex.quote(a) for a in argv))

    def attach(self, pane: str, ready_timeout: float = 60) -> "ClaudeRig":
        """Drive claude running in *pane* (opened by someone else from command())."""
        self.pane = pane
        self.started_at = time.monotonic()
        self.wait_ready(ready_timeout)
        self.ready_after = time.monotonic() - self.started_at
        return self

    def start(self, ready_timeout: float = 60) -> "ClaudeRig":
        cmd = self.prepare()
        w, h = self.size
        self.started_at = time.monotonic()
        if self._tmux("has-session", check=False).returncode == 0:
            r = self._tmux("new-window", "-d", "-P", "-F", "#{pane_id}", "-c", str(self.project), cmd)
        else:
            r = self._tmux("new-session", "-d", "-P", "-F", "#{pane_id}", "-x", str(w), "-y", str(h),
                           "-c", str(self.project), cmd)
        self.pane = r.stdout.strip()
        self._tmux("set-option", "-w", "-t", self.pane, "remain-on-exit", "on", check=False)
        self.wait_ready(ready_timeout)
        self.ready_after = time.monotonic() - self.started_at
        return self

    # ---------------------------------------------------------------- driving
    def send(self, text: str, enter: bool = True, timeout: float = 30) -> None:
        """Type *text*; with *enter*, press Enter once the TUI shows it on its
        input line (an Enter that overtakes the text submits half of it)."""
        self._tmux("send-keys", "-t", self.pane, "-l", text)
        if enter:
            tail = "".join(text.split())[-16:]
            self.wait_screen(lambda s: tail in _input_line(s), timeout)
            self._tmux("send-keys", "-t", self.pane, "Enter")

    def keys(self, *keys: str) -> None:
        """Named keys, e.g. rig.keys("C-d") or rig.keys("Escape")."""
        self._tmux("send-keys", "-t", self.pane, *keys)

    def screen(self, history: bool = False) -> str:
        """The visible pane (or, with history=True, the scrollback too)."""
        extra = ["-S", "-"] if history else []
        r = self._tmux("capture-pane", "-p", "-J", *extra, "-t", self.pane, check=False)
        return r.stdout

    def turns_done(self) -> int:
        """How many turns have ended: the Stop events the rig's own hook saw.
        Not the "✻ <Verb> for Ns" lines on the screen: from 2.1.332 Claude Code
        draws in the alternate screen with a virtual scrollback, so the pane
        keeps no history and an older end-of-turn line scrolls away for good."""
        try:
            return self.stops.read_text().count('"hook_event_name"')
        except FileNotFoundError:
            return 0

    def turn(self, text: str, timeout: float = 60) -> str:
        """Send a prompt and wait until that turn has finished and the box is ready.
        Fast turns (~0.2 s with the fake model) can finish before "esc to interrupt"
        is ever seen, so completion is detected by a new Stop event instead."""
        before = self.turns_done()
        self.send(text)
        _wait(lambda: self.turns_done() > before, timeout, what=f"turn {text!r} to finish")
        return self.wait_idle(timeout)

    def alive(self) -> bool:
        r = self._tmux("display-message", "-p", "-t", self.pane, "#{pane_dead}", check=False)
        return r.returncode == 0 and r.stdout.strip() == "0"

    def wait_screen(self, what: Union[str, re.Pattern, Callable[[str], object]], timeout: float = 30):
        """Poll the pane until the regex matches (returns the match) or predicate is truthy."""
        if callable(what) and not isinstance(what, re.Pattern):
            pred = what
        else:
            rx = re.compile(what) if isinstance(what, str) else what
            pred = rx.search
        last = [""]

        def check():
            last[0] = self.screen()
            return pred(last[0])
        try:
            return _wait(check, timeout, what=f"screen {what!r}")
        except TimeoutError as e:
            raise TimeoutError(f"{e}\n--- screen ---\n{last[0]}") from None

    def wait_ready(self, timeout: float = 60):
        return self.wait_screen(lambda s: READY_RE.search(s) and not BUSY_RE.search(s), timeout)

    def wait_busy(self, timeout: float = 15):
        return self.wait_screen(BUSY_RE, timeout)

    def wait_idle(self, timeout: float = 60):
        """No 'esc to interrupt' and the input box is back.  Racy right after send():
        the turn may not have started yet -- use turn() or wait for a Stop hook."""
        return self.wait_ready(timeout)

    def wait_file(self, path: Union[str, Path], predicate: Optional[Callable[[str], object]] = None,
                  timeout: float = 30):
        p = Path(path)

        def check():
            if not p.exists():
                return None
            text = p.read_text(errors="replace")
            return (predicate(text) if predicate else True) and text
        return _wait(check, timeout, what=f"file {p}")

    def requests(self) -> list:
        """Request bodies the fake model received, parsed, in order."""
        if not self.log.exists():
            return []
        out = []
        for line in self.log.read_text(errors="replace").splitlines():
            line = line.strip()
            if line:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
        return out

    def main_requests(self) -> list:
        """Only the agent's main-loop requests (the ones offering tools)."""
        return [r for r in self.requests() if r.get("tools")]

    def transcripts(self) -> list:
        return sorted((self.home / ".claude" / "projects").glob("*/*.jsonl"))

    def exit(self, timeout: float = 15) -> None:
        """End the session the way a user does (/exit), wait for the process to leave."""
        if self.alive():
            self.send("/exit")
            try:
                _wait(lambda: not self.alive(), timeout, what="claude exit")
            except TimeoutError:
                self.keys("C-d")
                time.sleep(0.5)
                self.keys("C-d")
                _wait(lambda: not self.alive(), timeout, what="claude exit after C-d")

    def stop(self) -> None:
        try:
            if self.pane:
                self._tmux("kill-server", check=False)
        finally:
            self.stop_model()

    def stop_model(self) -> None:
        """Stop the model server only (the tmux server may be someone else's)."""
        if self.fake:
            if self.fake.poll() is None:
                self.fake.kill()
                self.fake.wait()
            self.fake.stdout.close()
            self.fake = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def _input_line(screen: str) -> str:
    """What follows the TUI's lowest input marker (prompts echoed above it are
    older), without any whitespace: a long line wraps anywhere."""
    at = screen.rfind(INPUT_MARK)
    return "".join(screen[at + 1:].split()) if at >= 0 else ""


def have_tmux() -> bool:
    return shutil.which("tmux") is not None


# ---------------------------------------------------------------- crewfile helpers
# Shared by the tests that run the real CLI with crew-hook installed
# (tests/test_claude_e2e.py, tests/test_claude_nudge_e2e.py).

BIN = REPO / "bin"


def require_real_claude() -> None:
    """Skip the test, loudly, when the CLI or tmux cannot be had (see skip_loudly)."""
    why = None
    if not find_claude(REPO):
        wanted = os.environ.get("CREWFILE_CLAUDE_VERSION")
        why = (f"the real Claude Code CLI{' ' + wanted if wanted else ''} is not installed in "
               f".cache/claude-code-VERSION (run `make claude-code`; it needs npm and the npm registry)")
    elif not have_tmux():
        why = "tmux is not installed"
    if why:
        skip_loudly(why)


def skip_loudly(why: str):
    """Skip this test saying so in capitals (conftest names every skipped
    test again at the end of the run, and `make test` at its very end)."""
    import pytest  # kept: demo/ imports this module outside pytest, lib/ not on its path
    pytest.skip(f"END-TO-END TEST WITH THE REAL CLAUDE CODE SKIPPED: {why}")


def hook_command() -> str:
    """The command line settings.json runs for every hook: this interpreter, bin/crew-hook."""
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(BIN / 'crew-hook'))}"


class CommandFailed(AssertionError):
    """A command a rig needed failed; its message holds what it said."""


def run_checked(argv, **kwargs) -> subprocess.CompletedProcess:
    """subprocess.run (text, output captured) that fails naming the command,
    its exit status and its stderr: a bare CalledProcessError hid tmux's
    reason. Every rig (Claude's here, Codex's, Gemini's) runs its set-up
    commands through this."""
    r = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    if r.returncode != 0:
        raise CommandFailed(f"{shlex.join(map(str, argv))}: exit {r.returncode}\n"
                            f"stderr: {r.stderr.strip() or '(empty)'}\n"
                            f"stdout: {r.stdout.strip()[-2000:] or '(empty)'}")
    return r


def install_hooks(project: Union[str, Path]) -> None:
    """`crew-hook --install PROJECT/.claude` with hook_command()."""
    run_checked([sys.executable, str(BIN / "crew-hook"), "--install",
                 str(Path(project) / ".claude"), "--command", hook_command()])


def make_rig(tmp_path, tmux, env=None, **kwargs) -> ClaudeRig:
    """A rig on the private tmux server *tmux* (conftest's fixture), with crew-hook
    installed in its project and bin/ plus this interpreter on the agent's PATH."""
    path = f"{os.path.dirname(sys.executable)}:{BIN}:{os.environ['PATH']}"
    kwargs.setdefault("script", [])
    rig = ClaudeRig(tmp_path, tmux.sock, {}, env=dict(env or {}, PATH=path), **kwargs)
    rig.project.mkdir(parents=True, exist_ok=True)
    install_hooks(rig.project)
    return rig


def records(crew, name) -> list:
    """(kind, text) of the session's status records, oldest first."""
    from crewfile.core import logfile  # kept: demo/ imports this module outside pytest, lib/ not on its path
    from crewfile.session.sessions import Session  # kept: demo/ imports this module outside pytest, lib/ not on its path
    return [(r.kind, r.text) for r in
            Session(crew, name).last_records(1000, logfile.TailStats())]


@contextlib.contextmanager
def watched(rig: ClaudeRig, crew, name: str):
    """Run a test body against *rig*: on failure print its screen and NAME's
    records (what one needs to see), and always stop the rig."""
    try:
        yield rig
    except BaseException:
        print("--- screen ---\n" + (rig.screen(history=True) if rig.pane else "(no pane)"))
        print("--- records ---\n" + "\n".join(map(str, records(crew, name))))
        raise
    finally:
        rig.stop()


def typed_by(person, rig: ClaudeRig, sess, text: str, timeout: float = 30) -> None:
    """The captain types *text* at a terminal (*person*: conftest's AttachedClient)
    into the pane *rig* drives, and presses Enter once the input line shows it,
    in a whole second after session *sess*'s newest captain input (a person's
    hands are never faster; the act's evidence counts only later keys)."""
    from conftest import last_captain_input  # kept: demo/ imports this module outside pytest, lib/ not on its path
    person.look_at(rig.pane)
    person.press(text)
    tail = "".join(text.split())[-16:]
    rig.wait_screen(lambda s: tail in _input_line(s), timeout)
    person.type_after(last_captain_input(sess), b"\r")


def kinds(crew, name) -> list:
    return [k for k, _ in records(crew, name)]


def crew_rig(crew, tmux, tmp_path, name: str = "w1", env=None, **kwargs) -> ClaudeRig:
    """A claude that registers itself as crew session *name* (not started yet);
    *env*: more of its environment."""
    return make_rig(tmp_path, tmux, env={"CREWFILE_SESSION": name, "CREWFILE_DIR": crew.root,
                                         "CREWFILE_TMUX": tmux.sock, **(env or {})}, **kwargs)


def start_registered(rig: ClaudeRig, crew, name: str = "w1") -> None:
    """Start claude; return once its SessionStart hook registered it as *name*."""
    from conftest import wait_for  # kept: demo/ imports this module outside pytest, lib/ not on its path
    from crewfile.session.sessions import Session  # kept: demo/ imports this module outside pytest, lib/ not on its path
    rig.start()
    wait_for(lambda: Session(crew, name).exists() and "started" in kinds(crew, name),
             what=f"{name} registered by its SessionStart hook")


def stop_payloads(rig: ClaudeRig) -> list:
    """The Stop payloads the rig's own Stop hook saw, in order."""
    try:
        text = rig.stops.read_text()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def recorded_turn(rig: ClaudeRig, crew, name: str, text: str, script=(), timeout: float = 60):
    """One prompt sent running *script*; returns once crew-hook recorded that
    turn's end for session *name* (not only the rig's own Stop hook)."""
    from conftest import wait_for  # kept: demo/ imports this module outside pytest, lib/ not on its path
    ended = kinds(crew, name).count("turn-ended")
    rig.set_script(list(script))
    rig.send(text)
    wait_for(lambda: kinds(crew, name).count("turn-ended") > ended, timeout=timeout,
             what=f"the end of the turn {text!r}")


def user_texts(rig: ClaudeRig) -> list:
    """Every text block of a user message the agent's main loop sent to the model."""
    out = []
    for req in rig.main_requests():
        for msg in req.get("messages", []):
            if msg.get("role") != "user":
                continue
            content = msg.get("content")
            if isinstance(content, str):
                out.append(content)
            else:
                out += [b.get("text", "") for b in content or [] if isinstance(b, dict)]
    return out


@contextlib.contextmanager
def captains_aside(crew, tmux, tmp_path, name: str = "design"):
    """Aside *name* opened by aside-open on the real Claude Code (in tmux
    session `crew`, r.md in its project), its hooks watched, the captain at
    a client attached to its pane: yields (rig, person, turn), where
    turn(text, script=(), turns=1) has the captain type *text* and waits
    for *turns* of the agent's turns to end."""
    from conftest import AttachedClient, cmd, wait_for  # kept: demo/ imports this module outside pytest, lib/ not on its path
    from crewfile.session.sessions import Session  # kept: demo/ imports this module outside pytest, lib/ not on its path
    require_real_claude()
    rig = make_rig(tmp_path, tmux, env={"CREWFILE_DIR": crew.root, "CREWFILE_TMUX": tmux.sock})
    tmux("new-session", "-d", "-s", "crew", "-n", "captain", "-x", "200", "-y", "50")
    person = None
    with watched(rig, crew, name):
        agent = rig.prepare()
        (rig.project / "r.md").write_text("the design is settled\n")
        r = cmd("aside-open", name, "--topic", "pagination", "--cmd", agent,
                "--tmux-session", "crew")
        assert r.returncode == 0, r.stderr
        sess = Session(crew, name)
        rig.attach(sess.meta["tmux"])
        wait_for(lambda: "started" in kinds(crew, name), what="SessionStart")
        person = AttachedClient(tmux, sess.meta["tmux"])

        def turn(text, script=(), turns=1):
            ended = kinds(crew, name).count("turn-ended")
            rig.set_script(list(script))
            typed_by(person, rig, sess, text)
            wait_for(lambda: kinds(crew, name).count("turn-ended") >= ended + turns,
                     timeout=120, what=f"{turns} turn(s) after {text!r}")
            rig.wait_idle()
        try:
            yield rig, person, turn
        finally:
            person.close()


@contextlib.contextmanager
def primary_claude(crew, tmux, tmp_path, name: str = "design"):
    """A primary firstmate that is the real claude, for the /aside tests: yields (rig, its pane)."""
    from crewfile.session.sessions import register  # kept: demo/ imports this module outside pytest, lib/ not on its path
    require_real_claude()
    rig = make_rig(tmp_path, tmux, env={"CREWFILE_DIR": crew.root, "CREWFILE_TMUX": tmux.sock})
    register(crew, "firstmate", kind="primary")
    with watched(rig, crew, name):
        # The agent command the primary hands to aside-open is the same claude
        # without a session name (aside-open gives it one).
        firstmate = tmux.new_window(as_primary(rig.prepare()), name="firstmate", session="crew")
        rig.attach(firstmate)
        yield rig, firstmate


def captain_concludes_three_ways(crew, tmux, person, turn, aide_done, name: str = "design"):
    """The captain's three real acts, each after a turn that reopens the aside:
    /aside-done typed in its window (the agent hands over its report),
    `aside-done NAME` typed in another window, a key binding pressed.
    Returns the three reports' paths and the other window."""
    from conftest import cmd, last_captain_input, wait_for  # kept: demo/ imports this module outside pytest, lib/ not on its path
    from crewfile.asides import aside  # kept: demo/ imports this module outside pytest, lib/ not on its path
    from crewfile.session.sessions import Session  # kept: demo/ imports this module outside pytest, lib/ not on its path
    sess = Session(crew, name)
    turn("/aside-done ship it", ["RUN: printf 'cursor pagination\\n' | "
                                 f"aside-conclude {name} --report -"])
    wait_for(lambda: "concluded" in kinds(crew, name), what="concluded")
    first = [t for k, t in records(crew, name) if k == "concluded"][-1]

    turn("one more thing: page size")
    assert aside.scan(Session(crew, name)).state == aside.OPEN
    other = tmux.new_window("sh", name="captain2", session="crew")
    person.look_at(other)
    person.type_after(last_captain_input(sess), f"CREWFILE_DIR={crew.root} {aide_done}"
                                                f" {name} --note window; echo rc=$?\r")
    tmux.wait_screen(other, "rc=0")
    r = cmd("aside-conclude", name, "--report", "-", input="page size 50\n")
    assert r.returncode == 0, r.stderr
    second = r.stdout.strip()

    turn("and the cursor format?")
    tmux("bind-key", "D", "run-shell",
         f"env CREWFILE_DIR={crew.root} {aide_done} {name} --note key")
    person.look_at("crew:captain")
    person.type_after(last_captain_input(sess), b"\x02D")
    wait_for(lambda: ("captain-done", "key") in records(crew, name),
             what="the key binding's captain-done")
    r = cmd("aside-conclude", name, "--report", "-", input="opaque cursors\n")
    assert r.returncode == 0, r.stderr
    return first, second, r.stdout.strip(), other


def as_primary(agent: str, name: str = "firstmate") -> str:
    """*agent* (rig.prepare()'s command) run as primary NAME, which hands
    the same command, without a session name, to aside-open."""
    return agent.replace(" && exec env ", " && exec env " + " ".join(map(shlex.quote, (
        f"CREWFILE_SESSION={name}", f"CREWFILE_AGENT_CMD={agent}"))) + " ", 1)
