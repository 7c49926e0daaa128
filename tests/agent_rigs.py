"""What the Codex and Gemini end-to-end rigs share (test_codex_e2e,
test_gemini_e2e, test_aside_agents_e2e): their stand-in model server, the
agent's home as a user who said yes once would have it, and the end of the
agent processes that outlive their window, and Codex's hook review passed
as a user passes it; with Claude's (test_claude_spawn_e2e), the repository
workers are spawned from."""
import contextlib
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
import tomllib
import uuid
import warnings

import agent_clis
from claude_harness import run_checked
from conftest import PaneEnded, TmuxServer
from crewfile.wake import inbox

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVER_START = 30           # seconds for a stand-in server to say its port
DEADLINE = 120              # seconds for one step of a real agent CLI (a start, a turn)


def start_stand_in(name, *args, stderr=None):
    """Start the stand-in model server tests/NAME with *args*: (its process,
    its port). The caller ends it with stop_stand_in(); one that never says
    its port is ended here."""
    proc = subprocess.Popen([sys.executable, os.path.join(REPO, "tests", name), *map(str, args)],
                            stdout=subprocess.PIPE, stderr=stderr, text=True)
    try:
        if not select.select([proc.stdout], [], [], SERVER_START)[0]:
            raise RuntimeError(f"tests/{name} did not say its port")
        return proc, int(proc.stdout.readline().split()[1])
    except BaseException:
        stop_stand_in(proc)
        raise


def stop_stand_in(proc):
    """A stand-in server killed (if it still runs) and waited for."""
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    proc.stdout.close()
    if proc.stderr:
        proc.stderr.close()


@contextlib.contextmanager
def stand_in_ends_quietly(name, *args):
    """tests/NAME started with *args*: yields (process, its port). After the
    body it is ended by SIGTERM, which it answers with exit 0 and nothing
    said; killed and reaped whatever happens."""
    proc, port = start_stand_in(name, *args, stderr=subprocess.PIPE)
    try:
        yield proc, port
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0 and proc.stderr.read() == ""
    finally:
        stop_stand_in(proc)


@contextlib.contextmanager
def stand_in_server(name, log):
    """Run the stand-in model server tests/NAME, its requests logged to *log*;
    yield its port. Killed, and waited for, at the end."""
    proc, port = start_stand_in(name, "--log", log)
    try:
        yield port
    finally:
        stop_stand_in(proc)


def wake_the_held_primary(rig, proc, go, deadline):
    """A primary's turn held by the stand-in (`HOLD: GO` in *proc*): once its
    first model request is in, a wake is posted to its inbox and the turn let
    go; return proc.communicate()'s (out, err). Killed if still running after."""
    try:
        until = time.monotonic() + deadline
        while not (os.path.exists(rig.log) and rig.requests()):
            assert time.monotonic() < until and proc.poll() is None, "no model request"
            time.sleep(0.05)
        inbox.post(rig.crew, "pm", "wake", "w2 blocked: needs a database")
        go.touch()
        return proc.communicate(timeout=deadline)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def committed_repo(tmp_path, monkeypatch):
    """A git repository with one commit, at tmp_path/src/app (git's author
    and committer set for the test)."""
    for key in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{key}_NAME", "Tester")
        monkeypatch.setenv(f"GIT_{key}_EMAIL", "tester@example.org")
    repo = tmp_path / "src" / "app"
    repo.mkdir(parents=True)
    run_checked(["git", "init", "-q", "-b", "main"], cwd=repo)
    (repo / "README").write_text("app\n")
    run_checked(["git", "add", "README"], cwd=repo)
    run_checked(["git", "commit", "-q", "-m", "init"], cwd=repo)
    return repo


# --- Codex ------------------------------------------------------------------------

def codex_requests_seen(rig):
    """The stand-in server's requests, the last input item of each: what a
    failing wait shows."""
    return "requests (last input item of each): " + "; ".join(
        json.dumps((r.get("input") or [None])[-1])[:300] for r in rig.requests())


def wait_codex(test, what, rig=None, name=None, tmux=None, pane=None):
    """Poll *test* up to DEADLINE; on a time-out say what was seen: the
    session's records, the pane's screen, the stand-in server's requests."""
    deadline = time.monotonic() + DEADLINE
    while not test():
        if time.monotonic() > deadline:
            seen = []
            if rig is not None and name is not None:
                seen.append(f"records of {name}: {rig.kinds(name)}")
            if tmux is not None and pane is not None:
                seen.append(f"screen:\n{tmux.screen(pane)}")
            if rig is not None and os.path.exists(rig.log):
                seen.append(codex_requests_seen(rig))
            raise AssertionError(f"never: {what}\n" + "\n".join(seen))
        time.sleep(0.05)


