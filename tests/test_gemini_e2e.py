"""The real Gemini CLI (@google/gemini-cli from npm, in .cache/gemini)
offline against tests/gemini_server.py (GOOGLE_GEMINI_BASE_URL), its hooks
installed by `crew-hook --install DIR --agent gemini`: a turn's records, a
notice reaching the model's request (and not Gemini's output), the guard
denying a self-conclusion through a real run_shell_command call, a
primary's wake retrying the turn at AfterAgent.

Gemini runs no hook in a folder not trusted: the work folder is trusted in
~/.gemini/trustedFolders.json, as Gemini records a user's answer to its
question (no GEMINI_CLI_TRUST_WORKSPACE); the spawned worker's folder is
trusted by answering that question in its pane. No `-m`: the stand-in
answers Gemini's model router too. Run headless (`gemini -p`, `-y` so
that the shell tool runs without a dialog: the BeforeTool hook still runs
first);
three run it in a private tmux pane: a nudge refused while it generates,
typed into its idle prompt line (its placeholder is no draft) and refused
over a draft; its permission dialog (Notification ToolPermission) recorded
as a wait and refused; spawned, killed and resumed by crew-respawn. Skipped when the CLI is not
installed: npm install --prefix .cache/gemini @google/gemini-cli
"""
import json
import os
import shlex
import signal
import subprocess
import sys
import time

import pytest

import agent_clis
import gemini_server
from agent_rigs import (NOT_CI, committed_repo, gemini_settings, stand_in_server,
                        stop_geminis, wake_the_held_primary)
from claude_harness import run_checked
from crewfile.wake import inbox
from crewfile.core import logfile
from crewfile.views import tokens
from crewfile.core.paths import Crew
from crewfile.session.sessions import Session, register
from crewfile.session.prompt import DRAFT, capture, markers_of, placeholder_of, prompt_tail
from crewfile.session import delivery, verdict
from crewfile.core.logfile import TailStats
from crewfile.core.liveness import stat
from conftest import crash_and_respawn
from crewfile.crew import spawn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BINARY = agent_clis.gemini(ROOT)
INTERACTIVE = NOT_CI            # an interactive Gemini sees no CI environment (agent_rigs)
pytestmark = pytest.mark.skipif(not BINARY,
                                reason="Gemini CLI not installed in .cache/gemini-VERSION")
DEADLINE = 120


@pytest.fixture
def rig(tmp_path):
    home = tmp_path / "home"
    gemini_settings(str(home))
    # The work folder trusted, as Gemini writes a captain's answer to its
    # question (headless -p cannot ask; untrusted, it runs no hook at all).
    (home / ".gemini" / "trustedFolders.json").write_text(
        json.dumps({str(tmp_path / "work"): "TRUST_FOLDER"}))
    log = str(tmp_path / "requests.log")
    try:
        with stand_in_server("gemini_server.py", log) as port:
            crew = Crew(str(tmp_path / "crew"))
            # TMPDIR: where Gemini writes its error reports (gemini-client-error-*.json,
            # os.tmpdir() in 0.61.0), kept with the rig; the preload logs each child
            # its node processes spawn (the relaunched CLI, the hooks' shells).
            (tmp_path / "tmp").mkdir()
            env = dict(os.environ, PATH=f"{ROOT}/bin:{os.environ['PATH']}", HOME=str(home),
                       GEMINI_API_KEY="x", GOOGLE_GEMINI_BASE_URL=f"http://127.0.0.1:{port}",
                       CREWFILE_DIR=crew.root, TMPDIR=str(tmp_path / "tmp"),
                       CREWFILE_TEST_CHILDREN=str(tmp_path / "children.log"),
                       NODE_OPTIONS=" ".join(filter(None, [
                           os.environ.get("NODE_OPTIONS"), '--require "%s"'
                           % os.path.join(ROOT, "tests", "gemini_children.cjs")])))
            env.pop("TMUX", None)
            env.pop("GEMINI_CLI_TRUST_WORKSPACE", None)
            run_checked([os.path.join(ROOT, "bin", "crew-hook"), "--install",
                         str(home / ".gemini"), "--agent", "gemini"], env=env)
            work = tmp_path / "work"
            work.mkdir()
            yield Rig(crew, env, log, str(work))
    finally:
        stop_geminis(str(home))


