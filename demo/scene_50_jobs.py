"""Background jobs: an outcome announced to a session that stopped waiting, heard exactly once."""
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAKE = os.path.join(REPO, "tests", "fake-agent")


def run(d):
    fifo = os.path.join(d.root, "deploy-go")
    os.mkfifo(fifo)
    pane = d.tmux("new-window", "-d", "-t", "crew", "-n", "deployer", "-P", "-F", "#{pane_id}",
                  "-e", "CREWFILE_SESSION=deployer", "-e", f"CREWFILE_DIR={d.crew}",
                  f"{sys.executable} {FAKE}").strip()
    d.say(f"A fake agent `deployer` runs in pane {pane}; the captain registers it:")
    agent = d.tmux("display", "-p", "-t", pane, "#{pane_pid}").strip()
    d.sh(f"session-add deployer --tmux {pane} --pid {agent}")
    d.wait(lambda: "ready>" in d.tmux("capture-pane", "-p", "-t", pane), what="deployer's prompt")
    status = os.path.join(d.crew, "sessions", "deployer", "status")
    turns = open(status).read().count(" turn-ended")
    d.say("In a turn, the agent starts a deploy in the background (its session comes from"
          " $CREWFILE_SESSION); job-exec prints a handle at once:")
    d.tmux("send-keys", "-t", pane, "-l", "--",
           f"RUN: job-exec --label deploy -- sh -c 'echo building; read go < {fifo};"
           f" echo deployed to 3 hosts'")
    d.tmux("send-keys", "-t", pane, "Enter")
    d.wait(lambda: open(status).read().count(" turn-ended") > turns, what="the agent's turn")
    d.sh(f"tmux -S \"$CREWFILE_TMUX\" capture-pane -p -t {pane} | grep 'agent:'")
    handle = d.sh("job-ls | awk '$7 == \"deploy\" {print $1}'", show=False).strip()
    d.say("The agent waits a little, then stops waiting (exit 124); the job runs on:")
    d.sh(f"job-wait {handle} --timeout 0.3; echo \"exit $?\"", check=False)
    d.sh("job-ls")
    d.say("The deploy finishes while nobody waits (the demo releases it now):")
    with open(fifo, "w") as f:
        f.write("go\n")
    d.wait(lambda: "notice" in d.sh("job-ls", show=False), what="the announcement")
    d.say("So the watcher announced it: one machine-report line in deployer's inbox, which the"
          " agent's hook reads into the model's context at its next turn boundary (it wakes"
          " nobody, and the captain never sees it as typed words):")
    d.sh("inbox-drain deployer --peek")
    d.sh("job-ls")
    d.say("The agent asks before that boundary: job-wait takes the notice back from the inbox"
          " and reports the outcome itself, so the model hears it once, not twice:")
    d.sh(f"job-wait {handle}")
    d.sh("inbox-drain deployer --peek; job-ls")
    d.say("Asking again repeats it only to whoever asks (a notice the model was handed is"
          " never repeated: job-wait then says so in one line, exit 122):")
    d.sh(f"job-wait {handle}")
    d.say("A job whose session has gone quiet (its window was closed): nothing is posted, and"
          " the outcome stays listed as unheard (no!) until someone asks:")
    other = d.tmux("new-window", "-d", "-t", "crew", "-n", "scratch", "-P", "-F", "#{pane_id}",
                   "sleep 600").strip()
    agent = d.tmux("display", "-p", "-t", other, "#{pane_pid}").strip()
    d.sh(f"session-add scratch --tmux {other} --pid {agent}")
    d.sh(f"tmux -S \"$CREWFILE_TMUX\" kill-window -t {other}; status-show scratch | grep live")
    quiet = d.sh("job-exec --session scratch --label lint -- sh -c 'echo 2 warnings; exit 1'").strip()
    d.wait(lambda: "no!" in d.sh("job-ls", show=False), what="the quiet announcement")
    d.sh("job-ls")
    d.sh(f"cat \"$CREWFILE_DIR/jobs/{quiet}/notice\"")
    d.say("job-sweep removes only heard outcomes (here: past a 0 s retention); the unheard one stays:")
    d.sh("job-sweep --older-than 0s")
    d.sh("job-ls")
    d.tmux("kill-window", "-t", pane)
