"""JSON for the hot path through the C accelerator `_json`, with json.loads' and
json.dumps' results: `import json` costs 6 to 12 ms (re, enum, functools).
Any failure of the fast scan goes to json.loads: `_json` reports a syntax error
through json.decoder, which it does not import (a truncated file once surfaced
as SystemError, not ValueError)."""
from _json import encode_basestring_ascii as _quote
from _json import make_scanner as _make_scanner

_WS = " \t\n\r"
_CONSTANTS = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}
_WORDS = {None: "null", True: "true", False: "false"}


class _Context:
    """The attributes _json's scanner reads from a json.JSONDecoder."""
    strict = True
    object_hook = object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = _CONSTANTS.__getitem__
    memo = {}


_scan = _make_scanner(_Context())


def loads(data):
    """Parse one JSON document (str, or UTF-8 bytes with an optional BOM) as
    json.loads does; ValueError, and nothing else, if it is not one."""
    if isinstance(data, (bytes, bytearray)):
        data = bytes(data).decode("utf-8")       # UnicodeDecodeError is a ValueError
        if data.startswith("\ufeff"):
            data = data[1:]
    if not isinstance(data, str):
        raise ValueError(f"not JSON text: {type(data).__name__}")
    try:
        value, end = _scan(data, len(data) - len(data.lstrip(_WS)))
    except Exception:            # StopIteration, SystemError, ValueError, RecursionError
        return _slow(data)
    return _slow(data) if data[end:].strip(_WS) else value


def _slow(text):
    """json.loads' verdict on *text*, which the fast scan did not accept."""
    import json  # every budget: json loads re and enum
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def dumps(obj):
    """*obj* as JSON text, as json.dumps(obj) writes it."""
    if isinstance(obj, str):
        return _quote(obj)
    if obj is None or obj is True or obj is False:
        return _WORDS[obj]
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
