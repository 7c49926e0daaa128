"""A captain's act needs a person's hands: end to end with the REAL Claude Code
CLI (offline, private tmux server, the scripted stand-in model).

The aside's own agent tries the two doors tmux opens to every process, from
its shell tool, then hands over a report with aside-conclude:
  - it types `/aside-done settled` into its own pane with `tmux send-keys`
    (the keys arrive as a typed prompt, which the CLI writes to its
    transcript, so the transcript evidence alone would believe it);
  - it has the tmux server run aside-done with `tmux run-shell` (the caller
    evidence alone would see a key binding).
Each door is refused with one `problem` record, and the hand-over after it
with aside-conclude's own (`problem: self-conclusion refused`); nothing else
changed: no captain-done record, no act, no report. Every prompt the agent acts on was
typed by the captain at a real tmux client attached through a
pseudo-terminal (conftest.AttachedClient), so the captain's hands were on
the keyboard a moment before each attempt. Then the captain's three real
acts conclude: /aside-done typed in the window, `aside-done` typed in
another window, a key binding pressed.
"""
import os
import sys
import tempfile
import time

from claude_harness import captain_concludes_three_ways, captains_aside, records
from conftest import (BIN, AttachedClient, captain_runs, captain_types, last_captain_input,
                      wait_for)
from crewfile.asides import aside, evidence
from crewfile.core import paths
from crewfile.session.sessions import Session

AIDE_DONE = f"{sys.executable} {os.path.join(BIN, 'aside-done')}"
CONCLUDE = "aside-conclude design --report r.md"
SEND_KEYS = 'tmux send-keys -t "$TMUX_PANE" "/aside-$(echo done) settled" Enter'
RUN_SHELL = f'tmux run-shell "aside-$(echo done) design --note settled >said.txt 2>&1"; {CONCLUDE}'
NO_KEYS = NO_KEYS_SINCE = ("no key was pressed in a tmux client of the aside's server since"
                           " the captain's last input (keys sent by send-keys or run-shell"
                           " are no person's)")
NOT_CONCLUDED = "aside-conclude: the captain has not concluded this aside"


# --- the rule, on a real tmux server (no agent CLI) ---------------------------------

def test_keys_a_process_sends_are_no_persons_and_keys_typed_at_a_client_are(
        crew, tmux, aside_window):
    sess = aside_window("a1")
    pane = sess.meta["tmux"]
    person = AttachedClient.on(tmux.sock)
    captain_types(crew, "a1", "hello")                  # the captain's last input
    # send-keys into the pane and run-shell on the server move no client's activity
    tmux("send-keys", "-t", pane, "x", "Enter")
    tmux("run-shell", "true")
    wait_for(lambda: time.time() >= int(last_captain_input(sess)) + 1, what="the next second")
    tmux("send-keys", "-t", pane, "y", "Enter")
    tmux("run-shell", "true")
    assert evidence.hands(sess, pane) == (NO_KEYS_SINCE, None)
    assert evidence.hands(sess) == (NO_KEYS_SINCE, None)
    # a key typed at the client does
    person.type_after(last_captain_input(sess), "z\r")
    why, keys = evidence.hands(sess, pane)
    assert why is None and keys == f"keys {person.activity()}"
    assert evidence.hands(sess)[0] is None                # any client, for a key binding
    # ... only for the pane the client looks at, and only for KEYS_RECENT seconds
    assert evidence.hands(sess, "%999") == (
        "no tmux client attached to the aside's tmux server looks at %999", None)
    later = time.time() + evidence.KEYS_RECENT + 1
    assert evidence.hands(sess, pane, now=later) == (
        f"no key was pressed in a tmux client of the aside's server in the last"
        f" {evidence.KEYS_RECENT} seconds (keys sent by send-keys or run-shell are no"
        f" person's)", None)
    person.close()
    assert evidence.hands(sess, pane) == (
        "no tmux client is attached to the aside's tmux server: no person's keys", None)