def codex_window(tmux, rig, command, env):
    """Codex in a pane that outlives it: a Codex that ends early (seen under
    load: at its first start, its hook review unanswered) leaves its exit
    status and last lines on the screen, and a failing wait shows them with
    the stand-in server's requests."""
    tmux.context.append(lambda: codex_requests_seen(rig))
    return tmux.new_window(command, env=env, keep=True)


def codex_home():
    """A new CODEX_HOME, outside /tmp (with it under /tmp, Codex 0.171 ignored
    its config.toml: provider openai, network tried), by its real path (Codex
    keys its hooks' trust by it, and .cache may be a link)."""
    home = os.path.realpath(os.path.join(REPO, ".cache", "codex-e2e", uuid.uuid4().hex[:12]))
    os.makedirs(home)
    return home


def write_codex_config(home, port, work):
    """*home*/config.toml: the stand-in on *port* as its model provider, and
    the folder *work* trusted as Codex writes a captain's yes."""
    with open(os.path.join(home, "config.toml"), "w") as f:
        f.write(f'model = "gpt-test"\nmodel_provider = "fake"\n'
                f'[model_providers.fake]\nname = "fake"\n'
                f'base_url = "http://127.0.0.1:{port}/v1"\nenv_key = "FAKE_KEY"\n'
                f'wire_api = "responses"\nsupports_websockets = false\n'
                f'[projects."{work}"]\ntrust_level = "trusted"\n'
                # Writable roots without /tmp: Codex's Linux sandbox protects
                # `.git` and `.codex` in each writable root by mounting over
                # them, making empty ones where there are none, so /tmp/.git
                # came and went while a command ran (seen with inotify), and
                # every session under /tmp had /tmp for its tree.
                f'[sandbox_workspace_write]\nexclude_slash_tmp = true\n'
                f'exclude_tmpdir_env_var = true\n')


def stop_codex_daemons(home):
    """Codex's TUI starts a managed app-server daemon from CODEX_HOME that
    outlives it (observed, 0.171.0): end the ones under *home*, by pid."""
    for pid in os.listdir("/proc"):
        try:
            exe = os.readlink(f"/proc/{pid}/exe")
        except OSError:
            continue
        if exe.startswith(home + os.sep):
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass


# --- Codex's hook review (test_codex_e2e, test_aside_agents_e2e) ---------------

CODEX_DEADLINE = 120


def trust_the_hooks(tmux, pane):
    """What a captain does once: Codex (0.129 and later) runs new hooks only
    once trusted, and asks at its first start (its first screen, before its
    prompt line): `2. Trust all and continue`. Hooks not trusted never run."""
    tmux.wait_screen(pane, "Hooks need review", timeout=CODEX_DEADLINE)
    tmux.choose(pane, "2", "\u203a 2. Trust all")
    tmux.choose(pane, "Enter", lambda s: "Hooks need review" not in s)
    tmux.wait_screen(pane, lambda s: "Ask Codex" in s and "Hooks need review" not in s,
                     timeout=CODEX_DEADLINE)


def wait_trusted_start(tmux, pane):
    """A start with its hooks trusted: the prompt line, no review asked."""
    tmux.wait_screen(pane, lambda s: "Ask Codex" in s or "Hooks need review" in s,
                     timeout=CODEX_DEADLINE)
    assert "Hooks need review" not in tmux.screen(pane), tmux.explain(pane)


# Codex 0.171 drains the terminal's input before its hook review with a hard
# one-second limit (tui/input_boundary.rs, discard_pending_terminal_input) and
# exits with this line when a loaded machine does not let it finish. Seen in
# 2 of 3 loaded full runs (three reviews each, with other tests beside them):
# at most RESTARTS starts again, each said.
DRAIN_TIMED_OUT = "Error: timed out discarding buffered terminal input"
RESTARTS = 5


def drain_timed_out(screen):
    """Whether a keep=True pane shows Codex ended by its own input drain's
    time limit and by nothing else: that line, then (seen once, in a loaded
    run) its error's backtrace of unnamed frames (`Stack backtrace:`, then
    `N: <unknown>` lines), then its exit status 1."""
    lines = [line.strip() for line in screen.splitlines() if line.strip()]
    if len(lines) < 2 or lines[-1] != f"{TmuxServer.EXITED}1]":
        return False
    body = lines[:-1]
    while body and re.fullmatch(r"\d+: <unknown>", body[-1]):
        body.pop()
    if body and body[-1] == "Stack backtrace:" and len(body) < len(lines) - 1:
        body.pop()
    return bool(body) and body[-1].endswith(DRAIN_TIMED_OUT)


