"""An aside: opened, a self-conclusion refused, the captain concludes, the report handed back, the window torn down."""
import os
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAKE = os.path.join(REPO, "tests", "fake-agent")
sys.path.insert(0, os.path.join(REPO, "tests"))
from terminal import AttachedClient, Tmux  # noqa: E402 (a person at a terminal)


def run(d):
    d.env["CREWFILE_AGENT_CMD"] = f"{sys.executable} {FAKE}"
    d.env["CREWFILE_PRIMARY"] = "firstmate"
    d.say("The captain opens an aside: a conversation they drive themselves.")
    d.sh('aside-open cache --topic "cache design" --tmux-session crew')
    pane = d.sh("status-show cache --json | sed -n 's/.*\"tmux\": \"\\(%[0-9]*\\)\".*/\\1/p'",
                show=False).strip()
    screen = lambda: d.tmux("capture-pane", "-p", "-t", pane)
    d.wait(lambda: "ready>" in screen(), what="the aside's prompt")
    status = os.path.join(d.crew, "sessions", "cache", "status")
    # The captain's keys come through a tmux client on a pseudo-terminal: a
    # captain's act stands only on a person's key input (protocol.md, Asides).
    person = AttachedClient(Tmux(d.sock), pane)
    last = [0.0]

    def type_line(text):
        turns = open(status).read().count(" turn-ended")
        d.say(f"  (the captain types into the aside: {text!r})")
        person.type_after(last[0], text + "\r")
        d.wait(lambda: open(status).read().count(" turn-ended") > turns, what="the agent's turn")
        last[0] = time.time()               # its record is older than this

    type_line("let's design the cache: LRU?")
    d.say("The agent decides, on its own, that the design is settled. It is refused:")
    report = os.path.join(d.root, "cache-report.md")
    with open(report, "w") as f:
        f.write("# cache design\nLRU, five-minute TTL.\n")
    d.sh(f"CREWFILE_SESSION=cache aside-conclude cache --report {report}", check=False)
    type_line("and a five-minute TTL")
    d.say("The captain concludes, typing the conclusion command into the aside:")
    type_line("/aside-done ship it")
    person.close()                          # and goes back to the primary
    d.say("Now the agent may hand over its report (maildir delivery into reports/new/):")
    d.sh(f"CREWFILE_SESSION=cache aside-conclude cache --report {report}")
    d.sh("report-ls --new")
    d.say("What the primary is woken for (the aside's churn wakes nobody):")
    d.sh("crew-watch --from-start --once | wake-filter | grep ' cache '", check=False)
    d.say("The primary reconciles: report to cur/, scrollback beside it, `closed`, then the kill.")
    d.sh("aside-reconcile cache")
    d.sh("tmux -S \"$CREWFILE_TMUX\" list-windows -F '#{window_index}: #{window_name}'")
    d.sh("report-ls")
    d.sh("grep -v turn- \"$CREWFILE_DIR/sessions/cache/status\" | cut -c1-110")
    for key in ("CREWFILE_AGENT_CMD", "CREWFILE_PRIMARY"):
        d.env.pop(key, None)
