"""Delivery (nudge-tick, wake-send) against the REAL Claude Code CLI, offline in
a private tmux server, against the scripted stand-in model
(tests/model_server.py), with crew-hook installed: the hooks write
the started / turn-started / turn-ended records delivery decides by, and
register the crew session with its pane ($TMUX_PANE).

1. An idle claude: a due nudge is typed by nudge-tick and reaches the model
   as a user prompt; a `nudge` record says so.
2. A generating claude: the due nudge is refused (`generating`), nothing is
   typed; the first tick after the turn ends delivers it.
3. The captain's half-typed draft on claude's input line: refused (`draft`),
   the draft stays there, unsent.
4. wake-send into a claude primary: its one line becomes a prompt, and
   crew-hook's UserPromptSubmit hands the waiting wake notice to the model
   with it (the inbox is drained).

What the real screen showed (Claude Code 2.1.197): the input line is
"\u276f" + a NO-BREAK SPACE between two rules; past prompts above it echo as
"\u276f text" with a plain space. prompt.prompt_tail accepts both.

Without the CLI (make claude-code) these tests are skipped loudly.
"""
import json
import os
import shlex
import signal

from conftest import cmd, wait_for
from claude_harness import (crew_rig, kinds, records, require_real_claude, start_registered,
                            user_texts, watched)
from crewfile.session import prompt, verdict
from crewfile.wake import inbox
from crewfile.session.sessions import Session, register
from test_verdict import make_due, shell_ran_nothing

NUDGE = "NUDGE-MARK-2718 continue with the plan"
DRAFT = "half typed by the captain"


def input_line(rig):
    """What is typed on claude's input line ('' when empty), per delivery's own reading."""
    found = prompt.prompt_tail(rig.screen())
    assert found is not None, "no prompt line on claude's screen:\n" + rig.screen()
    return found[0]


def tick_until(crew, name, kind, what):
    """Run nudge-tick (as cron would) until *name*'s status log has a *kind* record."""
    def ticked():
        cmd("nudge-tick", "--quiet")
        return [t for k, t in records(crew, name) if k == kind]
    return wait_for(ticked, timeout=30, what=what)


def start(rig, crew, name="w1"):
    """Start claude; return once its hook registered it, with its pane, idle and empty."""
    start_registered(rig, crew, name)
    assert Session(crew, name).meta["tmux"] == rig.pane
    assert input_line(rig) == ""


def test_a_due_nudge_reaches_an_idle_claude(crew, tmux, tmp_path):
    require_real_claude()
    rig = crew_rig(crew, tmux, tmp_path)
    with watched(rig, crew, "w1"):
        start(rig, crew)
        cmd("nudge-add", "--session", "w1", "--every", "1", "--message", NUDGE, check=True)
        sent = tick_until(crew, "w1", "nudge", "the nudge to be delivered")
        assert sent[0].endswith("attempt 1/100: delivered")
        wait_for(lambda: NUDGE in user_texts(rig), what="the nudge to reach the model")
        wait_for(lambda: "turn-ended" in kinds(crew, "w1"), what="the nudge's turn to end")
        got = kinds(crew, "w1")
        # Delivered means taken: `nudge` is written once the input line cleared,
        # before or after the prompt hook's records.
        assert got[got.index("captain"):].count("turn-started") == 1
        # The prompt hook cannot tell typed-by-nudge from typed-by-the-captain.
        assert ("captain", NUDGE) in records(crew, "w1")
        assert "nudge-refused" not in got and "nudge-failed" not in got
        rig.wait_ready()
        assert input_line(rig) == ""                   # submitted, not left as a draft


def test_a_nudge_waits_for_the_turn_then_goes_out(crew, tmux, tmp_path):
    require_real_claude()
    rig = crew_rig(crew, tmux, tmp_path)
    with watched(rig, crew, "w1"):
        start(rig, crew)
        gate = tmp_path / "end-of-reply"
        rig.set_script([f"HOLD: {gate}"])               # generating until the test says
        rig.send("work on it slowly")
        wait_for(lambda: "turn-started" in kinds(crew, "w1"), what="turn-started")
        cmd("nudge-add", "--session", "w1", "--every", "1", "--message", NUDGE, check=True)
        refused = tick_until(crew, "w1", "nudge-refused", "the refusal")
        assert refused[0].split(" ", 1)[1].split(":", 1)[0] == "generating", refused
        assert "turn-ended" not in kinds(crew, "w1")   # the turn was still running
        assert NUDGE not in rig.screen() and input_line(rig) == ""
        assert NUDGE not in json.dumps(rig.requests())

        gate.touch()                                    # the turn ends
        sent = tick_until(crew, "w1", "nudge", "the nudge after the turn")
        got = kinds(crew, "w1")
        assert got.index("turn-ended") < got.index("nudge")
        wait_for(lambda: NUDGE in user_texts(rig), what="the nudge to reach the model")
        assert sent[0].endswith("attempt 1/100: delivered")
        assert got.count("nudge-refused") == 1          # the same refusal is said once


