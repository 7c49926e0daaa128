"""delivery: typing into a real fake agent's pane on a private tmux server."""
import os
import pty
import subprocess
import sys

import pytest

from conftest import REPO, crash_and_respawn, spawn_fake, wait_for
from crewfile import agents
from crewfile.agents import claude
from crewfile.hooks import rewake
from crewfile.session import delivery, prompt
from crewfile.core.errors import BadInput, Refused
from crewfile.core.logfile import TailStats
from crewfile.core.liveness import alive
from crewfile.core.locks import acquire
from crewfile.session.sessions import register

FAKE = os.path.join(REPO, "tests", "fake-agent")


def agent(crew, tmux, name="w1", cwd=None, command=FAKE):
    """A fake agent in its own window, registered, showing its prompt."""
    sess, pane = tmux.agent_window(crew, name, command, cwd=cwd)
    tmux.wait_screen(pane, "ready>")
    wait_for(lambda: kinds(sess)[-1:] in (["started"], ["registered"]) and "started" in kinds(sess),
             what="the agent's started record")
    return sess, pane


def kinds(sess):
    return [r.kind for r in sess.last_records(50, TailStats())]


def captain_lines(sess):
    return [r.text for r in sess.last_records(50, TailStats()) if r.kind == "captain"]


def idle(sess):
    return kinds(sess)[-1] in ("turn-ended", "started")


TRICKY = [
    "continue; then $(touch /tmp/crewfile-pwned) `id` && echo \"done\" | cat > x",
    "-n leading dash",
    "trailing semicolon;",
    "it's \"quoted\" and 'single' \\back\\slash {braces} #hash ~tilde *glob?",
    "Enter C-c",
]


@pytest.mark.parametrize("text", TRICKY)
def test_delivers_literally(crew, tmux, text):
    sess, pane = agent(crew, tmux)
    ok, reason = delivery.deliver(sess, text, quiet=0)
    assert ok and reason.code == "delivered", reason
    wait_for(lambda: kinds(sess)[-1] == "turn-ended", what="the nudged turn")
    assert captain_lines(sess) == [text]
    assert not os.path.exists("/tmp/crewfile-pwned")


def test_refuses_while_generating_and_types_nothing(crew, tmux):
    sess, pane = agent(crew, tmux)
    tmux("send-keys", "-t", pane, "-l", "SLOW: 30")
    tmux("send-keys", "-t", pane, "Enter")
    wait_for(lambda: kinds(sess)[-1] == "turn-started", what="turn-started")
    ok, reason = delivery.deliver(sess, "nudge text", quiet=0)
    assert not ok and reason.code == "generating"
    assert "nudge text" not in tmux.screen(pane)


def test_refuses_permission_dialog(crew, tmux):
    sess, pane = agent(crew, tmux)
    sess.append("waiting", "permission")
    ok, reason = delivery.deliver(sess, "yes", quiet=0)
    assert not ok and reason.code == "permission-dialog"
    assert "yes" not in tmux.screen(pane)


def test_unknown_state_is_busy(crew, tmux):
    sess, pane = agent(crew, tmux)
    with open(sess.status_path, "w") as f:      # a log with no turn record at all
        f.write("2026-11-29T22:00:00.000Z note: nothing about turns\n")
    ok, reason = delivery.deliver(sess, "hello", quiet=0)
    assert not ok and reason.code == "state-unknown"


def test_refuses_gone_pane(crew, tmux):
    sess, pane = agent(crew, tmux)
    tmux.new_window("sleep 600", name="other")       # keep the server up
    tmux("kill-pane", "-t", pane)
    ok, reason = delivery.deliver(sess, "hello", quiet=0)
    assert not ok and reason.code == "not-live"


def test_refuses_ended_session_even_if_pane_lives(crew, tmux):
    sess, pane = agent(crew, tmux, command=f"{FAKE}; exec sleep 600")   # a shell remains
    tmux("send-keys", "-t", pane, "C-d")                  # EOF: the agent ends, `ended: eof`
    wait_for(lambda: "ended" in kinds(sess), what="the agent's ended record")
    wait_for(lambda: not alive(sess.reread().meta["pid"], sess.meta["pid_start"]),
             what="the agent's exit")
    ok, reason = delivery.deliver(sess, "hello", quiet=0)
    assert not ok and reason.code == "not-live"


def test_never_completes_a_captains_draft(crew, tmux):
    sess, pane = agent(crew, tmux)
    tmux("send-keys", "-t", pane, "-l", "half a thought")
    tmux.wait_screen(pane, "ready> half a thought")
    ok, reason = delivery.deliver(sess, "nudge", quiet=0)
    assert not ok and reason.code == "draft"
    assert "half a thought" in tmux.screen(pane) and "nudge" not in tmux.screen(pane)
    assert captain_lines(sess) == []


