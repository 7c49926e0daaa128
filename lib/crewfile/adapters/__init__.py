"""One module per agent CLI: how its hook events map onto crew-hook's shared
actions (hook.py) and how its replies are spelled. Adding an agent is one
new module here with the same names (see claude.py); crew-hook imports only
the one it is run for (`--agent NAME`), so start-up stays small."""


def load(name):
    """The adapter module for agent *name* (BadInput if there is none)."""
    from ..errors import BadInput
    if not isinstance(name, str) or not name.isidentifier() or not name.islower():
        raise BadInput(f"bad agent {name!r}")
    try:
        return __import__(f"{__package__}.{name}", fromlist=["EVENTS"])
    except ModuleNotFoundError:
        raise BadInput(f"unknown agent {name!r}: no crewfile.adapters.{name}") from None
