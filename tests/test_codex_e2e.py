"""The real Codex CLI (@openai/codex from npm, in .cache/codex) offline against
tests/responses_server.py, its hooks installed by `crew-hook --install DIR
--agent codex`: a turn's records, a notice reaching the model's request
(and not Codex's output), the guard denying a self-conclusion through a real
tool call, a primary's wake continuing the turn at Stop.

Mostly run non-interactively (`codex exec`, which cannot ask); three run it
in a private tmux pane: a nudge refused while it generates, typed into its
idle prompt line (its placeholder is no draft) and refused over a draft; a
permission dialog recorded as a wait and refused; spawned, killed and
resumed by crew-respawn. No test uses a bypass flag: the first and the
spawned one trust the hooks at Codex's review as a user does at a first
start; the permission one starts as a user's next sessions do, with the trust Codex wrote at
such a review in this test session (`pretrust`). Skipped when the CLI is not
installed: npm install --prefix .cache/codex @openai/codex
"""
import json
import os
import shlex
import shutil
import subprocess
import sys

import pytest

import agent_clis
import responses_server
from agent_rigs import (DEADLINE, codex_home, codex_window, committed_repo, pretrust,
                        stand_in_server, stop_codex_daemons, through_the_review, wait_codex,
                        wait_trusted_start, wake_the_held_primary, write_codex_config)
from claude_harness import run_checked
from crewfile.wake import inbox
from crewfile.core import logfile
from crewfile.views import tokens
from crewfile.core.paths import Crew
from crewfile.session import delivery
from crewfile.session.sessions import Session, register
from crewfile.session.prompt import DRAFT
from conftest import crash_and_respawn
from crewfile.crew import spawn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BINARY = [b for b in [agent_clis.codex(ROOT)] if b]
pytestmark = pytest.mark.skipif(not BINARY, reason="Codex CLI not installed in .cache/codex-VERSION")


@pytest.fixture
def rig(tmp_path):
    """Codex with its hooks installed, its model the stand-in (agent_rigs)."""
    home = codex_home()
    log = str(tmp_path / "requests.log")
    try:
        with stand_in_server("responses_server.py", log) as port:
            write_codex_config(home, port, tmp_path / "work")
            crew = Crew(str(tmp_path / "crew"))
            env = dict(os.environ, PATH=f"{ROOT}/bin:{os.environ['PATH']}", CODEX_HOME=home,
                       HOME=home, FAKE_KEY="x", CREWFILE_DIR=crew.root)
            env.pop("TMUX", None)
            run_checked([os.path.join(ROOT, "bin", "crew-hook"), "--install", home,
                         "--agent", "codex"], env=env)
            work = tmp_path / "work"
            work.mkdir()
            yield Rig(crew, env, log, str(work))
    finally:
        stop_codex_daemons(home)
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def trusted(rig, tmux):
    """The rig with its hooks trusted as they stand after a user's first
    start: the trust Codex itself wrote at its review in this test session
    (`pretrust`); `codex exec`, which cannot ask, then runs them."""
    pretrust(tmux, rig.env["CODEX_HOME"], rig.work)
    rig.trusted = True
    return rig


