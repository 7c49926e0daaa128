"""What one look at a tmux server found: its state, identity and panes.

Apart from tmux.py, which runs tmux: crew-status in a status line reads its
--panes list here without loading what asks tmux (start-up time).
"""


class Seen:
    """One look at one tmux server (tmux.Server asks it; listed() reads a
    status line's list). state: UP, GONE (nothing answers on the socket) or
    UNKNOWN; panes: {pane id: Pane}; identity: 'PID@START' of the server."""
    UP, GONE, UNKNOWN = "up", "gone", "unknown"

    @property
    def pid(self):
        """The server's pid, from its identity, or None when none was seen."""
        pid = (self.identity or "").partition("@")[0]
        return int(pid) if _number(pid) else None

    @classmethod
    def listed(cls, text):
        """The Seen that *text*, LISTED_FORMAT as tmux expanded it, shows;
        None unless *text* is exactly of that form ('%07' is not pane %7)."""
        words = text.split(" ")
        if words and words[-1] == "":
            words.pop()                 # each pane is followed by one space
        if len(words) < 2:
            return None
        socket, identity = words[0], words[1]
        if not socket.startswith("/") or not socket.isprintable():
            return None
        pid, at, start = identity.partition("@")
        if not (at and _number(pid) and _number(start)):
            return None
        panes = {}
        for word in words[2:]:
            parts = word.split("=")
            if (len(parts) != 3 or parts[0][:1] != "%" or not _number(parts[0][1:])
                    or not _number(parts[1]) or parts[2] not in ("0", "1")):
                return None
            pane = Pane(parts[0], parts[2] == "1", int(parts[1]), identity)
            seen = panes.setdefault(pane.id, pane)
            if (seen.dead, seen.pid) != (pane.dead, pane.pid):
                return None
        server = cls.__new__(cls)
        server.socket, server.state, server.identity = socket, cls.UP, identity
        server.panes, server.error = panes, ""
        return server


def _number(text):
    """A whole number as tmux prints one: ASCII digits, no leading zero."""
    return text.isascii() and text.isdigit() and (text == "0" or text[0] != "0")


# crew-status --panes: what tmux expands in status-right's #().
LISTED_FORMAT = ("#{socket_path} #{pid}@#{start_time}"
                 " #{S:#{W:#{P:#{pane_id}=#{pane_pid}=#{pane_dead} }}}")

PANE_FORMAT = "#{pane_id}\t#{pane_dead}\t#{pane_pid}\t#{pid}@#{start_time}"


class Pane:
    """One pane as tmux lists it; server: its server's identity, 'PID@START'."""
    __slots__ = ("id", "dead", "pid", "server")

    def __init__(self, id, dead, pid, server):
        self.id, self.dead, self.pid, self.server = id, dead, pid, server

    @classmethod
    def parse(cls, line):
        parts = line.split("\t")
        if len(parts) != 4 or not parts[0].startswith("%"):
            return None
        return cls(parts[0], parts[1] == "1", int(parts[2]) if parts[2].isdigit() else None, parts[3])
