"""Claude Code itself: crew-hook installed in one step, the real CLI's hooks write the records, a job's outcome reaches the model and never the screen."""
import os
import shlex
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests"))


def run(d):
    from claude_harness import ClaudeRig, find_claude
    if not find_claude(REPO):
        d.say("*** SKIPPED: the real Claude Code CLI is not installed in .cache/claude-code-VERSION"
              " (`make claude-code` installs it with npm). ***")
        return
    root = os.path.join(d.root, "claude")
    os.makedirs(root)
    path = f"{os.path.dirname(sys.executable)}:{os.path.join(REPO, 'bin')}:{os.environ['PATH']}"
    rig = ClaudeRig(root, d.sock, {}, script=[],
                    env={"PATH": path, "CREWFILE_DIR": d.crew, "CREWFILE_TMUX": d.sock})
    hook = f"{shlex.quote(sys.executable)} {shlex.quote(os.path.join(REPO, 'bin', 'crew-hook'))}"
    d.say("The real Claude Code CLI (offline, its model a scripted stand-in). One step installs"
          " crewfile's hooks, the /aside skill and the /aside-done command into a project:")
    d.sh(f"crew-hook --install {rig.project}/.claude --command {shlex.quote(hook)}")
    command = rig.prepare()
    try:
        pane = d.tmux("new-window", "-d", "-t", "crew", "-n", "coder", "-P", "-F", "#{pane_id}",
                      "-e", "CREWFILE_SESSION=coder", command).strip()
        rig.attach(pane)
        d.say("claude starts in window `coder` with CREWFILE_SESSION=coder; its SessionStart"
              " hook registers the session (nobody ran session-add):")
        d.wait(lambda: os.path.exists(os.path.join(d.crew, "sessions", "coder", "meta")),
               what="coder's SessionStart hook")
        d.sh("session-ls")
        d.say("The captain asks for a test run in the background (the stand-in model runs"
              " the `RUN:` line with its Bash tool):")
        rig.turn("RUN: job-exec --label tests -- sleep 1")
        d.wait(lambda: "job:" in d.sh("inbox-drain coder --peek", show=False), timeout=30,
               what="the job's notice")
        d.say("The job ended after the turn: its outcome waits in coder's inbox as a notice:")
        d.sh("inbox-drain coder --peek")
        d.say("At the next prompt the hook hands it to the model as a fact, not as the"
              " captain's words, and not on the screen:")
        rig.turn("anything new?")
        d.sh(f"grep -o 'crewfile notice: job[^\"\\\\]*' {rig.log} | head -1")
        d.sh(f"tmux -S {d.sock} capture-pane -p -S - -t {pane} | grep -c 'crewfile notice'",
             check=False)
        rig.exit()
        d.wait(lambda: " ended:" in d.sh("status-show coder", show=False), what="ended")
        d.sh("status-show coder --last 9")
        d.say("What it cost: the tokens of every model message in its transcript (crew-top's"
              " TOKENS column; crew-status adds up the crew's):")
        d.sh("crew-top --once --all | grep -E '^(NAME|coder) ' | cut -c1-120")
        d.sh("crew-status")
    finally:
        rig.stop_model()