class Rig:
    def __init__(self, crew, env, log, work):
        self.crew, self.env, self.log, self.work = crew, env, log, work
        self.trusted = False     # the `trusted` fixture: hooks trusted as a user does

    def codex(self, session, prompt, wait=True):
        """`codex exec`, which cannot ask: its hooks run only once trusted."""
        assert self.trusted, "use the `trusted` fixture: exec runs no untrusted hook"
        argv = [BINARY[0], "exec", "--skip-git-repo-check", prompt]
        p = subprocess.Popen(argv, env=dict(self.env, CREWFILE_SESSION=session), cwd=self.work,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if not wait:
            return p
        out, _ = p.communicate(timeout=DEADLINE)
        assert p.returncode == 0, out
        return out

    def requests(self):
        with open(self.log) as f:
            # whole lines only: the stand-in may be writing the last one
            return [json.loads(line) for line in f if line.endswith("\n")]

    def kinds(self, name):
        return [(r.kind, r.text) for r in
                Session(self.crew, name).last_records(100, logfile.TailStats())]


def _texts(req):
    return json.dumps(req["input"])


def _last_user_text(req):
    """The text of a request's last input item if it is the user's message."""
    last = (req.get("input") or [{}])[-1]
    if last.get("role") != "user":
        return None
    return "".join(c.get("text", "") for c in last.get("content") or [])


def test_a_turns_records_and_a_notice_for_the_model_only(trusted):
    rig = trusted
    register(rig.crew, "w1")
    inbox.post(rig.crew, "w1", "job", "j-7 ended: exit 0")
    out = rig.codex("w1", "hello there")
    got = rig.kinds("w1")
    assert [k for k, _ in got] == ["registered", "started", "captain", "turn-started",
                                   "turn-ended", "ended"], got
    assert got[-1] == ("ended", "other")       # exec's end fires SessionEnd, reason other
    assert ("captain", "hello there") in got and ("started", "startup") in got
    meta = Session(rig.crew, "w1").meta
    assert meta["agent_session_id"] and meta["agent_session_id"] in out
    req = rig.requests()[0]
    dev = [i for i in req["input"] if i.get("role") == "developer"
           and "crewfile notice: job j-7 ended: exit 0" in json.dumps(i)]
    assert len(dev) == 1                       # a developer message: not the user's words
    assert "j-7 ended" not in out              # and not on Codex's output
    assert inbox.pending(rig.crew, "w1") == []


def test_the_guard_denies_a_self_conclusion_through_a_real_tool_call(trusted):
    rig = trusted
    register(rig.crew, "a1", kind="aside", extra={"topic": "retries"})
    rig.codex("a1", "RUN: aside-done a1")
    got = rig.kinds("a1")
    assert "captain-done" not in [k for k, _ in got]
    assert ("problem", "self-conclusion refused: the agent ran 'aside-done a1'; denied") in got
    first, second = rig.requests()[:2]
    assert "crewfile: this session is the aside 'a1' on the topic: retries." in _texts(first)
    outputs = [i for i in second["input"] if i.get("type") == "function_call_output"]
    assert len(outputs) == 1 and "captain's act only" in json.dumps(outputs[0])
    assert got[-2:] == [("turn-ended", ""), ("ended", "other")]


def test_a_primarys_wake_at_stop_continues_the_turn_once(trusted, tmp_path):
    rig = trusted
    register(rig.crew, "pm", kind="primary")
    go = tmp_path / "go"
    p = rig.codex("pm", f"HOLD: {go}", wait=False)
    out, _ = wake_the_held_primary(rig, p, go, DEADLINE)
    assert p.returncode == 0, out
    reqs = rig.requests()
    assert len(reqs) == 2, out
    assert "crewfile wake:" in _texts(reqs[1]) and "w2 blocked: needs a database" in _texts(reqs[1])
    # what supervision costs: the stand-in reports the same usage for each request;
    # the second request is the wake's, counted as the primary's wake turn
    per_request = responses_server.USAGE["total_tokens"]
    t = tokens.read(Session(rig.crew, "pm").meta["transcript_path"])
    assert (t.total, t.wake) == (2 * per_request, per_request)
    got = [k for k, _ in rig.kinds("pm")]
    assert got.count("turn-ended") == 1 and got[-2:] == ["turn-ended", "ended"]
    assert inbox.pending(rig.crew, "pm") == []


def test_an_interactive_codex_pane_refused_while_generating_typed_into_when_idle(
        rig, tmux, tmp_path):
    """Codex in a tmux pane: its hooks record the turn, the agent and `agent:
    codex`; delivery refuses while it generates; idle, its prompt line shows
    only a placeholder (`› Ask Codex to do anything`, drawn dim: observed),
    which is no draft, so a nudge is typed and taken as a new turn. Text the
    captain typed (plain, not dim) is a draft: refused."""
    env = {k: rig.env[k] for k in ("PATH", "CODEX_HOME", "HOME", "FAKE_KEY", "CREWFILE_DIR")}
    env["CREWFILE_SESSION"] = "cx1"
    # The one start through the review, as a user's first: the others start
    # with the trust Codex keeps (`pretrust`), as a user's next ones do.
    pane = through_the_review(
        tmux, lambda: codex_window(tmux, rig, f"cd {rig.work} && {BINARY[0]}", env),
        untouched=lambda: not Session(rig.crew, "cx1").exists())
    go = tmp_path / "go"
    tmux("send-keys", "-t", pane, "-l", f"HOLD: {go}")
    tmux.wait_screen(pane, f"HOLD: {go}")
    tmux("send-keys", "-t", pane, "Enter")
    sess = Session(rig.crew, "cx1")
    wait_codex(lambda: sess.exists() and (rig.kinds("cx1") or [("", "")])[-1][0] == "turn-started",
               "turn-started", rig, "cx1", tmux, pane)
    assert sess.reread().meta["agent"] == "codex"
    tmux.wait_screen(pane, "esc to interrupt", timeout=DEADLINE)     # observed busy marker
    ok, why = delivery.deliver(sess.reread(), "hello from crewfile", quiet=0)
    assert (ok, why.code) == (False, delivery.GENERATING)
    go.touch()
    wait_codex(lambda: rig.kinds("cx1")[-1][0] == "turn-ended", "turn-ended",
               rig, "cx1", tmux, pane)
    tmux.wait_screen(pane, "Ask Codex", timeout=DEADLINE)
    ok, why = delivery.deliver(sess.reread(), "hello from crewfile", quiet=0)
    assert (ok, why.code) == (True, delivery.DELIVERED), why.detail
    wait_codex(lambda: ("captain", "hello from crewfile") in rig.kinds("cx1"), "the nudge's turn",
               rig, "cx1", tmux, pane)
    wait_codex(lambda: rig.kinds("cx1")[-1][0] == "turn-ended", "its end", rig, "cx1", tmux, pane)
    tmux.wait_screen(pane, "Ask Codex", timeout=DEADLINE)
    tmux("send-keys", "-t", pane, "-l", "half a thought")          # the captain's draft
    tmux.wait_screen(pane, "half a thought")
    ok, why = delivery.deliver(sess.reread(), "another nudge", quiet=0)
    assert (ok, why.code) == (False, DRAFT) and "half a thought" in why.detail
    assert "another nudge" not in tmux.screen(pane)


def test_a_permission_dialog_is_a_wait_and_never_typed_into(rig, tmux, tmp_path):
    """Codex asking to run a command outside its sandbox (-a on-request -s
    read-only): PermissionRequest records `waiting: permission`; delivery
    refuses the dialog; answered (y), PostToolUse records the answer."""
    env = {k: rig.env[k] for k in ("PATH", "CODEX_HOME", "HOME", "FAKE_KEY", "CREWFILE_DIR")}
    env["CREWFILE_SESSION"] = "cx3"
    pretrust(tmux, rig.env["CODEX_HOME"], rig.work)
    pane = codex_window(tmux, rig, f"cd {rig.work} && {BINARY[0]} -a on-request -s read-only", env)
    wait_trusted_start(tmux, pane)
    made = os.path.join(rig.work, "made")
    tmux("send-keys", "-t", pane, "-l", f"ASK: touch {made}")
    tmux.wait_screen(pane, f"ASK: touch {made}")
    tmux("send-keys", "-t", pane, "Enter")
    sess = Session(rig.crew, "cx3")
    wait_codex(lambda: sess.exists() and ("waiting", "permission") in rig.kinds("cx3"), "waiting",
               rig, "cx3", tmux, pane)
    question = "Would you like to run the following command?"
    tmux.wait_screen(pane, question, timeout=DEADLINE)
    ok, why = delivery.deliver(sess.reread(), "hello from crewfile", quiet=0)
    assert (ok, why.code) == (False, delivery.DIALOG)
    assert not os.path.exists(made)
    tmux.choose(pane, "y", lambda s: question not in s)    # a first y may be drained
    wait_codex(lambda: rig.kinds("cx3")[-1][0] == "turn-ended", "turn-ended",
               rig, "cx3", tmux, pane)
    got = rig.kinds("cx3")
    assert got[-2:] == [("turn-started", "permission answered"), ("turn-ended", "")]
    assert os.path.exists(made)


def test_spawn_kill_respawn_resumes_the_same_codex_conversation(rig, tmux, tmp_path, monkeypatch):
    """crew-spawn --agent codex in a worktree of a real repository; its
    hooks trusted as Codex keeps a captain's earlier yes; a turn; the agent killed
    (kill -9); crew-respawn runs `codex ... resume ID`: the SessionStart hook
    reports the same conversation, and a nudge delivered into the resumed
    pane reaches the model with the first turn in its history. The resumed
    Codex runs its SessionStart with that nudge, and its hook is made slower
    than delivery's RECORD_SECONDS (a start on a loaded machine, made certain):
    Codex shows "Waiting for startup" meanwhile, and the nudge is delivered,
    not `unconfirmed`."""
    repo = committed_repo(tmp_path, monkeypatch)
    slow = tmp_path / "slow-start"       # there: the SessionStart hook sleeps first
    _slow_start_hooks(rig.env["CODEX_HOME"],
                      f"if [ -e {slow} ]; then sleep {delivery.RECORD_SECONDS + 10:g}; fi")
    tree = str(tmp_path / "src" / "app.crew" / "w1")
    env = {k: rig.env[k] for k in ("PATH", "CODEX_HOME", "HOME", "FAKE_KEY")}
    agent = "exec env " + " ".join(shlex.quote(f"{k}={v}") for k, v in env.items()) \
        + f" {BINARY[0]}"
    monkeypatch.setenv("CREWFILE_DIR", rig.crew.root)
    # The repository and the hooks trusted, as Codex records a captain's yes
    # to its folder question (which it may ask after its prompt line shows: a
    # prompt typed then races it) and to its hooks' review: a user's next
    # start. No review screen, so none of Codex's input drains before one
    # (DRAIN_TIMED_OUT). A prompt typed early in its start may be dropped,
    # unshown (Codex discards input for a moment): first_prompt types it again.
    pretrust(tmux, rig.env["CODEX_HOME"], rig.work)
    with open(os.path.join(rig.env["CODEX_HOME"], "config.toml"), "a") as f:
        f.write(f'[projects."{repo}"]\ntrust_level = "trusted"\n')
    try:
        r = subprocess.run(
            [sys.executable, os.path.join(ROOT, "bin", "crew-spawn"), "w1", "--agent", "codex",
             "--cmd", agent, "--tmux-session", "crew"], cwd=repo, capture_output=True,
            text=True, timeout=DEADLINE)
        assert r.returncode == 0, r.stderr
        sess = Session(rig.crew, "w1")
        pane = sess.meta["tmux"]
        wait_trusted_start(tmux, pane)
        ok, why = spawn.first_prompt(sess.reread(), "FIRST-PROMPT-3141 read the README")
        assert ok, why.detail + tmux.screen(pane)
        wait_codex(lambda: rig.kinds("w1")[-1][0] == "turn-ended", "the first turn's end",
                   rig, "w1", tmux, pane)
        meta = sess.reread().meta
        sid = meta["agent_session_id"]
        assert sid and meta["cwd"] == tree and meta["agent"] == "codex"

        slow.touch()
        sess = crash_and_respawn(tmux, sess, f"{agent} resume {sid}")
        pane = sess.meta["tmux"]
        n = len(rig.requests())
        ok, why = spawn.first_prompt(sess, "NUDGE-2718 continue with the plan")
        assert ok, why.detail + tmux.screen(pane)             # no question asked again
        wait_codex(lambda: ("captain", "NUDGE-2718 continue with the plan") in rig.kinds("w1"),
                   "the nudge's turn")
        wait_codex(lambda: rig.kinds("w1")[-1][0] == "turn-ended", "its end")
        assert ("started", "resume") in rig.kinds("w1")
        assert sess.reread().meta["agent_session_id"] == sid     # its own conversation
        # the nudge's turn: the request that ends with it. Codex (0.171) also asks,
        # in parallel and in either order, for a title of the new prompt (a request
        # that quotes it, without the history): the last one naming the nudge
        # was that one in a loaded run
        turn = [q for q in rig.requests()[n:] if _last_user_text(q) == "NUDGE-2718 continue"
                " with the plan"]
        assert len(turn) == 1, [_texts(q)[-300:] for q in rig.requests()[n:]]
        assert "FIRST-PROMPT-3141" in _texts(turn[0])           # with the first turn in it
    finally:
        tmux.kill()


SLOW_START = 6     # seconds the SessionStart hook sleeps before crew-hook runs


def _slow_start_hooks(home, before):
    """Run the shell command *before* ahead of crew-hook in each SessionStart
    hook of *home*/hooks.json (before its trust is taken: Codex trusts the
    text), its time limit raised to match."""
    path = os.path.join(home, "hooks.json")
    with open(path) as f:
        hooks = json.load(f)
    for group in hooks["hooks"]["SessionStart"]:
        for hook in group["hooks"]:
            hook["command"] = f"{before}; {hook['command']}"
            hook["timeout"] = 60
    with open(path, "w") as f:
        json.dump(hooks, f)


def test_spawns_first_prompt_is_taken_once_while_its_start_hook_runs(rig, tmux, tmp_path,
                                                                     monkeypatch):
    """`crew-spawn --agent codex --prompt TEXT` as a user runs it. Codex runs
    its SessionStart hook with its first prompt, and keeps the text on its
    prompt line while the hook runs (tests/CODEX_FINDINGS.md, "The first
    prompt taken twice"). The race is made certain, not lucky: the hook's
    command sleeps SLOW_START seconds before crew-hook (hooks.json, trusted
    as Codex keeps a captain's yes), longer than any screen wait of
    delivery's. The prompt is taken once: one `captain`, one `turn-started`,
    and no request to the stand-in carries it twice."""
    repo = committed_repo(tmp_path, monkeypatch)
    home = rig.env["CODEX_HOME"]
    _slow_start_hooks(home, f"sleep {SLOW_START}")
    env = {k: rig.env[k] for k in ("PATH", "CODEX_HOME", "HOME", "FAKE_KEY")}
    agent = "exec env " + " ".join(shlex.quote(f"{k}={v}") for k, v in env.items()) \
        + f" {BINARY[0]}"
    monkeypatch.setenv("CREWFILE_DIR", rig.crew.root)
    pretrust(tmux, home, rig.work)
    with open(os.path.join(home, "config.toml"), "a") as f:
        f.write(f'[projects."{repo}"]\ntrust_level = "trusted"\n')
    prompt = "FIRST-PROMPT-1618 read the README"
    try:
        r = subprocess.run(
            [sys.executable, os.path.join(ROOT, "bin", "crew-spawn"), "w1", "--agent", "codex",
             "--cmd", agent, "--tmux-session", "crew", "--prompt", prompt, "--wait", "120"],
            cwd=repo, capture_output=True, text=True, timeout=DEADLINE + 60)
        sess = Session(rig.crew, "w1")
        pane = sess.meta["tmux"]
        assert r.returncode == 0, r.stderr + tmux.screen(pane)
        wait_codex(lambda: rig.kinds("w1")[-1][0] == "turn-ended", "the first turn's end",
                   rig, "w1", tmux, pane)
        got = rig.kinds("w1")
        assert [k for k, _ in got].count("started") == 1, got
        assert got.count(("captain", prompt)) == 1, got
        assert [k for k, _ in got].count("turn-started") == 1, got
        for req in rig.requests():
            said = [i for i in req.get("input") or [] if i.get("role") == "user"
                    and prompt in json.dumps(i)]
            assert len(said) <= 1, _texts(req)[-600:]
        assert any(_last_user_text(q) == prompt for q in rig.requests())
    finally:
        tmux.kill()
