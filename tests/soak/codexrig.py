"""A Codex worker of the soak (soak.py --codex N): the real Codex CLI in a
CODEX_HOME of its own with crewfile's hooks installed (`crew-hook --install
HOME --agent codex`) and trusted as Codex keeps a user's yes at its review
(agent_rigs.pretrust), its model the Responses stand-in following the same
seeded day as a Claude worker (tests/responses_server.py --soak).

What its config says beyond the e2e rig's (agent_rigs.write_codex_config),
each for a reason seen with Codex 0.171.0 (tests/CODEX_FINDINGS.md, "The soak"):
  * `sandbox_mode = "danger-full-access"`: in the default workspace-write
    sandbox a process a tool call starts ends with the call, so a background
    job (`job-exec` not waited for) never ran to its end;
  * `allow_login_shell = false`: the shell tool's login shell reads
    /etc/profile, which sets PATH afresh, so crewfile's commands in the
    checkout's bin/ were not found;
  * the repository and the worker's tree trusted (no folder question).
"""
import os
import shutil
import sys

import agent_clis
from agent_rigs import REPO, codex_home, pretrust, stop_codex_daemons, write_codex_config
from claude_harness import BIN, run_checked
from conftest import TmuxServer
from workerrig import WorkerRig   # beside this file


def find_codex():
    return agent_clis.codex(REPO)


class CodexRig(WorkerRig):
    """Worker NAME's Codex: its HOME (a new CODEX_HOME), its stand-in model
    (tests/responses_server.py --soak) and the command crew-spawn runs."""

    agent = "codex"
    server_file = "responses_server.py"

    def __init__(self, *args):
        super().__init__(*args)
        self.binary = find_codex()
        self.home = None

    def prepare(self):
        """Start the stand-in, write the home, install and trust the hooks;
        return the agent's command for crew-spawn."""
        port = self.start_model()
        self.home = codex_home()
        write_codex_config(self.home, port, self.tree)
        config = os.path.join(self.home, "config.toml")
        with open(config) as f:
            tables = f.read()
        with open(config, "w") as f:
            f.write('sandbox_mode = "danger-full-access"\nallow_login_shell = false\n' + tables
                    + f'[projects."{self.repo}"]\ntrust_level = "trusted"\n')
        env = self.env()
        run_checked([sys.executable, os.path.join(BIN, "crew-hook"), "--install", self.home,
                     "--agent", "codex"], env=dict(os.environ, **env))
        pretrust(TmuxServer(self.sock), self.home, self.repo)
        return self.command(env, [self.binary])

    def env(self):
        return {"PATH": os.environ["PATH"], "CODEX_HOME": self.home, "HOME": self.home,
                "FAKE_KEY": "x"}

    def stop_model(self):
        """The stand-in and Codex's app-server daemon (it outlives the TUI,
        started from CODEX_HOME) ended; the home stays for the report (its
        rollouts are the transcripts the token figures read): forget() it."""
        super().stop_model()
        if self.home:
            stop_codex_daemons(self.home)

    def forget(self):
        """The home removed (it lives in the checkout's .cache: Codex ignores
        a config.toml under /tmp), once the report is written; its rollouts
        and its log copied beside the request log first."""
        if self.home:
            for keep in ("sessions", "log"):     # its rollouts and its own log,
                found = os.path.join(self.home, keep)    # kept for a look afterwards
                if os.path.isdir(found):
                    shutil.copytree(found, os.path.join(self.dir, f"codex-{keep}"),
                                    dirs_exist_ok=True)
            shutil.rmtree(self.home, ignore_errors=True)
