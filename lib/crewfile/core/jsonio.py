"""JSON for the hot path, without the json package's start-up cost.

`import json` imports re, enum, functools and collections (6 to 12 ms
against 13 ms for `python -c pass`); its C accelerator `_json` does the
work without them, giving json.loads' and json.dumps' (default) results.

Any failure of the fast scan hands the text to json.loads itself: `_json`
reports a syntax error through json.decoder, which it does not import, so
with it unloaded a truncated file surfaced as SystemError, not ValueError
(tests/test_jsonio_fuzz.py compares both on arbitrary input).
"""
try:
    from _json import encode_basestring_ascii as _quote
    from _json import make_scanner as _make_scanner
except ImportError:          # pragma: no cover - other Python implementations
    _make_scanner = None

_WS = " \t\n\r"
_CONSTANTS = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}
_scan = None


class _Context:
    """The attributes _json's scanner reads from a json.JSONDecoder."""

    def __init__(self):
        self.strict = True
        self.object_hook = None
        self.object_pairs_hook = None
        self.parse_float = float
        self.parse_int = int
        self.parse_constant = _CONSTANTS.__getitem__
        self.memo = {}


def loads(data):
    """Parse one JSON document (str, or UTF-8 bytes with an optional BOM) as
    json.loads does; ValueError, and nothing else, if it is not one."""
    global _scan
    if isinstance(data, (bytes, bytearray)):
        data = bytes(data).decode("utf-8")       # UnicodeDecodeError is a ValueError
        if data.startswith("\ufeff"):
            data = data[1:]
    if not isinstance(data, str):
        raise ValueError(f"not JSON text: {type(data).__name__}")
    if _make_scanner is None:
        return _slow(data)
    if _scan is None:
        _scan = _make_scanner(_Context())
    n = len(data)
    i = 0
    while i < n and data[i] in _WS:
        i += 1
    try:
        value, end = _scan(data, i)
    except Exception:            # StopIteration, SystemError, ValueError, RecursionError
        return _slow(data)
    while end < n and data[end] in _WS:
        end += 1
    if end != n:
        return _slow(data)
    return value


def _slow(text):
    """json.loads' verdict on *text*, which the fast scan did not accept."""
    import json
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def dumps(obj):
    """*obj* as JSON text, as json.dumps(obj) writes it."""
    if _make_scanner is None:
        import json
        return json.dumps(obj)
    if isinstance(obj, str):
        return _quote(obj)
    if obj is None:
        return "null"
    if obj is True:
        return "true"
    if obj is False:
        return "false"
    if isinstance(obj, int):
        return int.__repr__(obj)
    if isinstance(obj, float):
        if obj != obj:
            return "NaN"
        if obj in (float("inf"), float("-inf")):
            return "Infinity" if obj > 0 else "-Infinity"
        return float.__repr__(obj)
    if isinstance(obj, dict):
        return "{" + ", ".join(f"{_quote(_key(k))}: {dumps(v)}" for k, v in obj.items()) + "}"
    if isinstance(obj, (list, tuple)):
        return "[" + ", ".join(dumps(v) for v in obj) + "]"
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")


def _key(k):
    if isinstance(k, str):
        return k
    if k is None or isinstance(k, (int, float)):       # (bool is an int)
        return dumps(k)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(k).__name__}")
