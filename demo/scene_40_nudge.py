"""Scheduled nudges: one waits for a busy agent and goes out when its turn ends; one for a closed window disarms."""
import os
import subprocess

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAKE = os.path.join(REPO, "tests", "fake-agent")


def run(d):
    saved = d.env["CREWFILE_DIR"]
    crew = os.path.join(d.root, "crew-nudge")
    d.env["CREWFILE_DIR"] = crew
    gate = os.path.join(d.root, "nudge-gate")
    holder = subprocess.Popen(["flock", "-o", gate, "sleep", "600"], stdout=subprocess.DEVNULL)
    watcher = None
    try:
        d.say("A crew of its own for this scene (CREWFILE_DIR=.../crew-nudge), so the earlier"
              " sessions stay out of it. An overnight agent in a git repository:")
        repo = os.path.join(d.root, "nightly")
        os.makedirs(os.path.join(repo, ".git"))
        pane = _agent(d, crew, "night", repo)
        screen = lambda: d.tmux("capture-pane", "-p", "-J", "-t", pane)
        d.say("The captain starts a long turn (it lasts until the demo lets it end):")
        d.tmux("send-keys", "-t", pane, "-l", f"RUN: flock {gate} true")
        d.tmux("send-keys", "-t", pane, "Enter")
        d.wait(lambda: "turn-started" in d.sh("status-show night", show=False), what="the turn")
        d.sh("nudge-add --session night --every 2 --message 'continue; record blockers in NOTES.md' --max 5")
        d.say("Two seconds later the nudge is due, but the agent is generating: cron's tick refuses"
              " and keeps it (a busy refusal is not an attempt):")
        d.wait(lambda: "refused" in d.sh("nudge-tick", show=False), what="a due tick")
        d.sh("nudge-ls")
        d.say("nudge-tick --watch wakes on the agent's status records instead of waiting for the"
              " next cron minute:")
        d.say("  $ nudge-tick --watch &")
        watcher = subprocess.Popen(["nudge-tick", "--watch"], env=d.env, stdout=subprocess.PIPE,
                                   text=True)
        d.say("The turn ends ...")
        holder.kill()
        holder.wait()
        holder = None
        d.wait(lambda: "continue; record blockers" in screen(), what="the nudge on the screen")
        d.wait(lambda: "nudge: " in d.sh("status-show night --last 1", show=False), what="the record")
        d.say("... and the nudge is typed into its pane, literally, then Enter, within a second:")
        d.sh("status-show night --last 6 | tail -6")
        d.sh("nudge-ls")
        watcher.terminate()
        watcher.wait()
        watcher = None

        d.say("The incident behind these rules, replayed (a scheduled nudge to a session that was"
              " gone started a second agent in a repository another agent was mid-build in):"
              " the window of the target closes; another agent is live in the same repository:")
        _agent(d, crew, "helper", os.path.join(repo))
        d.tmux("kill-pane", "-t", pane)
        d.sh("nudge-add --session night --every 1 --message 'continue' --replace")
        d.wait(lambda: "disarmed" in d.sh("nudge-tick", show=False), what="the tick")
        d.say("Refused and disarmed: typing there could only start a new agent. Nothing was typed:")
        d.sh("grep nudge \"$CREWFILE_DIR\"/sessions/night/status | tail -2")
        d.sh("grep -c captain \"$CREWFILE_DIR\"/sessions/helper/status || true")
        d.sh("nudge-ls")
    finally:
        if watcher:
            watcher.terminate()
            watcher.wait()
        if holder:
            holder.kill()
            holder.wait()
        d.env["CREWFILE_DIR"] = saved


def _agent(d, crew, name, cwd):
    pane = d.tmux("new-window", "-d", "-t", "crew:", "-n", name, "-P", "-F", "#{pane_id}",
                  "-e", f"CREWFILE_SESSION={name}", "-e", f"CREWFILE_DIR={crew}",
                  "-c", cwd, FAKE).strip()
    agent = d.tmux("display", "-p", "-t", pane, "#{pane_pid}").strip()
    d.sh(f"session-add {name} --tmux {pane} --cwd {cwd} --pid {agent}")
    d.wait(lambda: "ready>" in d.tmux("capture-pane", "-p", "-t", pane), what=f"{name}'s prompt")
    return pane
