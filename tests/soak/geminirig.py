"""A Gemini worker of the soak (soak.py --gemini N): the real Gemini CLI in
a HOME of its own with crewfile's hooks installed (`crew-hook --install
HOME/.gemini --agent gemini`), its model the Gemini stand-in following the
same seeded day as a Claude worker (tests/gemini_server.py --soak).

What its home and command hold beyond the e2e rig's (test_gemini_e2e), each
for a reason:
  * the worker's tree trusted in ~/.gemini/trustedFolders.json, as Gemini
    keeps a user's answer to its question: in a folder not trusted it runs
    no hook at all, and crew-spawn types no first prompt before the
    SessionStart hook's `started` (the tree does not exist yet: the trust
    is by path);
  * `-y` (YOLO): the shell tool runs without asking, as a Claude worker's
    `--allowedTools Bash` (crewfile's BeforeTool hook still runs first);
  * `experimental.modelSteering` on: a line typed while Gemini works then
    reaches the model inside the turn, as a `User steering update`, where
    the soak's typing check can see it; off (Gemini's default) it is queued
    and sent as a prompt of its own after the turn, which no request log
    tells from a line typed at the idle prompt;
  * CI's variables unset (agent_rigs.NOT_CI): with them Gemini runs headless;
  * TMPDIR its own directory: Gemini's error reports stay with the soak.
"""
import json
import os
import sys

import agent_clis
from agent_rigs import NOT_CI, REPO, gemini_settings, stop_geminis
from claude_harness import BIN, run_checked
from workerrig import WorkerRig   # beside this file


def find_gemini():
    return agent_clis.gemini(REPO)


class GeminiRig(WorkerRig):
    """Worker NAME's Gemini CLI: its HOME (under the worker's directory, kept
    for a look afterwards: its chat recordings are the transcripts the token
    figures read), its stand-in model and the command crew-spawn runs."""

    agent = "gemini"
    server_file = "gemini_server.py"

    def __init__(self, *args):
        super().__init__(*args)
        self.binary = find_gemini()
        self.home = os.path.join(self.dir, "home")

    def prepare(self):
        """Start the stand-in, write the home, install the hooks and trust
        the worker's tree; return the agent's command for crew-spawn."""
        port = self.start_model()
        gemini_settings(self.home, experimental={"modelSteering": True})
        with open(os.path.join(self.home, ".gemini", "trustedFolders.json"), "w") as f:
            json.dump({self.tree: "TRUST_FOLDER"}, f)
        tmp = os.path.join(self.dir, "tmp")
        os.makedirs(tmp, exist_ok=True)
        env = {"PATH": os.environ["PATH"], "HOME": self.home, "GEMINI_API_KEY": "x",
               "GOOGLE_GEMINI_BASE_URL": f"http://127.0.0.1:{port}", "TMPDIR": tmp}
        run_checked([sys.executable, os.path.join(BIN, "crew-hook"), "--install",
                     os.path.join(self.home, ".gemini"), "--agent", "gemini"],
                    env=dict(os.environ, **env))
        return self.command(env, [self.binary, "-y"], launcher=NOT_CI)

    def stop_model(self):
        """The stand-in and any Gemini process of this HOME ended (one can
        outlive its tmux server: agent_rigs.stop_geminis)."""
        super().stop_model()
        stop_geminis(self.home)
