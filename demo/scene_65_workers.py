"""Workers in trees of their own: crew-spawn, a nudge each, crew-retire, a reboot, crew-respawn."""
import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAKE = os.path.join(REPO, "tests", "fake-agent")


def run(d):
    # A crew of its own on a tmux server of its own: the "reboot" below kills that server.
    saved = d.env
    src = os.path.join(d.root, "src")
    app = os.path.join(src, "app")
    d.env = dict(saved, CREWFILE_DIR=os.path.join(d.root, "crew-workers"),
                 CREWFILE_TMUX=os.path.join(d.root, "workers.sock"),
                 CREWFILE_AGENT_CMD=f"{sys.executable} {FAKE} --conversation",
                 GIT_AUTHOR_NAME="Demo", GIT_AUTHOR_EMAIL="demo@example.org",
                 GIT_COMMITTER_NAME="Demo", GIT_COMMITTER_EMAIL="demo@example.org")
    sock = d.env["CREWFILE_TMUX"]

    def tmux(*args):
        return subprocess.run(["tmux", "-S", sock, *args], capture_output=True, text=True).stdout

    def status(name):
        return json.loads(d.sh(f"status-show {name} --json", show=False))

    try:
        os.makedirs(app)
        d.sh(f"cd {app} && git init -q -b main && echo app > README && git add README"
             " && git commit -q -m init", show=False)
        d.say("From the repository, two workers, each on a branch in a worktree beside it:")
        for name, extra in (("builder", ' --prompt "build it"'), ("tester", "")):
            d.sh(f"cd {app} && crew-spawn {name} --tmux-session crew{extra}")
            d.wait(lambda: status(name)["last_kind"] in ("started", "turn-ended"),
                   what=f"{name}'s agent")
        d.sh(f"cd {app} && git worktree list")
        d.say("A nudge to each goes out: no two live sessions share a tree.")
        for name in ("builder", "tester"):
            d.sh(f"nudge-add --session {name} --every 1 --message 'continue, {name}'"
                 " > /dev/null", show=False)
        def nudged():
            d.sh("nudge-tick > /dev/null", show=False, check=False)
            return all(" nudge: " in d.sh(f"cat $CREWFILE_DIR/sessions/{n}/status", show=False)
                       for n in ("builder", "tester"))
        d.wait(nudged, what="both nudges")
        d.sh("grep -h ' nudge: ' $CREWFILE_DIR/sessions/*/status | cut -c26-")
        tree = os.path.join(src, "app.crew", "builder")
        d.say("The captain retires builder: refused while its work is not committed.")
        d.sh(f"echo done > {tree}/work.txt")
        d.sh("crew-retire builder", check=False)
        d.sh(f"cd {tree} && git add work.txt && git commit -q -m work && crew-retire builder")
        d.sh(f"cd {app} && git log --oneline main..crew/builder")
        d.say("A reboot, as far as tmux knows: the server is killed. Then, the captain's act:")
        tmux("kill-server")
        d.sh("session-ls --all | cut -c1-70")
        d.say("cron's nudge-tick runs meanwhile: tester is not live, so its schedule disarms.")
        def disarmed():
            d.sh("nudge-tick", show=False, check=False)
            rows = json.loads(d.sh("nudge-ls --json", show=False, check=False) or "[]")
            return any(r.get("session") == "tester" and not r.get("armed") for r in rows)
        d.wait(disarmed, what="the disarm")
        d.sh("nudge-ls | cut -c1-100")
        d.sh("crew-respawn --dry-run | cut -c1-100")
        d.sh("crew-respawn | awk '{print $1, $2}'")
        d.wait(lambda: "started: resume" in d.sh("tail -n 3 $CREWFILE_DIR/sessions/tester/status",
                                                 show=False), what="tester back")
        d.sh("session-ls --all | cut -c1-70")
        d.sh("grep -h -e respawned -e 'started: resume' $CREWFILE_DIR/sessions/tester/status"
             " | cut -c26-130")
        d.say("Its own conversation again (the same id), and its schedule armed again:")
        d.sh("nudge-ls | cut -c1-100")
    finally:
        tmux("kill-server")
        d.env = saved