def test_captain_keys_in_the_window_hold_delivery(crew, tmux):
    sess, pane = agent(crew, tmux)
    master, slave = pty.openpty()
    client = subprocess.Popen(["tmux", "-S", tmux.sock, "attach", "-t", pane],
                              stdin=slave, stdout=slave, stderr=slave, env=dict(os.environ, TERM="xterm"))
    try:
        wait_for(lambda: tmux("list-clients", "-F", "#{pane_id}").strip() == pane,
                 what="the captain's client on the pane")
        os.write(master, b"x")                # the captain presses a key
        tmux.wait_screen(pane, "ready> x")
        os.write(master, b"\x7f")             # and deletes it: no draft left behind
        tmux.wait_screen(pane, lambda s: "ready> x" not in s)
        ok, reason = delivery.deliver(sess, "nudge", quiet=60)
        assert not ok and reason.code == "captain-typing", reason
        assert "nudge" not in tmux.screen(pane)
    finally:
        client.kill()
        client.wait()
        os.close(master)
        os.close(slave)


def test_recheck_failure_leaves_text_unsent(crew, tmux, monkeypatch):
    sess, pane = agent(crew, tmux)
    real = delivery.check

    def captain_arrives_before_enter(sess, look=None, now=None, quiet=None, typed=None):
        if typed is not None:
            sess.append("turn-started")           # a turn began between typing and Enter
        return real(sess, look, now, quiet, typed)

    monkeypatch.setattr(delivery, "check", captain_arrives_before_enter)
    ok, reason = delivery.deliver(sess, "nudge me", quiet=0)
    assert not ok and reason.code == "aborted" and "generating" in reason.detail
    assert "ready> nudge me" in tmux.screen(pane)      # visible, unsent
    assert captain_lines(sess) == []


def test_concurrent_delivery_is_refused(crew, tmux):
    sess, pane = agent(crew, tmux)
    with acquire(os.path.join(sess.dir, "deliver.lock")):
        ok, reason = delivery.deliver(sess, "hello", quiet=0)
    assert not ok and reason.code == "delivery-busy"


@pytest.mark.parametrize("text", ["", "   ", "two\nlines", "tab\there", "x" * 5000])
def test_bad_text(crew, text):
    with pytest.raises(BadInput):
        delivery.check_text(text)


def test_prompt_tail():
    assert prompt.prompt_tail("ready> a > b\nagent: ok\nready>\n") == ("", [])
    assert prompt.prompt_tail("ready> half\n\n") == ("half", [])
    screen = "\u2500" * 20 + "\n\u276f \n" + "\u2500" * 20 + "\n  ? for shortcuts\n"
    assert prompt.prompt_tail(screen)[0] == ""
    assert prompt.prompt_tail("no prompt here\n") is None
    assert prompt.shows_typed("ready> hello world\n", "hello world")
    assert not prompt.shows_typed("ready> xhello world\n", "hello world")
    assert prompt.shows_typed("\u276f hello wo\n  rld\n\u2500\u2500\n", "hello world")


def test_prompt_tail_on_claude_codes_screen():
    """As captured from Claude Code 2.1.197: past prompts echo as "\u276f text",
    the input line below them is "\u276f" + a no-break space, padded."""
    rule = "\u2500" * 40
    screen = ("\u276f slow one\n\u25cf ok\n\u273b Crunched for 3s\n\n" + rule
              + "\n\u276f\u00a0" + " " * 30 + "\n" + rule + "\n  ? for shortcuts\n")
    assert prompt.prompt_tail(screen)[0] == ""
    typed = screen.replace("\u276f\u00a0", "\u276f\u00a0half typed")
    assert prompt.prompt_tail(typed)[0] == "half typed"
    assert prompt.shows_typed(typed, "half typed")
    assert prompt.prompt_tail("\u276f\u00a0" + " " * 10 + "\n")[0] == ""


def test_never_types_into_an_aside(crew, tmux):
    """Text typed into an aside would be recorded as the captain's words; a
    nudge of `/aside-done` would even conclude it. Only the captain speaks there."""
    sess, pane = tmux.agent_window(crew, "chat", FAKE, kind="aside")
    tmux.wait_screen(pane, "ready>")
    wait_for(lambda: "started" in kinds(sess), what="the aside agent's started record")
    ok, reason = delivery.deliver(sess, "/aside-done", quiet=0)
    assert not ok and reason.code == "aside"
    assert "/aside-done" not in tmux.screen(pane)
    assert "captain-done" not in kinds(sess)


