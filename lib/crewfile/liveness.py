"""Is a session's agent still there? A real probe, never the last record.

In order: the session's tmux pane (alive and not dead), else its process
(pid checked against its start time, so a recycled pid is not mistaken for
it), else unknown. One Probe asks tmux once, however many sessions it checks.
"""
YES, NO, UNKNOWN = "yes", "no", "unknown"


def process_start(pid):
    """The process's start time in clock ticks since boot, or None if gone."""
    try:
        with open(f"/proc/{int(pid)}/stat", "rb") as f:
            data = f.read()
    except (OSError, ValueError):
        return None
    # The command name (field 2) may hold spaces and ')': split after the last ')'.
    fields = data[data.rfind(b")") + 2:].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


class Probe:
    """Liveness answers for many sessions from one look at tmux."""

    def __init__(self):
        self._panes = False     # not asked yet (None means tmux is missing)

    def panes(self):
        if self._panes is False:
            from . import tmux
            self._panes = tmux.panes()
        return self._panes

    def pane_of(self, meta):
        """The live pane id of the session's tmux target, or None."""
        target = meta.get("tmux")
        panes = self.panes() if target else None
        if not panes:
            return None
        if target in panes:
            return None if panes[target][0] else target
        for pane_id, (dead, _pid, where, _win) in panes.items():
            if where == target and not dead:
                return pane_id
        return None

    def live(self, meta):
        target = meta.get("tmux")
        if target:
            panes = self.panes()
            if panes is None:
                return UNKNOWN
            return YES if self.pane_of(meta) else NO
        pid = meta.get("pid")
        if pid:
            start = process_start(pid)
            if start is None:
                return NO
            want = meta.get("pid_start")
            return YES if want is None or want == start else NO
        return UNKNOWN

