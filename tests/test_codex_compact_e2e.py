"""Codex compacting its conversation inside a running turn, with the REAL CLI
offline against the stand-in (tests/responses_server.py), its hooks
installed by crew-hook and trusted as a user trusts them: run as `codex
exec`, and as its interactive TUI in a tmux pane (as crew workers run it),
where a `/compact` typed while idle is checked too.

The stand-in's `BIG:` shell call reports 990,000 input tokens, past the
limit Codex 0.171.0 derives for a model it has no metadata for: Codex asks
for a summary, rebuilds its history from it and goes on with the turn
(tests/CODEX_FINDINGS.md, "Auto-compact"). Whatever hooks fire for the
compaction, the session must read as generating until the turn's own Stop:
a nudge or a wake typed then would land in a working agent.

Skipped when the CLI is not installed (make codex).
"""
import json
import os
import shlex

import pytest

import responses_server
from agent_rigs import (COMPACTION_EVENTS as EVENTS, codex_window, logged_hook_events, pretrust,
                        wait_codex, wait_trusted_start)
from conftest import wait_for
from crewfile.session import verdict
from crewfile.session.sessions import Session, register
from test_codex_e2e import BINARY, DEADLINE, rig  # noqa: F401

pytestmark = pytest.mark.skipif(not BINARY, reason="Codex CLI not installed in .cache/codex-VERSION")


def log_every_hook(home, log):
    """A hook beside crewfile's on every event in EVENTS, appending its payload to *log*."""
    path = f"{home}/hooks.json"
    with open(path) as f:
        settings = json.load(f)
    q = shlex.quote(str(log))
    for event in EVENTS:
        settings["hooks"].setdefault(event, []).append(
            {"hooks": [{"type": "command", "command": f"cat >> {q}; echo >> {q}"}]})
    with open(path, "w") as f:
        json.dump(settings, f, indent=2)


def compacted_by_then(log):
    """The hooks logged so far, once the compaction's SessionStart is."""
    events = logged_hook_events(log)
    return events if ("SessionStart", "compact") in events else None


def assert_compacted_mid_turn(mid, rig):
    """The compaction's hooks in Codex's order, crew-hook's `compacted` the
    newest record with no turn's end before it, and the verdict generating."""
    assert mid[mid.index(("PreCompact", "auto")):] == [
        ("PreCompact", "auto"), ("PostCompact", "auto"), ("SessionStart", "compact")], mid
    got = [k for k, _ in rig.kinds("w1")]
    assert got[-1] == "compacted" and "turn-ended" not in got, got
    assert verdict.of(Session(rig.crew, "w1")).generating == verdict.YES


def going_on_from_the_summary(rig):
    """Whether Codex has asked for the turn's next step from the compaction's
    summary: a request offering tools whose last input is that summary."""
    if not os.path.exists(rig.log):
        return False            # no request yet
    for req in rig.requests():
        last = (req.get("input") or [{}])[-1]
        if req.get("tools") and last.get("role") == "user" and responses_server.SUMMARY_PREFIX in (
                json.dumps(last.get("content"))):
            return True
    return False


def test_a_compaction_mid_turn_leaves_the_codex_session_generating(rig, tmux, tmp_path):
    log = tmp_path / "events.jsonl"
    log_every_hook(rig.env["CODEX_HOME"], log)
    pretrust(tmux, rig.env["CODEX_HOME"], rig.work)
    rig.trusted = True
    register(rig.crew, "w1")
    gate = tmp_path / "end-of-reply"
    p = rig.codex("w1", f"BIG: echo one\nHOLD: {gate}", wait=False)
    try:
        # the reply after the compaction is held (HOLD): the turn goes on
        wait_for(lambda: going_on_from_the_summary(rig), timeout=DEADLINE,
                 what=lambda: f"the turn going on after the compaction: {logged_hook_events(log)}")
        mid = wait_for(lambda: compacted_by_then(log), timeout=DEADLINE,
                       what="the compaction's hooks")
        # crew-hook's record of it (`started: compact` before Codex's adapter named it)
        wait_for(lambda: {("compacted", ""), ("started", "compact")} & set(rig.kinds("w1")),
                 timeout=DEADLINE, what=lambda: f"crew-hook's record of it: {rig.kinds('w1')}")
        assert_compacted_mid_turn(mid, rig)
        gate.touch()
        out, _ = p.communicate(timeout=DEADLINE)
        assert p.returncode == 0, out
    finally:
        gate.touch()            # the stand-in's held reply ends either way
        if p.poll() is None:
            p.kill()
            p.wait()
    assert logged_hook_events(log)[len(mid):] == [("Stop", ""), ("SessionEnd", "other")]
    got = [k for k, _ in rig.kinds("w1")]
    assert got[got.index("compacted"):] == ["compacted", "turn-ended", "ended"], got
    assert verdict.of(Session(rig.crew, "w1")).generating == verdict.NO


