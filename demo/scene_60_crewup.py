"""crew-up: the supervision as one unit; a stage killed mid-stream, nothing lost."""
import json
import os
import signal
import subprocess


def run(d):
    d.say("One command runs the wake pipe, nudge-tick --watch and job-sweep for the crew:")
    out = open(os.path.join(d.root, "crew-up.out"), "wb")
    print("  $ crew-up firstmate &", flush=True)
    up = subprocess.Popen(["crew-up", "firstmate", "--backoff-max", "1s"], env=d.env,
                          stdout=out, stderr=out, start_new_session=True)
    state = os.path.join(d.crew, "crew-up", "state")

    def stages():
        try:
            with open(state) as f:
                return json.load(f)["stages"]
        except (OSError, ValueError, KeyError):
            return {}
    try:
        d.wait(lambda: stages().get("wake", {}).get("running"), what="crew-up's stages")
        d.sh("crew-up --status | cut -c1-150")
        d.sh("inbox-drain firstmate > /dev/null")      # start from an empty inbox
        victim = stages()["wake"]["pids"]["wake-send"]
        d.say(f"A record, then wake-send (pid {victim}) is killed with SIGKILL, then another"
              " record while it is down:")
        d.sh("status-append tester turn-started; status-append builder turn-started", show=False)
        d.sh("status-append tester problem 'the staging database is down'")
        os.kill(victim, signal.SIGKILL)
        print(f"  $ kill -9 {victim}", flush=True)
        # what builder's turn writes: its own report, then its hook's end of the turn
        d.sh("status-append builder done 'shipped v2'; status-append builder turn-ended")
        d.wait(lambda: stages().get("wake", {}).get("restarts") == 1
               and stages()["wake"].get("running"), what="the restarted pipe")
        # pending in the inbox, or already handed to the primary's model (inbox.read)
        grep = ("grep -h -e 'shipped v2' -e 'staging database'"
                " \"$CREWFILE_DIR\"/sessions/firstmate/inbox*")
        d.wait(lambda: len(d.sh(grep, show=False, check=False).splitlines()) >= 2,
               what="both wakes in the inbox")
        d.say("crew-up restarted the pipe and said so in its log; both wakes reached the"
              " primary's inbox (pending, or already handed to its model), each exactly once:")
        d.sh(f"grep -E 'stage-exited|stage-started: wake' {d.crew}/crew-up/log | tail -2 | cut -c1-150")
        d.sh(grep + " | cut -c1-150")
        d.sh("crew-down")
    finally:
        if up.poll() is None:
            os.killpg(up.pid, signal.SIGTERM)
        up.wait()