START_HOOK = 5     # seconds: longer than delivery's screen wait (TAKEN_SECONDS) after Enter


def late_starter(crew, tmux, seconds=START_HOOK):
    """A fake agent whose SessionStart comes with its first prompt, registered
    as Codex (its adapter's START_WITH_FIRST_PROMPT): no `started` before it;
    at the first Enter the text stays on its prompt line while its start hook
    runs for *seconds* (FAKE_START_HOOK: the race made certain, not lucky)."""
    sess, pane = tmux.agent_window(crew, "w1", f"env FAKE_START_HOOK={seconds} {FAKE}",
                                   extra={"agent": "codex"})
    tmux.wait_screen(pane, "ready>")
    assert kinds(sess) == ["registered"]
    return sess, pane


def test_a_first_prompt_is_entered_once_while_the_start_hook_runs(crew, tmux):
    """The text still on the prompt line after Enter is no sign the Enter was
    dropped while the start hook runs: a second Enter would be taken as the
    same prompt twice (Codex: tests/CODEX_FINDINGS.md). The hook's `started`
    is the evidence it was taken."""
    sess, pane = late_starter(crew, tmux)
    ok, reason = delivery.deliver(sess, "first words", quiet=0)
    assert (ok, reason.code) == (True, "delivered"), reason
    wait_for(lambda: kinds(sess)[-1] == "turn-ended", what="the first turn's end")
    assert kinds(sess) == ["registered", "started", "captain", "turn-started", "turn-ended"]
    assert captain_lines(sess) == ["first words"]


def test_a_first_prompt_with_no_record_of_its_start_hook_is_unconfirmed_never_entered_twice(
        crew, tmux, monkeypatch):
    """No record within the bounded wait and the text still shown: whether it
    was taken cannot be told, so Enter is not pressed again and the delivery
    says so (`unconfirmed`). The hook, late, shows it was taken once."""
    monkeypatch.setattr(delivery, "START_SECONDS", 2.5)
    sess, pane = late_starter(crew, tmux, seconds=8)
    ok, reason = delivery.deliver(sess, "first words", quiet=0)
    assert (ok, reason.code) == (False, "unconfirmed"), reason
    assert reason.detail == (
        "Enter pressed; the text still shows on the prompt line and no record came within"
        " 2.5s: its agent shows the text until its hooks have run (its SessionStart with"
        " its first prompt), so whether it was taken cannot be told (a `started` or"
        " `turn-started` record after this says so); not pressed again")
    assert "ready> first words" in tmux.screen(pane)
    wait_for(lambda: kinds(sess)[-1] == "turn-ended", what="the late hook and the turn",
             timeout=30)
    assert kinds(sess) == ["registered", "started", "captain", "turn-started", "turn-ended"]


def test_a_respawned_agents_first_prompt_waits_for_its_start_hook(crew, tmux, tmp_path,
                                                                  monkeypatch):
    """A Codex resumed by crew-respawn runs its SessionStart with its first
    prompt again, though the session's life holds the `started` of its
    earlier process; loaded, that start ran past RECORD_SECONDS and delivery
    said `unconfirmed` (tests/CODEX_FINDINGS.md). A `started` older than the
    agent process is no sign it has started: delivery waits for its start
    hook as at a first start, and Enters once."""
    agent = f"env FAKE_START_HOOK={START_HOOK} {sys.executable} {FAKE} --conversation"
    sess = spawn_fake(crew, tmp_path, "codex", agent, "--prompt", "first words", "--wait", "120")
    wait_for(lambda: kinds(sess)[-1] == "turn-ended", what="the first turn's end")
    conversation = sess.reread().meta["agent_session_id"]
    sess = crash_and_respawn(tmux, sess, f"{agent} resume {conversation}")
    tmux.wait_screen(sess.meta["tmux"], "ready>")
    monkeypatch.setattr(delivery, "RECORD_SECONDS", 1.0)     # its start hook takes longer
    ok, reason = delivery.deliver(sess, "next words", quiet=0)
    assert (ok, reason.code) == (True, "delivered"), reason
    wait_for(lambda: kinds(sess)[-1] == "turn-ended", what="the second turn's end")
    got = [(r.kind, r.text) for r in sess.last_records(50, TailStats())]
    respawned = [k for k, _ in got].index("respawned")
    assert [k for k, _ in got[respawned + 1:]] == ["started", "captain", "turn-started",
                                                   "turn-ended"]
    assert got[respawned + 1] == ("started", "resume")
    assert captain_lines(sess) == ["first words", "next words"]


