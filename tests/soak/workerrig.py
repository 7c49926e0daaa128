"""What the soak's workers of another agent than Claude Code share
(codexrig.py, geminirig.py): a directory of their own under the soak's
root, their day's script, their stand-in model started here with `--soak`
(its requests logged to ROOT/NAME/requests.log, as the Claude workers'
are) and the command crew-spawn runs. `log` and `pane` as ClaudeRig has them.
"""
import os
import shlex

from agent_rigs import REPO, start_stand_in, stop_stand_in


class WorkerRig:
    """Worker NAME's agent and model; a subclass names its agent (`agent`),
    its stand-in (`server`, a file in tests/) and writes its home (prepare)."""

    agent = None
    server_file = None

    def __init__(self, root, name, sock, script, repo, tree):
        self.dir = os.path.join(root, name)
        os.makedirs(self.dir, exist_ok=True)
        self.log = os.path.join(self.dir, "requests.log")
        self.script = os.path.join(self.dir, "script")
        with open(self.script, "w") as f:
            f.write("".join(line + "\n" for line in script))
        self.sock, self.repo, self.tree = sock, repo, tree
        self.server = None
        self.pane = None

    def start_model(self):
        """Start the stand-in following the day's script; return its port."""
        self.server, port = start_stand_in(self.server_file, "--soak", "--log", self.log,
                                           "--script", self.script)
        return port

    @staticmethod
    def command(env, argv, launcher="env"):
        """The shell line crew-spawn runs: *argv* with *env* set by *launcher*."""
        return (f"exec {launcher} " + " ".join(shlex.quote(f"{k}={v}") for k, v in env.items())
                + " " + " ".join(map(shlex.quote, argv)))

    def stop_model(self):
        """The stand-in ended (a subclass ends what else its agent leaves)."""
        if self.server is not None:
            stop_stand_in(self.server)