def _tail(path, limit=4000):
    """The last *limit* characters of a file, or why there are none."""
    try:
        with open(path, errors="replace") as f:
            text = f.read()
    except OSError as e:
        return f"({e.strerror})"
    return text if len(text) <= limit else "..." + text[-limit:]


def _exit_status(code):
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


class Rig:
    def __init__(self, crew, env, log, work):
        self.crew, self.env, self.log, self.work = crew, env, log, work

    def gemini(self, session, prompt, wait=True):
        argv = [BINARY, "-y", "-p", prompt]
        # stdin empty: run with -p and stdin not a terminal, Gemini reads stdin
        # (up to 500 ms for a first byte) and prepends it to the prompt; pytest's
        # own stdin is whatever its caller left (a pipe, a file, a terminal).
        p = subprocess.Popen(argv, env=dict(self.env, CREWFILE_SESSION=session), cwd=self.work,
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        if not wait:
            return p
        out, err = p.communicate(timeout=DEADLINE)
        assert p.returncode == 0, self.failure(session, p.returncode, out, err)
        return out + err          # all Gemini showed, as a user in a terminal sees it

    def failure(self, session, code, out, err):
        """What a failed `gemini -p` run leaves to explain it (issue 14: once,
        loaded, it exited 1 and printed nothing): its status, its output, what
        it asked the stand-in, the session's records, the exit of each child
        its node processes spawned, and what Gemini keeps in its HOME and
        TMPDIR (logs, chat recordings, error reports)."""
        parts = [f"gemini -p: {_exit_status(code)}", f"stdout: {out!r}", f"stderr: {err!r}"]
        children = _tail(self.env["CREWFILE_TEST_CHILDREN"])
        if code == 1 and not err.strip():
            parts.append("(no word on stderr: Gemini's launcher exits 1 silently when its"
                         " relaunched child dies of a signal: see that child's line below)")
        parts.append("children (exit code, signal):\n" + children)
        requests = _tail(self.log, 10 ** 6).splitlines()
        parts.append(f"stand-in's request log ({len(requests)} lines; each cut at 300):\n"
                     + "\n".join(line[:300] for line in requests[-20:]))
        try:
            parts.append(f"records of {session}: {self.kinds(session)!r}")
        except Exception as e:
            parts.append(f"records of {session}: unreadable: {e!r}")
        for top in (os.path.join(self.env["HOME"], ".gemini"), self.env["TMPDIR"]):
            for d, _, files in os.walk(top):
                for name in sorted(files):
                    path = os.path.join(d, name)
                    if name not in ("settings.json", "trustedFolders.json", "aside-done.toml"):
                        parts.append(f"{path}:\n{_tail(path, 2000)}")
        return "\n".join(parts)

    def requests(self):
        with open(self.log) as f:
            # whole lines only: the stand-in may be writing the last one
            return [json.loads(line) for line in f
                    if ":streamGenerateContent" in line and line.endswith("\n")]

    def kinds(self, name):
        return [(r.kind, r.text) for r in
                Session(self.crew, name).last_records(100, logfile.TailStats())]


def test_a_turns_records_and_a_notice_for_the_model_only(rig):
    register(rig.crew, "w1")
    inbox.post(rig.crew, "w1", "job", "j-7 ended: exit 0")
    out = rig.gemini("w1", "hello there")
    got = rig.kinds("w1")
    assert [k for k, _ in got] == ["registered", "started", "captain", "turn-started",
                                   "turn-ended", "ended"], got
    assert ("captain", "hello there") in got and got[-1] == ("ended", "exit")
    assert Session(rig.crew, "w1").meta["agent_session_id"]
    body = json.dumps(rig.requests()[0]["body"]["contents"][-1])
    assert "crewfile notice: job j-7 ended: exit 0" in body
    assert "j-7 ended" not in out
    assert inbox.pending(rig.crew, "w1") == []


def test_the_guard_denies_a_self_conclusion_through_a_real_tool_call(rig):
    register(rig.crew, "a1", kind="aside", extra={"topic": "retries"})
    rig.gemini("a1", "RUN: aside-done a1")
    got = rig.kinds("a1")
    assert "captain-done" not in [k for k, _ in got]
    assert ("problem", "self-conclusion refused: the agent ran 'aside-done a1'; denied") in got
    assert ("captain", "RUN: aside-done a1") in got          # the briefing is not the captain's
    first, second = rig.requests()[:2]
    assert "crewfile: this session is the aside 'a1' on the topic: retries." in json.dumps(
        first["body"]["contents"])
    responses = [p["functionResponse"] for c in second["body"]["contents"]
                 for p in c.get("parts", []) if "functionResponse" in p]
    assert len(responses) == 1 and "captain's act only" in json.dumps(responses[0])


def test_a_primarys_wake_at_after_agent_retries_the_turn_once(rig, tmp_path):
    register(rig.crew, "pm", kind="primary")
    go = tmp_path / "go"
    p = rig.gemini("pm", f"HOLD: {go}", wait=False)
    out, err = wake_the_held_primary(rig, p, go, DEADLINE)
    assert p.returncode == 0, rig.failure("pm", p.returncode, out, err)
    reqs = rig.requests()
    assert len(reqs) == 2, out
    last = json.dumps(reqs[1]["body"]["contents"])
    assert "crewfile wake:" in last and "w2 blocked: needs a database" in last
    got = [k for k, _ in rig.kinds("pm")]
    assert got.count("turn-ended") == 1 and got[-2:] == ["turn-ended", "ended"]
    assert inbox.pending(rig.crew, "pm") == []
    # what supervision costs: the stand-in reports the same usage for each request;
    # the second request is the wake's, counted as the primary's wake turn
    per_request = gemini_server.USAGE["totalTokenCount"]
    t = tokens.read(Session(rig.crew, "pm").meta["transcript_path"])
    assert (t.total, t.wake) == (2 * per_request, per_request)


def _captain_sends(rig, tmux, pane, name, text):
    """The captain types *text* into Gemini's prompt and sends it: once it
    shows, Enter, and again while it was not taken (conftest's
    enter_until_taken: Gemini makes an Enter within 30 ms of a key a newline)."""
    sess = Session(rig.crew, name)

    def started():
        return sess.exists() and sum(k == "turn-started" for k, _ in rig.kinds(name))
    before = started()
    tmux("send-keys", "-t", pane, "-l", text)
    tmux.wait_screen(pane, text)
    tmux.enter_until_taken(pane, text, lambda: started() > before,
                           markers_of({"agent": "gemini"}), timeout=DEADLINE)


def _wait(test, what):
    deadline = time.monotonic() + DEADLINE
    while not test():
        assert time.monotonic() < deadline, f"never: {what() if callable(what) else what}"
        time.sleep(0.05)


HINT_SECONDS = 3.0      # Gemini CLI 0.61.0: WARNING_PROMPT_DURATION_MS


def _drawn_idle(sess):
    """Gemini idle and done drawing after a turn: its hook hint shown and gone,
    the prompt line read empty by crewfile's own reading. Gemini shows
    `Executing Hook` from a hook's start (before the AfterAgent hook records the
    end of the turn, drawn maybe after) until 3 s later at least (0.61.0:
    WARNING_PROMPT_DURATION_MS), then redraws the lines below its transcript. A
    capture taken while that redraw is half through shows them erased: the
    echo of the last prompt (`> HOLD: ...`) is then the lowest prompt-like
    line, read as a draft (seen in 1 of ~1,400 captures under load). Delivery
    refusing then is right (a transient refusal); the test waits until the
    redraw is done. The hint is waited for until it shows, or until its 3 s
    from the hook's start (before the turn-ended record was written) have
    passed with a margin: a look that came later than that (the nudge's short
    turn, seen once quiet) would wait for a hint already gone."""
    v = verdict.of(sess.reread())
    ended = sess.last_of(("turn-ended",), TailStats()).time
    _wait(lambda: "Executing Hook" in capture(v.pane, v.socket)
          or time.time() > ended + HINT_SECONDS + 2, "the hook hint")

    def drawn():
        plain = capture(v.pane, v.socket)
        if "Executing Hook" in plain or "Type your message" not in plain:
            return False
        meta = sess.reread().meta
        found = prompt_tail(capture(v.pane, v.socket, placeholder_of(meta)), markers_of(meta))
        return found is not None and found[0] == ""
    _wait(drawn, lambda: capture(v.pane, v.socket))


@pytest.mark.parametrize("flags", ["", "-y"])
def test_an_interactive_gemini_pane_refused_while_generating_typed_into_when_idle(
        rig, tmux, tmp_path, flags):
    """Gemini in a tmux pane: its hooks record the turn, the agent and `agent:
    gemini`; delivery refuses while it generates; idle, its prompt line shows
    only a placeholder (`>   Type your message or @path/to/file` in colour
    248: observed; in YOLO mode, -y, `*` instead of `>`, the echo of the last
    prompt `> ...` above it), which is no draft, so a nudge is typed and taken
    as a new turn. Text the captain typed (colour 231) is a draft: refused."""
    env = {k: rig.env[k] for k in ("PATH", "HOME", "GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL",
                                   "CREWFILE_DIR")}
    env["CREWFILE_SESSION"] = "gm1"
    pane = tmux.new_window(f"cd {rig.work} && {INTERACTIVE} {BINARY} {flags}", env=env)
    tmux.wait_screen(pane, "Type your message", timeout=DEADLINE)
    go = tmp_path / "go"
    _captain_sends(rig, tmux, pane, "gm1", f"HOLD: {go}")
    sess = Session(rig.crew, "gm1")
    _wait(lambda: sess.exists() and (rig.kinds("gm1") or [("", "")])[-1][0] == "turn-started",
          "turn-started")
    assert sess.reread().meta["agent"] == "gemini"
    ok, why = delivery.deliver(sess.reread(), "hello from crewfile", quiet=0)
    assert (ok, why.code) == (False, delivery.GENERATING)
    go.touch()
    _wait(lambda: rig.kinds("gm1")[-1][0] == "turn-ended", "turn-ended")
    _drawn_idle(sess)
    ok, why = delivery.deliver(sess.reread(), "hello from crewfile", quiet=0)
    assert (ok, why.code) == (True, delivery.DELIVERED), (
        why.detail, tmux("capture-pane", "-p", "-e", "-t", pane))
    _wait(lambda: ("captain", "hello from crewfile") in rig.kinds("gm1"),
          lambda: f"the nudge's turn; records {rig.kinds('gm1')[-4:]}; screen:\n"
                  f"{tmux.screen(pane)}")
    _wait(lambda: rig.kinds("gm1")[-1][0] == "turn-ended", "its end")
    _drawn_idle(sess)
    tmux("send-keys", "-t", pane, "-l", "half a thought")          # the captain's draft
    tmux.wait_screen(pane, "half a thought")
    ok, why = delivery.deliver(sess.reread(), "another nudge", quiet=0)
    assert (ok, why.code) == (False, DRAFT) and "half a thought" in why.detail, (
        why.detail, tmux("capture-pane", "-p", "-e", "-t", pane))
    assert "another nudge" not in tmux.screen(pane)


def test_the_recorded_agent_is_the_launcher_and_dies_with_the_gemini_it_runs(rig, tmux):
    """Gemini CLI runs itself again as a child (`node --max-old-space-size=...`,
    the one that runs the hooks); crew-hook records the agent as the leader of
    the pane's foreground group: the launcher (0.61.0: the pane's process).
    The child crashing (SIGKILL) takes the launcher with it, so the verdict
    on that pid says not live and nothing is typed (the launcher ignores
    SIGTERM and a launcher killed alone leaves the child running: not live
    either, the safe side)."""
    env = {k: rig.env[k] for k in ("PATH", "HOME", "GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL",
                                   "CREWFILE_DIR")}
    env["CREWFILE_SESSION"] = "gm4"
    pane = tmux.new_window(f"cd {rig.work} && exec {INTERACTIVE} {BINARY}", env=env)
    tmux.wait_screen(pane, "Type your message", timeout=DEADLINE)
    _captain_sends(rig, tmux, pane, "gm4", "hello")
    sess = Session(rig.crew, "gm4")
    _wait(lambda: sess.exists() and (rig.kinds("gm4") or [("", "")])[-1][0] == "turn-ended",
          lambda: f"turn-ended: {rig.kinds('gm4') if sess.exists() else 'no session'}"
                  f"{tmux.explain(pane)}")
    pid = sess.reread().meta["pid"]
    assert str(pid) == tmux("display-message", "-p", "-t", pane, "#{pane_pid}").strip()
    assert verdict.of(sess.reread()).live == verdict.LIVE
    children = [int(p) for p in os.listdir("/proc")
                if p.isdigit() and getattr(stat(int(p)), "ppid", None) == pid]
    assert len(children) == 1, children                 # the Gemini that runs the hooks
    os.kill(children[0], signal.SIGKILL)
    _wait(lambda: verdict.of(sess.reread()).live == verdict.NOT_LIVE,
          lambda: f"not live once the child died: {verdict.of(sess.reread()).why}")
    ok, why = delivery.deliver(sess.reread(), "hello again", quiet=0)
    assert (ok, why.code) == (False, delivery.NOT_LIVE), why


def test_a_permission_dialog_is_a_wait_and_never_typed_into(rig, tmux):
    """Gemini asking before its shell tool runs (no -y): the Notification
    ToolPermission records `waiting: permission`; delivery refuses the
    dialog; allowed (Enter on `1. Allow once`), AfterTool records the answer."""
    env = {k: rig.env[k] for k in ("PATH", "HOME", "GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL",
                                   "CREWFILE_DIR")}
    env["CREWFILE_SESSION"] = "gm3"
    pane = tmux.new_window(f"cd {rig.work} && {INTERACTIVE} {BINARY}", env=env)
    tmux.wait_screen(pane, "Type your message", timeout=DEADLINE)
    made = os.path.join(rig.work, "made")
    _captain_sends(rig, tmux, pane, "gm3", f"RUN: touch {made}")
    sess = Session(rig.crew, "gm3")
    _wait(lambda: sess.exists() and ("waiting", "permission") in rig.kinds("gm3"), "waiting")
    tmux.wait_screen(pane, "Allow once", timeout=DEADLINE)
    ok, why = delivery.deliver(sess.reread(), "hello from crewfile", quiet=0)
    assert (ok, why.code) == (False, delivery.DIALOG)
    assert not os.path.exists(made)
    tmux("send-keys", "-t", pane, "Enter")
    _wait(lambda: rig.kinds("gm3")[-1][0] == "turn-ended", "turn-ended")
    got = rig.kinds("gm3")
    assert got[-2:] == [("turn-started", "permission answered"), ("turn-ended", "")]
    assert os.path.exists(made)


def _agent_command(rig):
    env = {k: rig.env[k] for k in ("PATH", "HOME", "GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL")}
    return (f"exec {INTERACTIVE} " + " ".join(shlex.quote(f"{k}={v}") for k, v in env.items())
            + f" {BINARY}")


def _spawn(rig, repo, name, *more):
    return subprocess.run([sys.executable, os.path.join(ROOT, "bin", "crew-spawn"), name,
                           "--agent", "gemini", "--cmd", _agent_command(rig),
                           "--tmux-session", "crew", *more],
                          cwd=repo, capture_output=True, text=True, timeout=DEADLINE)


def test_a_first_prompt_waits_for_geminis_hooks(rig, tmux, tmp_path, monkeypatch):
    """A worker's tree not trusted yet: Gemini shows its prompt line, then
    asks whether to trust the folder, and runs no hook before it is trusted.
    crew-spawn --prompt types nothing until SessionStart's `started`, so it
    gives up, saying so, and the question is left to the captain."""
    repo = committed_repo(tmp_path, monkeypatch)
    monkeypatch.setenv("CREWFILE_DIR", rig.crew.root)
    r = _spawn(rig, repo, "w0", "--prompt", "NEVER-TYPED-1618", "--wait", "15s")
    assert r.returncode == 1
    assert r.stderr.endswith("not-started: its SessionStart hook has not run: its hooks are not"
                             " installed, or not trusted yet (a question on its screen?)\n")
    pane = Session(rig.crew, "w0").meta["tmux"]
    screen = tmux.wait_screen(pane, "Do you trust the files in this folder?", timeout=DEADLINE)
    assert "NEVER-TYPED-1618" not in screen
    assert [k for k, _ in rig.kinds("w0")] == ["registered"]


def test_spawn_kill_respawn_resumes_the_same_gemini_conversation(rig, tmux, tmp_path,
                                                                 monkeypatch):
    """crew-spawn --agent gemini --prompt in a worktree of a real repository
    whose crew folder the captain trusted (Gemini's `Trust parent folder`
    at an earlier worker's start, as kept in trustedFolders.json); a turn;
    the agent killed (kill -9); crew-respawn runs `gemini ... --resume ID`:
    the SessionStart hook reports the same conversation, and a nudge
    delivered into the resumed pane reaches the model with the first turn
    in its history."""
    repo = committed_repo(tmp_path, monkeypatch)
    tree = str(tmp_path / "src" / "app.crew" / "w1")
    trusted = os.path.join(rig.env["HOME"], ".gemini", "trustedFolders.json")
    with open(trusted) as f:
        folders = json.load(f)
    with open(trusted, "w") as f:
        json.dump(dict(folders, **{tree: "TRUST_PARENT"}), f)
    agent = _agent_command(rig)
    monkeypatch.setenv("CREWFILE_DIR", rig.crew.root)
    r = _spawn(rig, repo, "w1", "--prompt", "FIRST-PROMPT-3141 read the README")
    assert r.returncode == 0, r.stderr
    sess = Session(rig.crew, "w1")
    pane = sess.meta["tmux"]
    _wait(lambda: ("captain", "FIRST-PROMPT-3141 read the README") in rig.kinds("w1"),
          "the first prompt's record")
    got = rig.kinds("w1")
    assert got.index(("started", "startup")) < got.index(
        ("captain", "FIRST-PROMPT-3141 read the README"))
    _wait(lambda: rig.kinds("w1")[-1][0] == "turn-ended",
          lambda: f"the first turn's end: {rig.kinds('w1')}\n{tmux.screen(pane)}")
    meta = sess.reread().meta
    sid = meta["agent_session_id"]
    assert sid and meta["cwd"] == tree and meta["agent"] == "gemini"

    # The agent crashes: all its processes (the parent alone killed leaves
    # Gemini's child running until its window goes, which then writes
    # `ended: exit`).
    sess = crash_and_respawn(tmux, sess, f"{agent} --resume {sid}")
    n = len(rig.requests())
    ok, why = spawn.first_prompt(sess, "NUDGE-2718 continue with the plan")
    assert ok, why.detail + str(rig.kinds("w1")) + tmux.screen(sess.meta["tmux"], history=True)
    # delivered says the screen took the Enter; the turn's record is what proves it
    # (once seen missing under load: the screen and records tell which side lost it)
    _wait(lambda: ("captain", "NUDGE-2718 continue with the plan") in rig.kinds("w1"),
          lambda: f"the nudge's turn (delivery said: {why.detail}); records"
                  f" {rig.kinds('w1')}\n{tmux.screen(sess.meta['tmux'], history=True)}")
    _wait(lambda: rig.kinds("w1")[-1][0] == "turn-ended", "its end")
    assert ("started", "resume") in rig.kinds("w1")
    assert sess.reread().meta["agent_session_id"] == sid       # its own conversation
    later = [json.dumps(q["body"]["contents"]) for q in rig.requests()[n:]]
    later = [t for t in later if "NUDGE-2718" in t]
    assert later and "FIRST-PROMPT-3141" in later[-1]          # with the first turn in it
