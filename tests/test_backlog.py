"""A backlog never floods the primary: each hook call hands the model what
Claude Code shows inline (hook.INLINE_LIMIT), grouped by session and kind,
with one line for the rest; the rest stays pending; nothing is marked read
that was not handed over."""
import json
import random

from crewfile.hooks import hook
from crewfile.wake import inbox
from crewfile.session.sessions import register

TS = "2026-11-29T22:01:17.123Z"


def call(crew, event, **fields):
    data = {"hook_event_name": event, "session_id": "s-1", "cwd": "/tmp", **fields}
    reply = hook.handle(json.dumps(data), env={"CREWFILE_SESSION": "firstmate"}, crew=crew)
    assert reply.code == 0 and reply.err == ""
    return json.loads(reply.out)["hookSpecificOutput"]["additionalContext"] if reply.out else ""


def read_ids(crew):
    with open(crew.session_dir("firstmate") + "/inbox.read") as f:
        return [line.split(" ", 3)[2] for line in f]


def test_400_wakes_go_over_several_calls_each_once_each_inline(crew):
    register(crew, "firstmate", kind="primary")
    rng = random.Random(13)
    posted = []
    for i in range(400):
        text = f"{TS} w{i % 37} {rng.choice(['done', 'blocked', 'error'])}: item {i} " + "x" * rng.randrange(0, 300)
        posted.append(inbox.post(crew, "firstmate", "wake", text))
    got, calls = [], 0
    while inbox.pending(crew, "firstmate"):
        event = ["UserPromptSubmit", "PostToolUse"][calls % 2]
        ctx = call(crew, event, prompt="go on", tool_name="Bash")
        calls += 1
        assert 0 < len(ctx.encode()) <= hook.INLINE_LIMIT
        lines = ctx.splitlines()
        ids = [l.rsplit(" id ", 1)[1].rstrip(")") for l in lines if l.startswith("crewfile notice:")]
        got += ids
        left = len(inbox.pending(crew, "firstmate"))
        if left:
            assert lines[-1].startswith(f"crewfile: {left} more notices wait in the inbox (from w")
        # what is marked read is exactly what this call handed over, nothing more
        assert read_ids(crew) == got or sorted(read_ids(crew)) == sorted(got)
        # grouped: the lines of one (session, kind) are adjacent
        keys = [hook._group_key(n) for n in _notices(lines)]
        assert all(keys.index(k) == i or keys[i - 1] == k for i, k in enumerate(keys))
    assert calls > 5
    assert sorted(got) == sorted(posted) and len(set(got)) == 400


def _notices(lines):
    out = []
    for l in lines:
        if l.startswith("crewfile notice: wake "):
            text = l[len("crewfile notice: wake "):]
            out.append(inbox.Notice(TS, "wake", "x", text))
    return out


def test_a_notice_too_long_alone_is_cut_in_the_text_and_kept_whole(crew):
    register(crew, "firstmate", kind="primary")
    nid = inbox.post(crew, "firstmate", "job", "j-1 ended: " + "y" * 12000)
    ctx = call(crew, "UserPromptSubmit", prompt="hi")
    assert len(ctx.encode()) <= hook.INLINE_LIMIT and ctx.endswith("inbox.read keeps it whole]")
    assert read_ids(crew) == [nid] and inbox.pending(crew, "firstmate") == []


def test_the_stop_hook_continues_once_with_what_fits(crew):
    register(crew, "firstmate", kind="primary")
    for i in range(200):
        inbox.post(crew, "firstmate", "wake", f"{TS} w{i} done: shipped {'z' * 100}")
    ctx = call(crew, "Stop", stop_hook_active=False)
    assert ctx.startswith("crewfile wake:") and len(ctx.encode()) <= hook.INLINE_LIMIT
    left = len(inbox.pending(crew, "firstmate"))
    assert 0 < left < 200 and "more notices wait" in ctx.splitlines()[-1]
    assert call(crew, "Stop", stop_hook_active=True) == ""          # never twice in a row
    assert len(inbox.pending(crew, "firstmate")) == left
