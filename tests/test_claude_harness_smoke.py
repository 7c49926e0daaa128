"""Smoke test: the real Claude Code CLI, offline in a private tmux server, delivers
UserPromptSubmit and Stop hook payloads (with our env var) for one typed prompt."""
import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from claude_harness import ClaudeRig, require_real_claude  # noqa: E402

HOOK = """import json, os, sys
data = json.load(sys.stdin)
with open({out!r}, "a") as f:
    f.write(json.dumps({{"event": sys.argv[1], "CREWFILE_SESSION": os.environ.get("CREWFILE_SESSION"),
                        "payload": data}}) + "\\n")
"""


def _events(path):
    if not path.exists():
        return []
    return [json.loads(l) for l in path.read_text().splitlines() if l.strip()]


def test_real_claude_hooks_smoke(tmp_path):
    require_real_claude()

    out = tmp_path / "events.jsonl"
    hook = tmp_path / "hook.py"
    hook.write_text(HOOK.format(out=str(out)))
    settings = {"hooks": {ev: [{"hooks": [{"type": "command",
                                           "command": f"{sys.executable} {hook} {ev}"}]}]
                          for ev in ("SessionStart", "UserPromptSubmit", "Stop")}}
    sockdir = Path(tempfile.mkdtemp(prefix="cf-tmux-", dir="/tmp"))  # short AF_UNIX path
    rig = ClaudeRig(tmp_path, sockdir / "tmux.sock", settings, env={"CREWFILE_SESSION": "smoke-1"})
    try:
        rig.start(ready_timeout=60)
        rig.turn("hello from the smoke test", timeout=60)
        rig.wait_file(out, lambda t: '"Stop"' in t, timeout=30)
        evs = _events(out)
        ups = [e for e in evs if e["event"] == "UserPromptSubmit"]
        stops = [e for e in evs if e["event"] == "Stop"]
        assert ups and ups[0]["payload"]["prompt"] == "hello from the smoke test"
        assert ups[0]["payload"]["hook_event_name"] == "UserPromptSubmit"
        assert stops and stops[0]["payload"]["stop_hook_active"] is False
        assert stops[0]["payload"]["session_id"] == ups[0]["payload"]["session_id"]
        assert all(e["CREWFILE_SESSION"] == "smoke-1" for e in evs)
        assert any("hello from the smoke test" in json.dumps(r) for r in rig.main_requests())
    except Exception:
        print("--- screen ---\n" + (rig.screen() if rig.pane else "(no pane)"))
        raise
    finally:
        rig.stop()
        shutil.rmtree(sockdir, ignore_errors=True)