def test_run_shell_sent_by_a_process_is_refused_and_a_pressed_binding_concludes(
        crew, tmux, aside_window, run):
    sess = aside_window("a1")
    captain_types(crew, "a1", "hello")
    before = open(crew.session_file("a1", paths.STATUS)).read()
    with tempfile.NamedTemporaryFile("r") as out:
        tmux("run-shell", f"{sys.executable} {os.path.join(BIN, 'aside-done')} a1"
                          f" >{out.name} 2>&1; true")
        assert out.read() == f"aside-done: not believed to be the captain: {NO_KEYS_SINCE}\n"
    after = open(crew.session_file("a1", paths.STATUS)).read()
    assert after[len(before):].split(" ", 1)[1] == (
        f"problem: self-conclusion refused: aside-done: {NO_KEYS_SINCE}\n")
    assert not os.path.exists(crew.session_file("a1", paths.ACTS))
    assert captain_runs(tmux, "aside-done", "a1", "--note", "by hand") == (0, "")
    assert records(crew, "a1")[-1] == ("captain-done", "by hand")
    assert aside.believed(sess, aside.scan(sess)) is None


# --- the two doors with the real Claude Code -----------------------------------------

def problems(crew):
    return [t for k, t in records(crew, "design") if k == "problem"]


def disk(crew):
    """All a conclusion would change: the conclusion records, the acts, the reports."""
    acts = crew.session_file("design", paths.ACTS)
    boxes = [crew.sub(paths.REPORTS, box) for box in ("tmp", "new", "cur")]
    return ([(k, t) for k, t in records(crew, "design")
             if k in ("captain-done", "concluded", "closed")],
            open(acts).read() if os.path.exists(acts) else None,
            [sorted(os.listdir(b)) if os.path.isdir(b) else [] for b in boxes])


def tool_results(rig):
    """The text of every tool result the model was sent (each request repeats
    the conversation: each result once, by its tool call's id)."""
    out = {}
    for body in rig.main_requests():
        for message in body.get("messages", []):
            content = message.get("content")
            for part in content if isinstance(content, list) else []:
                if isinstance(part, dict) and part.get("type") == "tool_result":
                    inner = part.get("content")
                    out[part.get("tool_use_id")] = inner if isinstance(inner, str) else " ".join(
                        p.get("text", "") for p in inner or [] if isinstance(p, dict))
    return list(out.values())


def test_the_agent_cannot_conclude_through_tmux_and_the_captains_hands_still_can(
        crew, tmux, tmp_path):
    with captains_aside(crew, tmux, tmp_path) as (rig, person, turn):
        sess = Session(crew, "design")
        turn("let's talk pagination")

        # Door 1: the agent types /aside-done into its own pane. The CLI takes
        # the keys as the next prompt once the turn is over: a turn of its own.
        before = disk(crew)
        turn("attempt one", [f"RUN: {SEND_KEYS}", f"RUN: {CONCLUDE}"], turns=2)
        assert problems(crew) == [
            f"self-conclusion refused: /aside-done not recorded: {NO_KEYS}",
            "self-conclusion refused"]                       # aside-conclude's
        assert disk(crew) == before
        assert aside.scan(sess).state == aside.OPEN
        assert sum(NOT_CONCLUDED in t for t in tool_results(rig)) == 1, tool_results(rig)

        # Door 2: the agent has the tmux server run aside-done.
        turn("attempt two", [f"RUN: {RUN_SHELL}"])
        assert problems(crew)[2:] == [f"self-conclusion refused: aside-done: {NO_KEYS}",
                                      "self-conclusion refused"]
        assert (rig.project / "said.txt").read_text() == (
            f"aside-done: not believed to be the captain: {NO_KEYS}\n")
        assert disk(crew) == before
        assert aside.scan(sess).state == aside.OPEN
        assert sum(NOT_CONCLUDED in t for t in tool_results(rig)) == 2
        # tmux shows the refused command's exit status over the aside's pane
        # (view mode); the captain dismisses it.
        def in_mode():
            return tmux("display-message", "-p", "-t", sess.meta["tmux"],
                        "#{pane_in_mode}").strip() == "1"
        wait_for(in_mode, what="tmux's notice of the exit status")
        person.press("q")
        wait_for(lambda: not in_mode(), what="the notice dismissed")

        # The captain's three acts: /aside-done typed in the window, `aside-done
        # design` typed in another window, a key binding pressed.
        first, second, third, other = captain_concludes_three_ways(
            crew, tmux, person, turn, AIDE_DONE)

        assert len({first, second, third}) == 3
        assert len(problems(crew)) == 4
        acts = open(crew.session_file("design", paths.ACTS)).read().splitlines()
        evidence = [a.split("\t")[1].rsplit(" ", 2) for a in acts]
        assert [(e[0].split()[0], e[1]) for e in evidence] == [("prompt", "keys")] + [
            ("caller", "keys")] * 2
        assert [e[0] for e in evidence][1:] == [f"caller {other}", "caller tmux"]
