"""A job's outcome reaches the model exactly once, with the REAL Claude Code CLI
(offline, private tmux server, the stand-in model tests/model_server.py, crew-hook
installed), whichever comes first: the agent's job-wait or the `job` notice.

What the model receives is read from the request bodies that reached the
stand-in: the last one holds the whole conversation (tool results and hook
context alike). The job prints a marker the command line does not contain
(`MARK-$((40+2))` prints MARK-42), so counting the marker counts the outcome.
"""
import contextlib
import json

from conftest import wait_for
from claude_harness import kinds, make_rig, require_real_claude, watched
from crewfile.background import jobs

# Loop until the watcher has posted the job's notice (it is pending in the inbox).
UNTIL_ANNOUNCED = ('until inbox-drain "$CREWFILE_SESSION" --peek | grep -q "$h"; '
                   'do sleep 0.05; done')


def conversation(rig):
    return json.dumps(rig.main_requests()[-1])


def turn(rig, crew, text, script):
    ended = kinds(crew, "w1").count("turn-ended")
    rig.set_script(script)
    rig.turn(text)
    wait_for(lambda: kinds(crew, "w1").count("turn-ended") > ended, what=f"turn-ended of {text!r}")


@contextlib.contextmanager
def started_w1(crew, tmux, tmp_path):
    """Both tests' start: w1, the real claude, watched and registered by its hook; yields the rig."""
    require_real_claude()
    rig = make_rig(tmp_path, tmux, env={"CREWFILE_DIR": crew.root, "CREWFILE_SESSION": "w1",
                                        "CREWFILE_TMUX": tmux.sock})
    with watched(rig, crew, "w1"):
        rig.start()
        wait_for(lambda: "started" in kinds(crew, "w1"), what="w1 registered by its hook")
        yield rig


def test_wait_first_the_model_hears_the_outcome_once_from_job_wait(crew, tmux, tmp_path):
    with started_w1(crew, tmux, tmp_path) as rig:
        # The job ends and is announced before job-wait looks: the notice is
        # pending when the wait arrives, so the wait takes it over.
        turn(rig, crew, "run the job and wait for it", [
            "RUN: h=$(job-exec -- sh -c 'echo MARK-$((40+2)); exit 3'); echo \"$h\" > handle; "
            f"{UNTIL_ANNOUNCED}; job-wait \"$h\""])
        h = (rig.project / "handle").read_text().strip()
        heard = jobs.Job(crew, h).heard()
        assert heard["by"] == "wait" and heard["withdrawn"]
        turn(rig, crew, "anything else?", ["SAY: no"])          # a later boundary drains nothing
        sent = conversation(rig)
        assert f"{h} exited 3 after" in sent and "heard by this wait" in sent
        assert sent.count("MARK-42") == 1, sent
        assert sent.count("exited 3 after") == 1
        assert "crewfile notice: job" not in sent


def test_notice_first_the_model_hears_the_outcome_once_from_the_notice(crew, tmux, tmp_path):
    with started_w1(crew, tmux, tmp_path) as rig:
        # The notice is pending when the tool call ends: the PostToolUse hook
        # hands it to the model. A job-wait in the next turn repeats nothing.
        turn(rig, crew, "start the job", [
            "RUN: h=$(job-exec -- sh -c 'echo MARK-$((50+3)); exit 4'); echo \"$h\" > handle; "
            f"{UNTIL_ANNOUNCED}"])
        h = (rig.project / "handle").read_text().strip()
        assert f"crewfile notice: job {h} exited 4 after" in conversation(rig)
        turn(rig, crew, "wait for it", [f"RUN: job-wait {h}"])
        sent = conversation(rig)
        assert f"{h} heard already by notice" in sent and "not repeated" in sent
        assert "Exit code 122" in sent
        assert sent.count("MARK-53") == 1, sent
        assert sent.count("exited 4 after") == 1
        assert jobs.Job(crew, h).heard()["by"] == "notice"
