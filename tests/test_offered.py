"""A notice handed to an agent is `offered` until the agent's turn goes on
(docs/files/inbox.md): an agent killed before its model saw the notice does
not lose it; one that went on is not told twice. Real processes stand for
the agent (registered by pid and start time); payloads go through crew-hook."""
import json
import os
import signal
import subprocess
import sys

import pytest

from claude_harness import crew_rig, kinds, records, require_real_claude, start_registered, watched
from conftest import wait_for
from crewfile.core import paths
from crewfile.core.liveness import alive
from crewfile.session.sessions import Session, register
from crewfile.wake import inbox

SID = "0ffe7ed0-0000-4000-8000-000000000001"


def payload(event, transcript, **fields):
    base = {"session_id": SID, "transcript_path": str(transcript), "cwd": "/tmp",
            "hook_event_name": event}
    base.update(fields)
    return json.dumps(base)


def hook(run, event, transcript, **fields):
    p = run("crew-hook", input=payload(event, transcript, **fields),
            env={"CREWFILE_SESSION": "w1"})
    assert p.returncode == 0
    return p


@pytest.fixture
def agent():
    """Start a stand-in agent process (a real one); each is killed and reaped at the end."""
    procs = []

    def start():
        p = subprocess.Popen(["sleep", "600"])
        procs.append(p)
        return p
    yield start
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()


def kill(proc):
    proc.send_signal(signal.SIGKILL)
    proc.wait()         # reaped: gone, not a zombie still counted alive


def pending_ids(crew):
    return [n.id for n in inbox.pending(crew, "w1")]


def offered_file(crew):
    return os.path.join(crew.session_dir("w1"), paths.OFFERED)


def hand_over(crew, run, transcript, n=2):
    """Post *n* notices and let a UserPromptSubmit hand them to the agent; their ids."""
    ids = [inbox.post(crew, "w1", "job", f"job j-{i} exited 0") for i in range(n)]
    p = hook(run, "UserPromptSubmit", transcript, prompt="go on")
    context = json.loads(p.stdout)["hookSpecificOutput"]["additionalContext"]
    assert all(f"id {i}" in context for i in ids)
    assert pending_ids(crew) == []
    life, offered = inbox.offered(crew, "w1")
    assert [o.id for o in offered] == ids
    return ids, life


def test_an_agent_killed_after_the_hand_over_gets_its_notices_again_once(crew, run, agent,
                                                                          tmp_path):
    proc = agent()
    register(crew, "w1", pid=proc.pid)
    transcript = tmp_path / "t.jsonl"
    transcript.write_text('{"type":"user"}\n')
    ids, life = hand_over(crew, run, transcript)
    assert life[:2] == (proc.pid, Session(crew, "w1").meta["pid_start"])
    assert life[2] == str(transcript)
    kill(proc)                      # before any further event of its life
    p = hook(run, "SessionStart", transcript, source="resume")
    assert p.stderr == ("crew-hook: w1: 2 notice(s) handed to an agent that is gone"
                        " put back in the inbox\n")
    assert pending_ids(crew) == ids
    assert not os.path.lexists(offered_file(crew))
    # once: another start puts nothing back twice
    assert hook(run, "SessionStart", transcript, source="resume").stderr == ""
    assert pending_ids(crew) == ids
    # the next turn shows them, same records
    out = hook(run, "UserPromptSubmit", transcript, prompt="hi").stdout
    assert all(f"id {i}" in out for i in ids)


@pytest.mark.parametrize("event, fields", [
    ("PreToolUse", {"tool_name": "Read", "tool_input": {"file_path": "/x"}}),
    ("PostToolUse", {"tool_name": "Read", "tool_input": {"file_path": "/x"}}),
    ("Stop", {"stop_hook_active": False}),
    ("StopFailure", {"error": "server_error"}),
])
def test_a_turn_that_went_on_confirms_the_hand_over(crew, run, agent, tmp_path, event, fields):
    proc = agent()
    register(crew, "w1", pid=proc.pid)
    transcript = tmp_path / "t.jsonl"
    hand_over(crew, run, transcript)
    p = hook(run, event, transcript, **fields)
    assert p.stderr == ""
    assert not os.path.lexists(offered_file(crew))
    kill(proc)
    p = hook(run, "SessionStart", transcript, source="resume")
    assert p.stderr == ""
    assert pending_ids(crew) == []


def test_notices_the_transcript_names_are_not_put_back(crew, run, agent, tmp_path):
    proc = agent()
    register(crew, "w1", pid=proc.pid)
    transcript = tmp_path / "t.jsonl"
    transcript.write_text("")
    ids, _life = hand_over(crew, run, transcript, n=3)
    # the CLI wrote the first into its transcript before it died: a resume sends it again
    transcript.write_text(json.dumps({"attachment": {"content": f"notice (id {ids[0]})"}}) + "\n")
    kill(proc)
    p = hook(run, "SessionStart", transcript, source="resume")
    assert p.stderr == ("crew-hook: w1: 2 notice(s) handed to an agent that is gone"
                        " put back in the inbox\n")
    assert pending_ids(crew) == ids[1:]


def test_put_back_notices_come_before_newer_ones(crew, run, agent, tmp_path):
    proc = agent()
    register(crew, "w1", pid=proc.pid)
    transcript = tmp_path / "t.jsonl"
    ids, _life = hand_over(crew, run, transcript)
    newer = inbox.post(crew, "w1", "wake", "w2 problem: disk full")
    kill(proc)
    hook(run, "SessionStart", transcript, source="startup")
    assert pending_ids(crew) == ids + [newer]


