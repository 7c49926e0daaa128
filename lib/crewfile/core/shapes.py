"""The shape of every JSON file crewfile reads (protocol.md's "Damaged files" is
SHAPES): `{"every": "x"}` parses, but would surface later as a TypeError far
from the file; load() makes it one BadFile, "<path>: <why>", when it is read.
"""
from crewfile.core.errors import BadFile
from crewfile.core.jsonio import loads
from crewfile.core.paths import read_text
from crewfile.core.records import is_timestamp
from crewfile.core.names import AGENTS

MAX_INT = 2 ** 53          # any count, size, offset or pid: what a JSON number holds exactly


def _check(doc, test):
    """*test* (value -> bool) with the words a BadFile says it wants."""
    test.doc = doc
    return test


def _int(lo, hi=MAX_INT):
    return _check(f"a whole number from {lo} to {hi}",
                  lambda v: type(v) is int and lo <= v <= hi)


def _one_of(*values):
    return _check("one of " + ", ".join(values), lambda v: isinstance(v, str) and v in values)


_str = _check("a string", lambda v: isinstance(v, str))
_bool = _check("true or false", lambda v: v is True or v is False)
_num = _check("a finite number", lambda v: type(v) in (int, float) and v == v and abs(v) <= 1e15)
_ts = _check("a record timestamp (YYYY-MM-DDTHH:MM:SS.mmmZ)",
             lambda v: isinstance(v, str) and is_timestamp(v))
_sessions = _check("an object of session name to position", lambda v: isinstance(v, dict))
_list_of_str = _check("a non-empty array of strings", lambda v: isinstance(v, list) and len(v) > 0
                      and all(isinstance(x, str) for x in v))
_prompt = _check("a string or a non-empty array of strings", lambda v: _str(v) or _list_of_str(v))
_clock = _check('an object {"wall": seconds, "mono": seconds, "boot": id}',
                lambda v: isinstance(v, dict) and _num(v.get("wall"))
                and (v.get("mono") is None or _num(v["mono"]))
                and (v.get("boot") is None or _str(v["boot"])))

REQ, OPT = True, False       # OPT: may be absent or null

# What job-ls prints of an ended job, copied into `heard` and `notice` (jobs.row_fields).
_JOB_ROW = {"label": (OPT, _str), "session": (OPT, _str), "created": (OPT, _ts),
            "code": (OPT, _int(0, 255)), "signal": (OPT, _int(1, 255)), "ended": (OPT, _ts)}

# kind -> {field: (required, check)}
SHAPES = {
    "meta": {
        "name": (REQ, _str), "kind": (OPT, _one_of("crew", "aside", "primary")),
        "exempt": (OPT, _bool), "created": (OPT, _ts), "user": (OPT, _str),
        "cwd": (OPT, _str), "tmux": (OPT, _str), "tmux_target": (OPT, _str),
        "tmux_socket": (OPT, _str), "tmux_server": (OPT, _str),
        "pid": (OPT, _int(1, 2 ** 31)), "pid_start": (OPT, _int(0)),
        "pid_started_at": (OPT, _ts), "session_key": (OPT, _str),
        "agent_session_id": (OPT, _str), "prompt": (OPT, _prompt),
        "agent": (OPT, _one_of(*AGENTS)), "agent_cmd": (OPT, _str),
        "tmux_session": (OPT, _str), "branch": (OPT, _str), "worktree": (OPT, _str),
        "repo": (OPT, _str), "agent_registry": (OPT, _str), "agent_job": (OPT, _str),
    },
    "schedule": {
        "id": (REQ, _str), "user": (OPT, _str), "session": (OPT, _str),
        "session_key": (OPT, _str), "agent_session_id": (OPT, _str),
        "every": (REQ, _int(1, 10 ** 9)), "message": (REQ, _str),
        "max": (REQ, _int(1, 10 ** 9)), "attempts": (REQ, _int(0, 10 ** 9)),
        "armed": (REQ, _bool), "base": (REQ, _clock), "rev": (OPT, _str), "until": (OPT, _num),
        "created": (OPT, _ts), "last_attempt": (OPT, _ts), "last_outcome": (OPT, _str),
        "last_code": (OPT, _str), "last_reason": (OPT, _str), "last_change": (OPT, _ts),
        "own_problem": (OPT, _str),
    },
    "job-spec": {
        "argv": (REQ, _list_of_str), "label": (OPT, _str), "session": (OPT, _str),
        "cwd": (OPT, _str), "created": (REQ, _ts), "output_limit": (OPT, _int(1)),
        "exec_pid": (OPT, _int(1, 2 ** 31)), "exec_start": (OPT, _int(0)),
    },
    "job-pids": {
        "watcher": (OPT, _int(1, 2 ** 31)), "watcher_start": (OPT, _int(0)),
        "pid": (OPT, _int(1, 2 ** 31)), "pgid": (OPT, _int(1, 2 ** 31)), "started": (OPT, _ts),
    },
    "job-result": {
        "exit": (OPT, _int(0, 255)), "signal": (OPT, _int(1, 255)), "code": (REQ, _int(0, 255)),
        "started": (OPT, _ts), "ended": (OPT, _ts), "seconds": (OPT, _num),
    },
    "job-heard": {
        "by": (REQ, _one_of("wait", "notice")), "at": (OPT, _ts), "id": (OPT, _str),
        "withdrawn": (OPT, _str), **_JOB_ROW,
    },
    "job-notice": {
        "posted": (REQ, _bool), "reason": (OPT, _str), "at": (OPT, _ts), "id": (OPT, _str),
        "without_lock": (OPT, _list_of_str), **_JOB_ROW,
    },
    "cursor": {"version": (REQ, _int(1, 1)), "sessions": (REQ, _sessions)},
    "cursor-entry": {
        "ino": (OPT, _int(0, 2 ** 64)), "off": (OPT, _int(0)), "last": (OPT, _num),
        "last_kind": (OPT, _str), "turn": (OPT, _str),
        "ended": (OPT, _bool), "stale": (OPT, _bool), "lost": (OPT, _bool),
        "n": (OPT, _int(0)), "prev": (OPT, _str), "paused": (OPT, _bool),
    },
}


def check(kind, obj, path):
    """*obj* if it has *kind*'s shape; BadFile naming *path* and the first fault."""
    if not isinstance(obj, dict):
        raise BadFile(path, f"not a JSON object ({kind})")
    for field, (required, ok) in SHAPES[kind].items():
        value = obj.get(field)
        if value is None:
            if required:
                raise BadFile(path, f"field {field!r} missing ({kind})")
            continue
        if not ok(value):
            raise BadFile(path, f"field {field!r} must be {ok.doc} ({kind})")
    return obj


def load(path, kind, at=None, limit=None):
    """The file at *path* checked as *kind*, or None if absent; BadFile if it is
    not UTF-8 JSON of that shape or longer than *limit*; *at*: as for open_file."""
    text = read_text(path, at, limit)
    if text is None:
        return None
    try:
        obj = loads(text)
    except ValueError as e:
        raise BadFile(path, f"not JSON ({str(e).split(':', 1)[0]})") from None
    return check(kind, obj, path)
