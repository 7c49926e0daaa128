"""With the real Claude Code CLI (newest installed; CREWFILE_CLAUDE_VERSION picks
another), offline against tests/model_server.py: the primary's wake by the
keystroke-free path (crew-hook --rewake, an asyncRewake Stop hook).

What each test shows:
  - the wake reaches the model with nothing typed into the pane (its screen's
    prompt line before and after), once (the stand-in's request log), and the
    model's own inbox-drain is what marks it read;
  - a captain's draft on the prompt line stays as it was;
  - with the waiter killed, wake-send types as before;
  - it holds while the captain types (a key in the window), then announces;
  - /clear does not stop the waiter: it wakes the cleared conversation;
  - a session resumed (claude --resume, a new process) is typed to until its
    first turn ends, then armed again;
  - after /exit, or the agent killed, no waiter is left (conftest also fails a
    run that leaves one).
"""
import contextlib
import json
import os
import signal
import subprocess
import sys
import time

from conftest import wait_for
from terminal import AttachedClient
from claude_harness import BIN, INPUT_MARK, kinds, make_rig, records, require_real_claude, watched
from crewfile.core import locks, paths
from crewfile.session.sessions import Session, register
from crewfile.wake import announce, inbox

TS = "2026-11-29T22:01:17.123Z"
P = "firstmate"
SAID = "crewfile: 1 wake waiting from w1; run: inbox-drain firstmate"


@contextlib.contextmanager
def armed_primary(crew, tmux, tmp_path, **env):
    """The primary's real Claude Code, started, one turn ended and its waiter
    armed (watched: on failure its screen and records are printed)."""
    require_real_claude()
    register(crew, P, kind="primary")
    rig = make_rig(tmp_path, tmux, env=dict(env, CREWFILE_SESSION=P, CREWFILE_DIR=crew.root))
    with watched(rig, crew, P):
        rig.start()
        rig.turn("hello")
        wait_for(lambda: armed(crew), 30, what="the waiter armed at the turn's end")
        yield rig


def prompt_line(screen):
    """What the input box's line holds (the lowest line led by the prompt marker)."""
    lines = [l.strip() for l in screen.splitlines() if l.strip().startswith(INPUT_MARK)]
    return lines[-1][1:].strip() if lines else None


def armed(crew):
    return announce.armed(Session(crew, P))


def waiter_pid(crew):
    """The pid holding the primary's rewake.lock (from /proc/locks)."""
    words = locks.holder(os.path.join(crew.session_dir(P), paths.REWAKE_LOCK))
    assert words.startswith("pid "), words
    return int(words.split()[1])