def test_without_a_recorded_agent_only_a_new_start_puts_back(crew, run, tmp_path):
    register(crew, "w1")
    transcript = tmp_path / "t.jsonl"
    ids, life = hand_over(crew, run, transcript)
    assert life[:2] == (None, None)
    hook(run, "Stop", transcript, stop_hook_active=False)
    assert inbox.offered(crew, "w1") is None
    ids, _life = hand_over(crew, run, transcript)
    hook(run, "SessionStart", transcript, source="startup")
    assert pending_ids(crew) == ids


def test_a_dead_agent_recorded_at_the_hand_over_is_not_the_taker(crew, run, agent, tmp_path):
    """A notice handed over while the recorded agent is already dead is
    not put back at every event (the hook's own agent took it)."""
    proc = agent()
    register(crew, "w1", pid=proc.pid)
    kill(proc)
    transcript = tmp_path / "t.jsonl"
    _ids, life = hand_over(crew, run, transcript)
    assert life[:2] == (None, None)
    hook(run, "PostToolUse", transcript, tool_name="Read", tool_input={})
    assert inbox.offered(crew, "w1") is None and pending_ids(crew) == []


def test_nothing_offered_costs_no_lock_and_says_nothing(crew, run, tmp_path):
    register(crew, "w1")
    p = hook(run, "PreToolUse", tmp_path / "t.jsonl", tool_name="Read", tool_input={})
    assert (p.stdout, p.stderr) == ("", "")
    assert inbox.settle(crew, "w1", lambda pid, start: False) == 0


def test_a_damaged_head_line_loses_its_numbers_not_the_notices(crew):
    """An offered file whose head holds a digit that is no ASCII number (a
    damaged byte): that field reads as unknown, the notices are still there."""
    register(crew, "w1")
    nid = inbox.post(crew, "w1", "turn-ended", "w2 stopped")
    sdir = crew.session_dir("w1")
    with open(os.path.join(sdir, paths.INBOX), "rb") as f:
        line = f.read()
    with open(os.path.join(sdir, paths.OFFERED), "wb") as f:
        f.write("agent \u00b2 5 -\n".encode() + line)
    life, notices = inbox.offered(crew, "w1")
    assert life == (None, 5, None)
    assert [n.id for n in notices] == [nid]
    with open(os.path.join(sdir, paths.OFFERED), "wb") as f:     # past int()'s 4,300 digits
        f.write(("agent 7 " + "9" * 5000 + " -\n").encode() + line)
    life, notices = inbox.offered(crew, "w1")
    assert life == (7, None, None)
    assert [n.id for n in notices] == [nid]


def test_real_claude_killed_mid_turn_shows_the_notice_once_after_resume(crew, tmux, tmp_path):
    """The real CLI: a notice handed in at UserPromptSubmit, the agent killed
    while the model's reply is held, `claude --resume` in the pane: the first
    request after the resume carries the notice exactly once (from the
    resumed transcript, or put back and handed over again; never both)."""
    require_real_claude()
    mark = "NOTICE-OFFERED-E2E"
    rig = crew_rig(crew, tmux, tmp_path)
    with watched(rig, crew, "w1"):
        start_registered(rig, crew)
        rig.turn("hello")              # a conversation to resume
        wait_for(lambda: kinds(crew, "w1")[-1] == "turn-ended", 60, what="the first turn's end")
        gate = tmp_path / "end-of-reply"
        rig.set_script([f"HOLD: {gate}"])
        inbox.post(crew, "w1", "job", f"job j-e2e exited 0 {mark}")
        rig.send("what is new?")
        wait_for(lambda: any(mark in json.dumps(r) for r in rig.main_requests()),
                 what="the handed-over notice at the model")
        assert inbox.offered(crew, "w1") is not None
        meta = Session(crew, "w1").reread().meta
        pid, start, sid = meta["pid"], meta["pid_start"], meta["agent_session_id"]
        # killed mid-reply, at once: whether the CLI wrote the hand-over into its
        # transcript first is a race; either way the notice is shown once
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: not alive(pid, start), what="the agent gone")
        gate.touch()                                # the held reply may end now
        n_main = len(rig.main_requests())
        rig.extra_args = ["--resume", sid]
        rig._tmux("respawn-pane", "-k", "-t", rig.pane, rig.command())
        rig.wait_ready()
        wait_for(lambda: ("started", "resume") in records(crew, "w1"), 60,
                 what="the resumed SessionStart")
        assert inbox.offered(crew, "w1") is None
        in_transcript = mark in open(meta["transcript_path"]).read()
        print(f"the notice was {'in' if in_transcript else 'not in'} the killed agent's"
              " transcript", file=sys.stderr)
        assert (inbox.pending(crew, "w1") == []) == in_transcript     # else put back
        rig.send("go on")
        wait_for(lambda: kinds(crew, "w1")[-1] == "turn-ended", 60, what="the resumed turn's end")
        after = [r for r in rig.main_requests()[n_main:] if "go on" in json.dumps(r)]
        assert after, "no request after the resume"
        assert json.dumps(after[0]["messages"]).count(mark) == 1
        assert inbox.pending(crew, "w1") == [] and inbox.offered(crew, "w1") is None