def through_the_review(tmux, start, untouched=lambda: True):
    """Codex started by *start*() (a keep=True pane) and its hooks trusted
    at its review, as a user does. Codex ended by its input drain's time limit
    (DRAIN_TIMED_OUT) while *untouched*() holds (nothing of crewfile's ran:
    its hooks cannot, untrusted) is started again, at most RESTARTS times,
    each said on the test's output; any other end fails at once."""
    for attempt in range(RESTARTS + 1):
        pane = start()
        try:
            trust_the_hooks(tmux, pane)
            return pane
        except PaneEnded:
            screen = tmux.screen(pane)
            if attempt == RESTARTS or not drain_timed_out(screen) or not untouched():
                raise
            # in pytest's warnings summary, passed or not (its output capture
            # takes file descriptor 2 as well: a print shows only on a failure)
            warnings.warn(f"Codex exited at its first start: {DRAIN_TIMED_OUT!r} (its own"
                          f" 1 s limit, a loaded machine); restart {attempt + 1} of {RESTARTS}")
            tmux("kill-pane", "-t", pane, check=False)


# hooks.json's text -> [(the state key after CODEX_HOME, trusted_hash)]
_TRUSTS = {}


def pretrust(tmux, home, work):
    """Write into *home*/config.toml the trust of its hooks as Codex stores it
    after a user's `Trust all and continue`: one [hooks.state."KEY"] table with
    a trusted_hash per hook, KEY being hooks.json's path and the hook's place.
    The hashes are Codex's own: taken once per test session (per hooks.json
    text) from a real review answered in a pane, in a copy of *home*; only
    KEY's path is *home*'s (the hashes do not depend on it: seen, two homes).
    A Codex that starts with its hooks trusted shows no review, and so skips
    its input drain before it (DRAIN_TIMED_OUT)."""
    with open(os.path.join(home, "hooks.json")) as f:
        text = f.read()
    if text not in _TRUSTS:
        scratch = home.rstrip(os.sep) + "-pretrust"
        shutil.copytree(home, scratch)
        # its trusted hooks run at once (SessionStart): in a crew of their own
        env = dict(PATH=os.environ["PATH"], CODEX_HOME=scratch, HOME=scratch, FAKE_KEY="x",
                   CREWFILE_DIR=os.path.join(scratch, "crew"))
        try:
            through_the_review(tmux, lambda: tmux.new_window(
                f"cd {work} && {agent_clis.codex(REPO)}", name="pretrust", session="pretrust",
                env=env, keep=True))
            tmux("kill-session", "-t", "pretrust", check=False)
            with open(os.path.join(scratch, "config.toml"), "rb") as f:
                state = tomllib.load(f)["hooks"]["state"]
        finally:
            stop_codex_daemons(scratch)
            shutil.rmtree(scratch, ignore_errors=True)
        prefix = os.path.join(scratch, "hooks.json:")
        assert state and all(k.startswith(prefix) for k in state), state
        _TRUSTS[text] = [(k[len(scratch):], v["trusted_hash"]) for k, v in state.items()]
    with open(os.path.join(home, "config.toml"), "a") as f:
        for key, digest in _TRUSTS[text]:
            f.write(f"[hooks.state.{json.dumps(home + key)}]\n"
                    f"trusted_hash = {json.dumps(digest)}\n")


# --- Gemini -----------------------------------------------------------------------

# Gemini CLI runs non-interactively when it sees a CI environment (CI, and
# CONTINUOUS_INTEGRATION or any CI_* variable): CI sets CI=true, and the tmux
# server hands its environment to the pane. An interactive Gemini unsets them.
NOT_CI = "env -u CI -u CONTINUOUS_INTEGRATION " + " ".join(
    f"-u {k}" for k in sorted(os.environ) if k.startswith("CI_"))


def gemini_settings(home, **settings):
    """*home*/.gemini/settings.json: the API key as its auth, and *settings*."""
    os.makedirs(os.path.join(home, ".gemini"), exist_ok=True)
    with open(os.path.join(home, ".gemini", "settings.json"), "w") as f:
        json.dump({"security": {"auth": {"selectedType": "gemini-api-key"}}, **settings}, f)


def stop_geminis(home):
    """End the Gemini CLI processes run with HOME *home*, by pid: one can
    outlive its tmux server (seen: a process relaunched after its folder was
    trusted kept running, its parent gone)."""
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read()
        except OSError:
            continue
        if f"HOME={home}".encode() in env and b"gemini" in argv:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass


# The events the compaction tests log beside crewfile's hooks (Claude Code and Codex alike).
COMPACTION_EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse",
                     "PreCompact", "PostCompact", "Stop", "SessionEnd")


def logged_hook_events(path):
    """(event, source, trigger or reason) of every hook payload a logging hook
    appended to *path* (`cat >> PATH; echo >> PATH`), in order."""
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in filter(str.strip, lines):
        p = json.loads(line)
        out.append((p.get("hook_event_name"),
                    p.get("source") or p.get("trigger") or p.get("reason") or ""))
    return out