def test_captain_quiet_that_is_not_a_number_is_the_default(monkeypatch):
    """protocol.md, captain-typing: a value that is not a number is the default (5)."""
    monkeypatch.setenv("CREWFILE_CAPTAIN_QUIET", "5s")
    assert delivery.captain_quiet() == 5.0


CODEX_ROLLOUT = os.path.join(REPO, "tests", "transcripts", "codex-0.171.0-429.jsonl")


def test_a_codex_turn_its_rollout_holds_open_is_generating(crew, tmux, tmp_path):
    """Records that say idle are not enough for Codex: a turn still open in
    its rollout (a task_started with no task_complete after it: a subagent's
    report taken into the turn its Stop hook ended) is refused `generating`,
    after CLOSE_SECONDS; one naming no turn holds nothing; one that cannot
    be read is `state-unknown`, and says why. The lines are the real
    Codex's (tests/test_codex_rollout.py)."""
    sess, pane = agent(crew, tmux)
    rollout = tmp_path / "rollout.jsonl"
    sess.update_meta(agent="codex", transcript_path=str(rollout))
    lines = open(CODEX_ROLLOUT, encoding="utf-8").readlines()

    def check():
        why, v = delivery.check(sess.reread(), quiet=0, screen=False)
        return v.generating, why and (why.code, why.detail)
    rollout.write_text("".join(lines[:7]))          # the second turn started, not complete
    assert check() == ("no", (delivery.GENERATING, "its rollout says the turn its hooks said"
                              " ended goes on (a subagent's report came back as it ended)"))
    rollout.write_text("".join(lines))              # ... and complete
    assert check() == ("no", None)
    rollout.write_text("".join(lines[1:4]))         # no turn's start or end: none to wait for
    assert check() == ("no", None)
    rollout.unlink()
    assert check()[1] == (delivery.STATE_UNKNOWN, f"its rollout cannot be read: {rollout}:"
                                                  " No such file or directory")
    ok, why = delivery.deliver(sess.reread(), "nudge text", quiet=0)
    assert (ok, why.code) == (False, delivery.STATE_UNKNOWN)
    assert "nudge text" not in tmux.screen(pane)


QUIET, HOLD, WAIT = delivery.CAPTAIN_QUIET, agents.ACCOUNT_HOLD, claude.REWAKE_TIMEOUT - 60.0


@pytest.mark.parametrize("given,quiet,hold,wait", [
    (None, QUIET, HOLD, WAIT),
    ("", QUIET, HOLD, WAIT),
    ("12.5", 12.5, 12.5, 12.5),
    ("-3", 0.0, 0.0, 0.0),
    ("inf", 86400.0, 7 * 86400.0, WAIT),
    ("nan", QUIET, HOLD, WAIT),
    ("soon", QUIET, HOLD, WAIT),
])
def test_seconds_from_the_environment_are_bounded_and_never_nan(monkeypatch, given, quiet, hold, wait):
    """The three waits an environment may set (the captain's quiet, an
    account's hold, the rewake waiter's) read it one way: bounded, and a
    value that is no number (nan included) leaves the default."""
    env = {} if given is None else {"CREWFILE_CAPTAIN_QUIET": given, "CREWFILE_ACCOUNT_HOLD": given,
                                    rewake.WAIT_ENV: given}
    monkeypatch.delenv("CREWFILE_CAPTAIN_QUIET", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert delivery.captain_quiet() == quiet
    assert agents.account_hold(env) == hold
    assert rewake.wait_seconds(claude, env) == wait


def test_one_pane_is_one_session_two_names_would_be_two_voices(crew, tmux):
    """A pane whose live agent is session a's cannot be registered as b too
    (by session-add, or an agent's hook under another CREWFILE_SESSION): each
    name's deliveries hold only its own deliver.lock, so b's nudge could be
    typed while a's wake line is. Once a has ended, the pane is free."""
    a, pane = agent(crew, tmux, "a")
    pid = a.reread().meta["pid"]
    with pytest.raises(Refused, match=f"pane {pane} is session 'a''s, whose agent is live there"):
        register(crew, "b", tmux=pane, pid=pid, env={"CREWFILE_TMUX": tmux.sock})
    assert not os.path.exists(os.path.join(crew.root, "sessions", "b", "meta"))
    a.append("ended", "other")
    tmux("kill-pane", "-t", pane)
    wait_for(lambda: not alive(pid, a.meta.get("pid_start")), what="a's agent gone")
    b, pane_b = agent(crew, tmux, "b")                # a new pane: nothing refused
    assert b.meta["tmux"] != pane
