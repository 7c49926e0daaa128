"""jsonio: the hook's JSON without the json package's import cost gives
json.loads' and json.dumps' results, and refuses what json refuses."""
import json
import subprocess
import sys

import pytest
from hypothesis import given, strategies as st

from conftest import captain_keys
from crewfile.core import jsonio
from crewfile.core.logfile import TailStats
from crewfile.core.paths import Crew
from crewfile.session.sessions import Session, register

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
    code = ("import sys; sys.path.insert(0, 'lib'); import crewfile.core.jsonio as j; "
            "j.loads('{\"a\": [1, 2.5]}'); j.dumps({'a': 'é'}); "
            "print(sorted(m for m in ('json', 're', 'enum') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=__file__.rsplit("/tests/", 1)[0]).stdout
    assert out.strip() == "[]"


def test_hook_import_path_stays_light():
    """A Stop or PreToolUse call imports neither json nor re (the start-up budget)."""
    code = ("import sys, io; sys.path.insert(0, 'lib'); from crewfile.hooks import hook; "
            "hook.handle('{\"hook_event_name\": \"PreToolUse\", \"tool_name\": \"Bash\", "
            "\"tool_input\": {\"command\": \"ls\"}}', {'CREWFILE_DIR': '/nonexistent-cf'}); "
            "print(sorted(m for m in ('json', 're', 'subprocess') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=__file__.rsplit("/tests/", 1)[0])
    assert out.stdout.strip() == "[]", out.stderr


def test_a_prompt_hook_leaves_the_rest_of_asides_unimported(crew, tmp_path, aside_window):
    """A captain's prompt (and /aside-done, with its evidence) is recorded by
    the captain module alone: aside, reports and window stay off every
    prompt's path (the prompt hook's start-up budget)."""
    sess = aside_window("a1")
    sess.update_meta(transcript_path=str(tmp_path / "t.jsonl"))
    code = ("import sys; sys.path.insert(0, 'lib'); from crewfile.hooks import hook; "
            "env = {'CREWFILE_DIR': sys.argv[1], 'CREWFILE_SESSION': 'a1'}; "
            "print(hook.handle('{\"hook_event_name\": \"UserPromptSubmit\", \"prompt\": \"%s\", "
            "\"prompt_id\": \"p-1\", \"transcript_path\": \"%s\"}' % tuple(sys.argv[2:]), env).err); "
            "print(sorted(m for m in ('crewfile.asides.aside', 'crewfile.asides.reports', 'crewfile.session.window')"
            " if m in sys.modules))")
    for prompt in ("hello", "/aside-done thanks"):
        captain_keys(sess, prompt + "\r")                 # the captain types it
        out = subprocess.run([sys.executable, "-c", code, crew.root, prompt,
                              str(tmp_path / "t.jsonl")],
                             capture_output=True, text=True, cwd=__file__.rsplit("/tests/", 1)[0])
        assert out.stdout.split("\n")[-2] == "[]", (out.stdout, out.stderr)
    kinds = [(r.kind, r.text) for r in sess.last_records(20, TailStats())
             if r.kind in ("captain", "captain-done")]
    assert kinds == [("captain", "hello"), ("captain-done", "thanks")], out


def test_a_prompt_hook_without_the_captain_module_records_plain_and_says_so(tmp_path):
    """A broken install (crewfile.asides.captain cannot be imported) still records the
    captain's input, as a plain `captain` record that can never conclude, and
    says so on the hook's stderr line."""
    crew = Crew(str(tmp_path / "crew"))
    crew.ensure()
    register(crew, "a1", kind="aside")
    code = ("import sys; sys.path.insert(0, 'lib'); sys.modules['crewfile.asides.captain'] = None; "
            "from crewfile.hooks import hook; "
            "r = hook.handle('{\"hook_event_name\": \"UserPromptSubmit\", \"prompt\": "
            "\"/aside-done\", \"prompt_id\": \"p-1\"}', "
            "{'CREWFILE_DIR': sys.argv[1], 'CREWFILE_SESSION': 'a1'}); print(r.code, r.err)")
    out = subprocess.run([sys.executable, "-c", code, crew.root], capture_output=True,
                         text=True, cwd=__file__.rsplit("/tests/", 1)[0])
    assert out.stdout.startswith("0 a1: captain input recorded plain: "), (out.stdout, out.stderr)
    got = [(r.kind, r.text) for r in Session(crew, "a1").last_records(20, TailStats())]
    assert ("captain", "/aside-done") in got and got[-1] == ("turn-started", "")
    assert "captain-done" not in [k for k, _ in got]