def wake_send(crew, line):
    """Run wake-send as the pipeline does, with one wake line; its stderr."""
    env = dict(os.environ, CREWFILE_DIR=crew.root)
    r = subprocess.run([sys.executable, str(BIN / "wake-send"), P, "--window", "0.1s"],
                       input=line + "\n", capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stderr


def read_ids(crew):
    with open(os.path.join(crew.session_dir(P), paths.INBOX_READ)) as f:
        return f.read()


def test_a_wake_by_the_keystroke_free_path_types_nothing_and_arrives_once(crew, tmux, tmp_path):
    with armed_primary(crew, tmux, tmp_path) as rig:
        rig.set_script(["RUN: inbox-drain firstmate"])     # what the woken model does
        before = rig.screen()
        n_main = len(rig.main_requests())
        assert SAID not in json.dumps(rig.main_requests())
        said = wake_send(crew, f"{TS} w1 done: shipped ITEM-1-END")
        assert "announced" not in said, said        # wake-send typed nothing
        # the woken turn ran inbox-drain: the wake is read, by the model's own drain
        wait_for(lambda: not inbox.pending(crew, P), 60, what="the model's inbox-drain")
        wait_for(lambda: kinds(crew, P)[-1] == "turn-ended", 60, what="the woken turn's end")
        after = rig.screen()
        assert prompt_line(before) == "" and prompt_line(after) == "", (before, after)
        assert SAID not in after
        # once: the newest request holds the announcement once (the conversation
        # so far), as the CLI's notification, not as the user's words; and the
        # wake itself once: the woken turn's prompt hook drained it into that
        # turn's context (Claude Code runs UserPromptSubmit for the woken turn)
        new = rig.main_requests()[n_main:]
        last = json.dumps(new[-1]["messages"])
        assert last.count(SAID) == 1, last[-3000:]
        assert last.count("ITEM-1-END") == 1, last[-3000:]
        first = next(r for r in new if SAID in json.dumps(r["messages"]))
        # the CLI's task notification (2.1.197 and 2.1.332 alike), with the
        # hook's stderr as a system reminder
        assert "<summary>Stop hook feedback</summary>" in json.dumps(first["messages"])
        assert "ITEM-1-END" in json.dumps(first["messages"])
        assert "ITEM-1-END" in read_ids(crew)
        # re-armed at the woken turn's end; nothing left to announce
        wait_for(lambda: armed(crew), 30, what="the waiter armed again")
        assert json.dumps(rig.main_requests()[-1]["messages"]).count(SAID) == 1


def test_a_draft_on_the_prompt_line_stays_as_it_was(crew, tmux, tmp_path):
    with armed_primary(crew, tmux, tmp_path) as rig:
        rig.set_script(["RUN: inbox-drain firstmate"])
        rig.send("half-typed draft", enter=False)
        rig.wait_screen(lambda s: prompt_line(s) == "half-typed draft")
        wake_send(crew, f"{TS} w1 done: shipped ITEM-2-END")
        wait_for(lambda: not inbox.pending(crew, P), 60, what="the model's inbox-drain")
        wait_for(lambda: kinds(crew, P)[-1] == "turn-ended", 60, what="the woken turn's end")
        assert prompt_line(rig.screen()) == "half-typed draft", rig.screen()
        assert json.dumps(rig.main_requests()[-1]["messages"]).count(SAID) == 1


def test_with_the_waiter_killed_wake_send_types_as_before(crew, tmux, tmp_path):
    with armed_primary(crew, tmux, tmp_path) as rig:
        os.kill(waiter_pid(crew), signal.SIGKILL)
        wait_for(lambda: not armed(crew), 10, what="the killed waiter's lock let go")
        said = wake_send(crew, f"{TS} w1 done: shipped ITEM-3-END")
        assert f"announced 1 wake(s) to {P}: {SAID}" in said, said
        # typed: the prompt hook drained the wake into that turn's context
        wait_for(lambda: not inbox.pending(crew, P), 60, what="the typed turn's drain")
        typed = wait_for(lambda: [r for r in rig.main_requests()
                                  if SAID in json.dumps(r["messages"])], 30, what="the request")
        assert "ITEM-3-END" in json.dumps(typed[0]["messages"])
        assert "SYSTEM NOTIFICATION" not in json.dumps(typed[0]["messages"])


def test_no_waiter_is_left_after_the_session_ends(crew, tmux, tmp_path):
    with armed_primary(crew, tmux, tmp_path) as rig:
        pid = waiter_pid(crew)
        rig.exit()
        wait_for(lambda: not os.path.exists(f"/proc/{pid}"), 15, what="the waiter gone")
        assert not armed(crew)


def test_it_holds_while_the_captain_types_then_announces(crew, tmux, tmp_path):
    quiet = 6
    with armed_primary(crew, tmux, tmp_path, CREWFILE_CAPTAIN_QUIET=str(quiet)) as rig:
        rig.set_script(["RUN: inbox-drain firstmate"])
        person = AttachedClient(tmux, rig.pane)
        try:
            person.look_at(rig.pane)
            person.type_after(time.time(), b"x")         # the captain starts a message
            key = person.activity()
            wake_send(crew, f"{TS} w1 done: shipped ITEM-4-END")
            wait_for(lambda: not inbox.pending(crew, P), 60, what="the wake taken")
            told = os.stat(os.path.join(crew.session_dir(P), paths.ANNOUNCED)).st_mtime
            assert told >= key + quiet, (told, key)      # held while the key was fresh
            wait_for(lambda: kinds(crew, P)[-1] == "turn-ended", 60, what="the woken turn's end")
            assert prompt_line(rig.screen()) == "x", rig.screen()
        finally:
            person.close()


def test_no_waiter_is_left_when_the_agent_is_killed(crew, tmux, tmp_path):
    with armed_primary(crew, tmux, tmp_path) as rig:
        pid = waiter_pid(crew)
        agent = Session(crew, P).reread().meta["pid"]
        assert agent != pid
        os.kill(agent, signal.SIGKILL)      # no SessionEnd, no SIGTERM to its hooks
        wait_for(lambda: not os.path.exists(f"/proc/{pid}"), 15, what="the waiter gone")
        assert not armed(crew)


def test_a_resumed_session_is_typed_to_until_its_first_turn_ends(crew, tmux, tmp_path):
    with armed_primary(crew, tmux, tmp_path) as rig:
        sid = Session(crew, P).reread().meta["agent_session_id"]
        rig.exit()
        wait_for(lambda: not armed(crew), 15, what="the waiter stopped with the CLI")
        rig.extra_args = ["--resume", sid]
        rig._tmux("respawn-pane", "-k", "-t", rig.pane, rig.command())
        rig.wait_ready()
        wait_for(lambda: kinds(crew, P)[-1] == "started", 30, what="the resumed SessionStart")
        assert not armed(crew)                      # no turn has ended in this process
        said = wake_send(crew, f"{TS} w1 done: shipped ITEM-5-END")
        assert f"announced 1 wake(s) to {P}: {SAID}" in said, said
        wait_for(lambda: kinds(crew, P)[-1] == "turn-ended", 60, what="the typed turn's end")
        wait_for(lambda: armed(crew), 30, what="armed again at that turn's end")


def test_after_clear_the_armed_waiter_wakes_the_cleared_conversation(crew, tmux, tmp_path):
    with armed_primary(crew, tmux, tmp_path) as rig:
        pid = waiter_pid(crew)
        rig.send("/clear")
        wait_for(lambda: ("started", "clear") in records(crew, P), 30, what="SessionStart clear")
        assert armed(crew) and waiter_pid(crew) == pid      # /clear does not stop it
        rig.set_script(["RUN: inbox-drain firstmate"])
        n_main = len(rig.main_requests())
        said = wake_send(crew, f"{TS} w1 done: shipped ITEM-6-END")
        assert "announced" not in said, said
        wait_for(lambda: not inbox.pending(crew, P), 60, what="the wake taken")
        first = wait_for(lambda: next((r for r in rig.main_requests()[n_main:]
                                       if SAID in json.dumps(r["messages"])), None), 30,
                         what="the woken request")
        assert "hello" not in json.dumps(first["messages"])     # the cleared conversation
        assert "ITEM-6-END" in json.dumps(first["messages"])
        assert prompt_line(rig.screen()) == ""
