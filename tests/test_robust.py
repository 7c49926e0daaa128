"""Issue 12: one bad file never silences the crew. One named regression test
per finding (test_finding_NN_...), each run through the real commands."""
import os

from conftest import cmd


def _one_line(stderr, name):
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{name}: "), stderr
    assert "Traceback" not in stderr


def test_finding_01_truncated_meta_is_named_not_a_traceback(crew):
    cmd("session-add", "a", check=True)
    cmd("session-add", "b", check=True)
    with open(os.path.join(crew.root, "sessions", "a", "meta"), "w") as f:
        f.write('{"name": "a')
    for argv in (["session-ls"], ["status-show", "a"], ["aside-say", "a", "hi"]):
        r = cmd(*argv)
        assert "Traceback" not in r.stderr and "SystemError" not in r.stderr, (argv, r.stderr)
        assert "sessions/a/meta" in r.stderr, (argv, r.stderr)


def test_finding_01_truncated_cursor_is_exit_2_one_line(crew, tmp_path):
    cmd("session-add", "a", check=True)
    cursor = tmp_path / "cursor"
    cursor.write_text('{"version": 1, "sessions": {"a": {"off')
    r = cmd("crew-watch", "--once", "--cursor", cursor)
    assert r.returncode == 2
    _one_line(r.stderr, "crew-watch")
    assert str(cursor) in r.stderr
