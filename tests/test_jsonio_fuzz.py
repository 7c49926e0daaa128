"""Finding 1 of issue 12: jsonio.loads raises nothing but ValueError, on any
input, and otherwise gives json.loads' value. The fast path (json's C scanner
driven without json.decoder loaded) must hand every malformed case to the
slow path; these tests compare both on arbitrary and near-JSON input."""
import contextlib
import json
import math
import subprocess
import sys

from hypothesis import given, settings, strategies as st

from crewfile.core import jsonio

ROOT = __file__.rsplit("/tests/", 1)[0]

values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=20)

# Characters that steer the scanner: structure, escapes, numbers, constants.
JSONISH = st.text(alphabet=st.sampled_from(list('{}[]":,\\ \t\n\r0123456789.eE+-truefalsnulNIfiy\x00\x01\x7f\ud800é€😀u')),
                  max_size=40)


def _same(a, b):
    """Equal values, NaN equal to NaN and -0.0 distinct from 0.0 (as json gives them)."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return a == b


def _reference(data):
    """json.loads' verdict, with bytes read as the protocol's UTF-8 (BOM allowed)."""
    try:
        if isinstance(data, bytes):
            data = data.decode("utf-8-sig")
        return True, json.loads(data)
    except (ValueError, RecursionError):
        return False, None


@contextlib.contextmanager
def _as_in_a_command():
    """jsonio.loads as a command runs it: json.decoder not in sys.modules
    (where _json looks up the exception it raises). Only the slow path, which
    imports json anyway, sees it."""
    decoder = sys.modules.pop("json.decoder")
    real_slow = jsonio._slow

    def slow(text):
        sys.modules["json.decoder"] = decoder
        try:
            return real_slow(text)
        finally:
            del sys.modules["json.decoder"]
    jsonio._slow = slow
    try:
        yield
    finally:
        sys.modules["json.decoder"] = decoder
        jsonio._slow = real_slow


def _check(data):
    ok, want = _reference(data)
    try:
        with _as_in_a_command():
            got = jsonio.loads(data)
    except ValueError:
        assert not ok, f"refused what json accepts: {data!r}"
        return
    assert ok, f"accepted what json refuses: {data!r} -> {got!r}"
    assert _same(got, want), (data, got, want)


@settings(max_examples=3000)
@given(st.text())
def test_fuzz_arbitrary_text(text):
    _check(text)


@settings(max_examples=3000)
@given(JSONISH)
def test_fuzz_jsonish_text(text):
    _check(text)


@settings(max_examples=3000)
@given(st.binary())
def test_fuzz_arbitrary_bytes(data):
    _check(data)


@settings(max_examples=3000)
@given(values, st.data())
def test_fuzz_damaged_documents(value, data):
    """Valid documents cut short, spliced into, or with a byte replaced."""
    text = json.dumps(value, indent=data.draw(st.sampled_from([None, 1])))
    _check(text)
    cut = data.draw(st.integers(0, len(text)))
    _check(text[:cut])
    junk = data.draw(JSONISH)
    _check(text[:cut] + junk + text[cut:])
    raw = text.encode()
    if raw:
        at = data.draw(st.integers(0, len(raw) - 1))
        _check(raw[:at] + bytes([data.draw(st.integers(0, 255))]) + raw[at + 1:])


def test_finding_01_syntax_errors_are_value_errors_without_json_loaded():
    """In a fresh interpreter (json.decoder never imported) a truncated
    document is a ValueError, not the SystemError _json raised before."""
    code = ("import sys; sys.path.insert(0, 'lib'); import crewfile.core.jsonio as j\n"
            "for t in ['{\"name\": \"a', '\"\\x01\"', '\"\\\\q\"', '[1,', '{\"a\" 1}', b'\\xff']:\n"
            "    try: j.loads(t)\n"
            "    except ValueError: pass\n"
            "print('ok')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert (r.returncode, r.stdout.strip(), r.stderr) == (0, "ok", "")
