"""Validation of names that become path components (sessions, handles): they
must never climb out of the crew directory or confuse a terminal."""

from crewfile.core.errors import BadInput

MAX_NAME = 64
_FIRST = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_@+")
_REST = _FIRST | frozenset(".-")


def is_name(name):
    """check_name's verdict as a bool."""
    try:
        check_name(name)
    except BadInput:
        return False
    return True


def check_name(name, what="name"):
    """Return *name* if it is a safe path component, else raise BadInput."""
    if not isinstance(name, str) or not name:
        raise BadInput(f"empty {what}")
    if len(name) <= MAX_NAME and _REST.issuperset(name) and name[0] in _FIRST and ".." not in name:
        return name             # the common case in one set test (listings check thousands)
    if len(name) > MAX_NAME:
        raise BadInput(f"{what} longer than {MAX_NAME} characters")
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise BadInput(f"{what} contains a control character: '{name}'")
    if ".." in name or name[0] not in _FIRST or not all(c in _REST for c in name):
        raise BadInput(f"bad {what} '{name}': use letters, digits and . _ @ + -"
                       f" (not first: . -), no '/' or '..'")
    return name


# The agent CLIs crewfile has an adapter for (crewfile.agents: one module each).
AGENTS = ("claude", "codex", "gemini")


def check_host(text):
    """A host name for --host / --remote (None stays None): one ssh can be given."""
    if text is None:
        return None
    if not text or len(text) > 253 or any(c.isspace() or c in ":/\\" for c in text):
        raise BadInput(f"bad --host '{text}': a host name without spaces, ':' or '/'")
    return text
