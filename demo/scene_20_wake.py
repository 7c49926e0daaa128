"""Wake supervision: crew-watch | wake-filter | wake-send, and what woke the primary versus what was held back."""
import os
import signal
import subprocess

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAKE = os.path.join(REPO, "tests", "fake-agent")


def run(d):
    pane = d.tmux("new-window", "-d", "-t", "crew", "-n", "firstmate", "-P", "-F", "#{pane_id}",
                  "-e", "CREWFILE_SESSION=firstmate", "-e", f"CREWFILE_DIR={d.crew}", FAKE).strip()
    screen = lambda: d.tmux("capture-pane", "-p", "-J", "-t", pane)
    d.say(f"The primary (a fake agent standing in for the supervising agent) runs in pane {pane}:")
    agent = d.tmux("display", "-p", "-t", pane, "#{pane_pid}").strip()
    d.sh(f"session-add firstmate --kind primary --tmux {pane} --pid {agent}")
    d.wait(lambda: "ready>" in screen(), what="the primary's prompt")
    d.say("An interactive session the captain drives (exempt from wake supervision, as every aside):")
    d.sh("session-add chat --kind aside")

    d.say("The supervision pipeline starts, following every session's status log (as the"
          " crew-up runs it: wake-send acknowledges each wake in the cursor once it is in the"
          " inbox, and crew-watch resumes from there):")
    cursor = os.path.join(d.root, "wake.cursor")
    log = os.path.join(d.root, "wake-send.log")
    started = d.sh("date -u +%Y-%m-%dT%H:%M:%S.%3NZ", show=False).strip()
    line = (f"crew-watch --resume {cursor} | wake-filter | wake-send firstmate --cursor {cursor}"
            f" --window 0.5 2> {log}")
    print(f"  $ {line} &", flush=True)
    pipeline = subprocess.Popen(line, shell=True, env=d.env, start_new_session=True)
    d.wait(lambda: os.path.exists(cursor), what="the watcher's first batch")
    try:
        d.say("Ordinary churn: the captain talks with `chat` for three turns; `builder` works.")
        for i in range(1, 4):
            # the captain's input, as the aside's prompt hook writes it (status-append
            # refuses captain records: they are the captain's acts)
            d.sh('flock "$CREWFILE_DIR/sessions/chat/lock" sh -c \'printf "%s captain: question %s\\n"'
                 ' "$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)" "$1" >> "$CREWFILE_DIR/sessions/chat/status"\''
                 f" - {i}", show=(i == 1))
            for rec in ("turn-started", "turn-ended", "paused awaiting captain", "idle"):
                d.sh(f"status-append chat {rec}", show=(i == 1))
        d.tmux("send-keys", "-t", d.pane_builder, "-l", "run the tests")
        d.tmux("send-keys", "-t", d.pane_builder, "Enter")
        d.say("Then things worth a turn: `tester` hits a problem, the captain concludes `chat`:")
        d.sh("status-append tester problem 'the fixtures need a database'")
        # the conclusion as aside-conclude leaves it: the report in reports/new/, and
        # the record naming it (wake-filter believes a conclusion by its report)
        d.sh('report="$CREWFILE_DIR/reports/new/chat,1796040000.M000001P1Q1.host";'
             ' mkdir -p "${report%/*}" && echo "the report" > "$report" &&'
             ' flock "$CREWFILE_DIR/sessions/chat/lock" sh -c \'printf "%s concluded: %s\\n"'
             ' "$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)" "$1" >> "$CREWFILE_DIR/sessions/chat/status"\''
             ' - "$report"')
        d.wait(lambda: "announced" in open(log).read(), what="the primary's wake line")
        d.say("wake-send posted every wake to the primary's inbox, then typed ONE line into its"
              " pane (it was idle):")
        d.say("".join(f"    | {l}\n" for l in screen().rstrip("\n").split("\n")
                      if l.strip() and not l.startswith("[hook")).rstrip())
        d.sh(f"cat {log}")
        d.say("The primary reads its wakes (durable notices with stable ids):")
        delivered = d.sh("inbox-drain firstmate | cut -c1-120").splitlines()
    finally:
        os.killpg(pipeline.pid, signal.SIGTERM)
        pipeline.wait()

    # The pipeline's own span: what came before it (the scene above) was never its to deliver.
    events = d.sh(f"crew-watch --since {started} --once", show=False).splitlines()
    wakes = d.sh(f"crew-watch --since {started} --once | wake-filter", show=False).splitlines()
    d.say(f"Of {len(events)} events while the pipeline ran, {len(wakes)} passed wake-filter;"
          f" the primary's inbox got {len(delivered)} wakes, announced in one typed line:")
    for w in wakes:
        d.say(f"    woke: {w[25:][:100]}")
    held = {}
    woke = set(wakes)
    for e in events:
        if e not in woke:
            name, kind = e.split(" ")[1], e.split(" ")[2].rstrip(":")
            held[(name, kind)] = held.get((name, kind), 0) + 1
    d.say("Held back (never worth a model turn):")
    for (name, kind), n in sorted(held.items()):
        d.say(f"    held: {name:<10} {kind:<14} x{n}")
