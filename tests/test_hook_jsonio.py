"""jsonio: the hook's JSON without the json package's import cost gives
json.loads' and json.dumps' results, and refuses what json refuses."""
import json
import subprocess
import sys

import pytest
from hypothesis import given, strategies as st

from crewfile import jsonio

values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=30)


@given(values)
def test_same_as_json(value):
    text = json.dumps(value)
    assert jsonio.dumps(value) == text
    assert jsonio.loads(text) == value
    assert jsonio.loads(json.dumps(value, indent=2).encode()) == value


@pytest.mark.parametrize("text", [
    "", " ", "{", '{"a": 1} x', "[1,]", "nul", '"\\x"', '{"a" 1}', "\x00", b"\xff",
    '"unterminated', "[" * 100000])
def test_refuses_what_json_refuses(text):
    with pytest.raises(ValueError):
        jsonio.loads(text)


def test_specials_like_json():
    for text in ("NaN", "Infinity", "-Infinity", ' {"a": [1.5e3, -0, true, null]} ', '"\\u00e9\\ud83d\\ude00"'):
        a, b = jsonio.loads(text), json.loads(text)
        assert repr(a) == repr(b)
    assert jsonio.dumps({1: 2, None: True, 2.5: [float("inf")]}) == json.dumps(
        {1: 2, None: True, 2.5: [float("inf")]})
    with pytest.raises(TypeError):
        jsonio.dumps(object())


def test_import_does_not_load_json_or_re():
    code = ("import sys; sys.path.insert(0, 'lib'); import crewfile.jsonio as j; "
            "j.loads('{\"a\": [1, 2.5]}'); j.dumps({'a': 'é'}); "
            "print(sorted(m for m in ('json', 're', 'enum') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=__file__.rsplit("/tests/", 1)[0]).stdout
    assert out.strip() == "[]"


def test_hook_import_path_stays_light():
    """A Stop or PreToolUse call imports neither json nor re (the start-up budget)."""
    code = ("import sys, io; sys.path.insert(0, 'lib'); from crewfile import hook; "
            "hook.handle('{\"hook_event_name\": \"PreToolUse\", \"tool_name\": \"Bash\", "
            "\"tool_input\": {\"command\": \"ls\"}}', {'CREWFILE_DIR': '/nonexistent-cf'}); "
            "print(sorted(m for m in ('json', 're', 'subprocess') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=__file__.rsplit("/tests/", 1)[0])
    assert out.stdout.strip() == "[]", out.stderr
