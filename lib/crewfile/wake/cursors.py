"""The crew-watch cursor (docs/files/cursor.md): each session's position,
written by crew-watch --cursor, or by the last stage of a pipeline
(wake-send, crew-notify) acknowledging what it has safely done."""
from crewfile.core import jsonio
from crewfile.core.atomic import read_json, replace
from crewfile.core.errors import BadInput


def acked(path):
    """The positions {session: state} in the cursor at *path* ({} when absent)."""
    try:
        return dict((read_json(path) or {"sessions": {}})["sessions"])
    except (ValueError, KeyError, TypeError):
        raise BadInput(f"cursor {path} is not a crew-watch cursor") from None


def write(path, states):
    """Replace the cursor at *path* by *states* {session: state}."""
    replace(path, jsonio.dumps({"version": 1, "sessions": states}) + "\n")


def keep_newer(states, sname, state):
    """Keep *state* for *sname* in *states* unless a newer one is there (n orders them)."""
    old = states.get(sname)
    if old is None or int(state.get("n") or 0) >= int(old.get("n") or 0):
        states[sname] = state
