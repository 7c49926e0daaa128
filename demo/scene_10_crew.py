"""Two crew sessions in tmux write status records; session-ls shows them."""
import os

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAKE = os.path.join(REPO, "tests", "fake-agent")


def run(d):
    for name in ("builder", "tester"):
        tree = os.path.join(d.root, name)
        os.makedirs(tree)
        pane = d.tmux("new-window", "-d", "-t", "crew", "-n", name, "-P", "-F", "#{pane_id}",
                      "-e", f"CREWFILE_SESSION={name}", "-e", f"CREWFILE_DIR={d.crew}",
                      "-c", tree, FAKE).strip()
        d.say(f"A fake agent `{name}` runs in tmux pane {pane}; the captain registers it:")
        agent = d.tmux("display", "-p", "-t", pane, "#{pane_pid}").strip()
        d.sh(f"session-add {name} --tmux {pane} --cwd {tree} --pid {agent}")
        d.wait(lambda: "ready>" in d.tmux("capture-pane", "-p", "-t", pane), what=f"{name}'s prompt")
        d.__dict__[f"pane_{name}"] = pane
    d.say("The captain types to `builder` (its prompt hook writes the records):")
    d.tmux("send-keys", "-t", d.pane_builder, "-l", "SLOW: 1")
    d.tmux("send-keys", "-t", d.pane_builder, "Enter")
    d.wait(lambda: "turn-started" in d.sh("status-show builder", show=False), what="turn-started")
    d.sh("session-ls")
    d.say("A shell script writes a record with flock(1), on the documented lock path:")
    d.sh('flock "$CREWFILE_DIR/sessions/tester/lock" sh -c '
         '\'echo "$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ) blocked: needs a database" '
         '>> "$CREWFILE_DIR/sessions/tester/status"\'')
    d.wait(lambda: "turn-ended" in d.sh("status-show builder", show=False), what="turn-ended")
    d.sh("status-show tester --last 3")
    d.sh("session-ls")