def test_a_captains_draft_is_never_completed(crew, tmux, tmp_path):
    require_real_claude()
    rig = crew_rig(crew, tmux, tmp_path)
    with watched(rig, crew, "w1"):
        start(rig, crew)
        rig.send(DRAFT, enter=False)
        rig.wait_screen(lambda s: (prompt.prompt_tail(s) or ("",))[0] == DRAFT)
        cmd("nudge-add", "--session", "w1", "--every", "1", "--message", NUDGE, check=True)
        refused = tick_until(crew, "w1", "nudge-refused", "the refusal")
        assert refused[0].split(" ", 1)[1].split(":", 1)[0] == "draft", refused
        assert input_line(rig) == DRAFT                 # left intact ...
        assert "turn-started" not in kinds(crew, "w1")  # ... and not submitted
        assert NUDGE not in rig.screen()
        assert not any(DRAFT in t or NUDGE in t for t in user_texts(rig))


def test_wake_send_prompts_a_claude_primary(crew, tmux, tmp_path):
    require_real_claude()
    register(crew, "w2", kind="crew")
    rig = crew_rig(crew, tmux, tmp_path, "firstmate")
    with watched(rig, crew, "firstmate"):
        pane = tmux.new_window(rig.prepare(), name="firstmate", session="crew")
        register(crew, "firstmate", kind="primary", tmux=pane)
        rig.attach(pane)
        wait_for(lambda: "started" in kinds(crew, "firstmate"), what="SessionStart hook")
        line = "2026-11-29T23:00:00.000Z w2 problem: needs a database WAKE-MARK-1618"
        sent = cmd("wake-send", "firstmate", "--window", "0.01", input=line + "\n")
        assert sent.returncode == 0, sent.stderr
        say = "crewfile: 1 wake waiting from w2; run: inbox-drain firstmate"
        assert f"announced 1 wake(s) to firstmate: {say}" in sent.stderr
        wait_for(lambda: say in user_texts(rig), what="the announcement to reach the model")
        # The same prompt's UserPromptSubmit hook drained the inbox: the model
        # got the wake itself as context, so inbox-drain has nothing left.
        sent_to_model = json.dumps(rig.main_requests())
        assert "crewfile notice: wake " + line in sent_to_model
        assert inbox.pending(crew, "firstmate") == []
        wait_for(lambda: "turn-ended" in kinds(crew, "firstmate"), what="turn-ended")
        assert ("captain", say) in records(crew, "firstmate")
        assert kinds(crew, "firstmate").count("turn-started") == 1
        rig.wait_ready()
        assert prompt.prompt_tail(rig.screen())[0] == ""


def test_claude_killed_in_a_bash_pane_nothing_is_typed_into_the_shell(crew, tmux, tmp_path):
    """The real Claude Code started from an interactive bash (prompt `❯ `, as
    starship and pure draw it), registered by its own SessionStart hook with
    its process; kill -9 (no SessionEnd): the due nudge is refused and
    disarmed, the shell runs nothing, crew-watch says lost."""
    require_real_claude()
    rig = crew_rig(crew, tmux, tmp_path)
    command = rig.prepare().replace(" && exec env ", " && env ", 1)
    rc = tmp_path / "bashrc"
    rc.write_text("PS1='\u276f '\nunset PROMPT_COMMAND\n", encoding="utf-8")
    pane = tmux.new_window(f"bash --rcfile {shlex.quote(str(rc))} -i", name="w1",
                           env={"LANG": "C.UTF-8"})
    tmux.wait_screen(pane, lambda s: s.rstrip().endswith("\u276f"))
    tmux("send-keys", "-t", pane, "-l", command)
    tmux("send-keys", "-t", pane, "Enter")
    with watched(rig, crew, "w1"):
        rig.attach(pane)
        wait_for(lambda: Session(crew, "w1").exists() and "started" in kinds(crew, "w1")
                 and Session(crew, "w1").meta.get("pid"), what="w1 registered with its agent")
        meta = Session(crew, "w1").meta
        pid = meta["pid"]
        assert pid != tmux.pane_pid(pane)                 # the agent, not the shell
        assert meta["tmux"] == pane and meta["tmux_socket"] == tmux.sock
        assert verdict.of(Session(crew, "w1")).live == verdict.LIVE
        # Claude's start-up asks the terminal questions (XTVERSION, DA1; seen
        # with pipe-pane). Killed before it reads tmux's answers, they stay in
        # the tty's input and bash reads them as keys: ESC P (M-P) opens a
        # history search that swallows the marker line below. A key typed and
        # erased on its input line shows claude has read all input before it.
        rig.send("x", enter=False)
        rig.wait_screen(lambda s: (prompt.prompt_tail(s) or ("",))[0] == "x")
        rig.keys("BSpace")
        rig.wait_screen(lambda s: (prompt.prompt_tail(s) or ("x",))[0] == "")
        sentinel = tmp_path / "SENTINEL"
        sid = cmd("nudge-add", "--session", "w1", "--every", "600", "--message",
                  f"touch {sentinel}", check=True).stdout.split()[0]
        make_due(crew, sid)
        os.kill(pid, signal.SIGKILL)
        tmux.wait_screen(pane, "Killed", timeout=30)     # bash says so; its prompt, amid claude's screen
        out = cmd("nudge-tick").stdout
        assert f"{sid} w1 disarmed: refused and disarmed: not-live: agent-gone" in out, out
        shell_ran_nothing(tmux, pane, str(sentinel))
        assert f"w1 lost: agent process {pid} is gone" in cmd("crew-watch", "--once").stdout
