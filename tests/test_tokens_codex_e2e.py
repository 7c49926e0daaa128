"""With the real Codex CLI (test_codex_e2e's rig, its hooks trusted as a
user does, offline against its stand-in model, which reports 12 tokens a
request): a primary's tokens and
the share of the turn its hook continued with a wake, counted from the file
its SessionStart hook recorded (meta transcript_path)."""
import os
import time

from crewfile import inbox, tokens
from crewfile.sessions import Session, register
from test_codex_e2e import DEADLINE, pytestmark, rig, trusted  # noqa: F401 (fixtures, the skip)

PER_REQUEST = 12


def test_a_wake_continued_turn_is_counted_as_wake_turn(trusted, tmp_path):  # noqa: F811
    rig = trusted
    register(rig.crew, "pm", kind="primary")
    go = tmp_path / "go"
    p = rig.codex("pm", f"HOLD: {go}", wait=False)
    try:
        deadline = time.monotonic() + DEADLINE
        while not (os.path.exists(rig.log) and rig.requests()):
            assert time.monotonic() < deadline and p.poll() is None, "no model request"
            time.sleep(0.05)
        inbox.post(rig.crew, "pm", "wake", "w2 blocked: needs a database")
        go.touch()
        out, _ = p.communicate(timeout=DEADLINE)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, out
    reqs = rig.requests()
    assert len(reqs) == 2, out          # the prompt's, then the wake's
    t = tokens.read(Session(rig.crew, "pm").meta["transcript_path"])
    assert (t.total, t.wake) == (2 * PER_REQUEST, PER_REQUEST)
