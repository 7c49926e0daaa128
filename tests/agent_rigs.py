"""What the Codex and Gemini end-to-end rigs share (test_codex_e2e,
test_gemini_e2e, test_aside_agents_e2e): their stand-in model server, the
agent's home as a user who said yes once would have it, and the end of the
agent processes that outlive their window. Standard library only."""
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import uuid

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVER_START = 30           # seconds for a stand-in server to say its port


@contextlib.contextmanager
def stand_in_server(name, log):
    """Run the stand-in model server tests/NAME, its requests logged to *log*;
    yield its port. Killed, and waited for, at the end."""
    proc = subprocess.Popen([sys.executable, os.path.join(REPO, "tests", name), "--log",
                             str(log)], stdout=subprocess.PIPE, text=True)
    try:
        if not select.select([proc.stdout], [], [], SERVER_START)[0]:
            raise RuntimeError(f"tests/{name} did not say its port")
        yield int(proc.stdout.readline().split()[1])
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()


# --- Codex ------------------------------------------------------------------------

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