def tui_pane(rig, tmux, log):
    """Codex's interactive TUI in a tmux pane, as crew workers run it, its
    session `w1`: every hook logged to *log* beside crewfile's, all trusted
    as at a user's next start (`pretrust`: no review screen)."""
    log_every_hook(rig.env["CODEX_HOME"], log)
    pretrust(tmux, rig.env["CODEX_HOME"], rig.work)
    env = {k: rig.env[k] for k in ("PATH", "CODEX_HOME", "HOME", "FAKE_KEY", "CREWFILE_DIR")}
    env["CREWFILE_SESSION"] = "w1"
    register(rig.crew, "w1")
    pane = codex_window(tmux, rig, f"cd {rig.work} && {BINARY[0]}", env)
    wait_trusted_start(tmux, pane)
    return pane


def test_a_compaction_mid_turn_in_the_interactive_tui_leaves_the_session_generating(
        rig, tmux, tmp_path):
    """The same compaction in Codex's interactive TUI, in a tmux pane, as
    crew workers run it: the prompt typed (pasted: its two lines) and
    entered at the prompt line."""
    log = tmp_path / "events.jsonl"
    pane = tui_pane(rig, tmux, log)
    gate = tmp_path / "end-of-reply"
    try:
        # pasted (bracketed): a newline typed would be an Enter, the prompt sent at its first line
        tmux("set-buffer", "-b", "prompt", f"BIG: echo one\nHOLD: {gate}")
        tmux("paste-buffer", "-p", "-d", "-b", "prompt", "-t", pane)
        tmux.wait_screen(pane, f"HOLD: {gate}")
        tmux.enter_until_taken(pane, f"HOLD: {gate}",
                               lambda: ("captain", f"BIG: echo one\nHOLD: {gate}")
                               in rig.kinds("w1"), ("Ask Codex",))
        wait_codex(lambda: going_on_from_the_summary(rig), "the turn going on after the"
                   " compaction", rig, "w1", tmux, pane)
        mid = wait_for(lambda: compacted_by_then(log), timeout=DEADLINE,
                       what="the compaction's hooks")
        wait_codex(lambda: {("compacted", ""), ("started", "compact")} & set(rig.kinds("w1")),
                   "crew-hook's record of it", rig, "w1", tmux, pane)
        assert_compacted_mid_turn(mid, rig)
        gate.touch()
        wait_codex(lambda: rig.kinds("w1")[-1][0] == "turn-ended", "the turn's end",
                   rig, "w1", tmux, pane)
    finally:
        gate.touch()            # the stand-in's held reply ends either way
    assert logged_hook_events(log)[len(mid):] == [("Stop", "")]
    got = [k for k, _ in rig.kinds("w1")]
    assert got[got.index("compacted"):] == ["compacted", "turn-ended"], got
    assert verdict.of(Session(rig.crew, "w1")).generating == verdict.NO


def test_a_compact_typed_into_an_idle_tui_leaves_the_session_idle(rig, tmux, tmp_path):
    """`/compact` typed into Codex's idle TUI, after a turn: PreCompact and
    PostCompact (`manual`) fire at once, but its SessionStart (`compact`)
    only with the next prompt, before UserPromptSubmit. crewfile installs no
    PreCompact or PostCompact hook for Codex, so nothing is recorded at the
    compaction and the session reads idle; the next prompt's records are
    `compacted`, then its turn's."""
    log = tmp_path / "events.jsonl"
    pane = tui_pane(rig, tmux, log)

    def prompt(text, taken):
        tmux("send-keys", "-t", pane, "-l", text)
        tmux.wait_screen(pane, text)
        tmux.enter_until_taken(pane, text, taken, ("Ask Codex",))

    def turn(text):
        prompt(text, lambda: ("captain", text) in rig.kinds("w1"))
        wait_codex(lambda: rig.kinds("w1")[-1][0] == "turn-ended", f"the end of {text!r}",
                   rig, "w1", tmux, pane)
        tmux.wait_screen(pane, "Ask Codex", timeout=DEADLINE)

    turn("hello")
    before = rig.kinds("w1")
    prompt("/compact", lambda: ("PostCompact", "manual") in logged_hook_events(log))
    tmux.wait_screen(pane, "Context compacted", timeout=DEADLINE)
    compaction = logged_hook_events(log)
    assert compaction[-2:] == [("PreCompact", "manual"), ("PostCompact", "manual")], compaction
    assert rig.kinds("w1") == before
    assert verdict.of(Session(rig.crew, "w1")).generating == verdict.NO
    turn("again")
    assert logged_hook_events(log)[len(compaction):] == [
        ("SessionStart", "compact"), ("UserPromptSubmit", ""), ("Stop", "")]
    assert rig.kinds("w1")[len(before):] == [
        ("compacted", ""), ("captain", "again"), ("turn-started", ""), ("turn-ended", "")]
    assert verdict.of(Session(rig.crew, "w1")).generating == verdict.NO
