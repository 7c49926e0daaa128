"""A person at a terminal, for the tests: a real tmux client attached
through a pseudo-terminal (AttachedClient; conftest re-exports it).
Standard library only.

As a command, for the shell tests (tests/bats):

    python3 tests/terminal.py SOCKET [TARGET]

attaches a client to the tmux server at SOCKET (to session or pane TARGET)
and types what it reads on standard input into it, as it comes, until the
end of its input; then it detaches.
"""
import fcntl
import os
import pty
import signal
import struct
import subprocess
import sys
import termios
import threading
import time


def wait_for(predicate, timeout=20, what="condition", every=0.01):
    """Poll *predicate* until true: for state that has no event to await.
    *every*: seconds between looks; a costly predicate (a scan of /proc)
    waits longer, so the wait does not take the CPU from what it waits for.
    *what* may be a callable, asked on a time-out for what was seen."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for"
                                 f" {what() if callable(what) else what}")
        time.sleep(every)


class Tmux:
    """tmux on the server at *sock*, as conftest.TmuxServer calls it."""

    def __init__(self, sock):
        self.sock = sock

    def __call__(self, *args, check=True):
        proc = subprocess.run(["tmux", "-S", self.sock, "-f", "/dev/null", *args],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if check and proc.returncode != 0:
            raise AssertionError(f"tmux {args}: {proc.stderr}")
        return proc.stdout


class AttachedClient:
    """A person at a terminal: a real tmux client attached through a
    pseudo-terminal. press() writes bytes as keys typed into it (tmux sees
    them as client input: key bindings run, client_activity moves, where
    send-keys and run-shell leave it as it was); type_after() does so in a
    whole second after a given moment, as a person's hands would.

    The server's paste detection is turned off (assume-paste-time 0): tmux
    takes a key that comes within 1 ms of the session's last activity for
    part of a paste and types it into the pane instead of running its
    binding. A press() of C-b D arrives in one read, and right after the
    attach (itself session activity), so C-b D was typed as "D" into the
    pane in 27 of 100 trials on a quiet machine; a captain's hands are
    never that fast. Keys are read from the moment list-clients shows the
    client: tmux puts the terminal in raw mode (tty_start_tty) before it
    gives the client its session.

    The newest client opened on a server is the one captain_types and
    captain_runs use (AttachedClient.on); close() reaps it."""

    _open = {}                          # socket path: the newest client open on it

    def __init__(self, tmux, target=None, size=(200, 50)):
        tmux("set-option", "-g", "assume-paste-time", "0")
        self.pid, self.fd = pty.fork()
        if self.pid == 0:               # the child: the tmux client
            env = dict(os.environ, TERM="xterm-256color")
            env.pop("TMUX", None)
            where = ["-t", target] if target else []
            os.execvpe("tmux", ["tmux", "-S", tmux.sock, "attach-session", *where], env)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", size[1], size[0], 0, 0))
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()
        self.tmux = tmux
        self.tty = wait_for(self._my_tty, what="the client to attach")
        self._before = AttachedClient._open.get(os.path.realpath(tmux.sock))
        AttachedClient._open[os.path.realpath(tmux.sock)] = self

    @classmethod
    def on(cls, socket):
        """The newest client open on the server at *socket*, or None."""
        return cls._open.get(os.path.realpath(socket)) if socket else None

    def _my_tty(self):
        for line in self.tmux("list-clients", "-F", "#{client_pid} #{client_tty}",
                              check=False).splitlines():
            pid, _, tty = line.partition(" ")
            if pid == str(self.pid):
                return tty
        return None

    def activity(self):
        """This client's client_activity (epoch seconds), or 0 if it is gone."""
        for line in self.tmux("list-clients", "-F", "#{client_tty} #{client_activity}",
                              check=False).splitlines():
            tty, _, when = line.partition(" ")
            if tty == self.tty:
                return int(when)
        return 0

    def look_at(self, pane):
        """Turn this client to *pane* (its window, then the pane): where its keys go."""
        self.tmux("switch-client", "-c", self.tty, "-t", pane)
        self.tmux("select-pane", "-t", pane)

    def _drain(self):
        while True:                     # the client's screen output, discarded
            try:
                if not os.read(self.fd, 65536):
                    return
            except OSError:
                return

    def press(self, keys):
        os.write(self.fd, keys.encode() if isinstance(keys, str) else keys)

    def type_after(self, moment, keys):
        """Press *keys* in a whole second later than epoch time *moment* (the
        act's evidence counts keys only from the second after the captain's
        last input), and return once tmux shows key input of this second
        (these keys, or the attach or a key of the same second before them)."""
        wait_for(lambda: time.time() >= int(moment) + 1, timeout=5, what="the next second")
        at = int(time.time())
        self.press(keys)
        wait_for(lambda: self.activity() >= at, what="the keys to reach tmux")

    def close(self):
        """Detach: end the client and reap it (once; again is a no-op)."""
        if self.fd is None:
            return
        sock = os.path.realpath(self.tmux.sock)
        if AttachedClient._open.get(sock) is self:
            if self._before is not None:
                AttachedClient._open[sock] = self._before
            else:
                del AttachedClient._open[sock]
        try:
            os.kill(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        os.waitpid(self.pid, 0)
        # The reader ends on the pty's EOF/EIO now that the client is gone.
        # Only then close the fd: closed under a blocked read, its number is
        # reused by the next pipe, and the reader would steal that pipe's bytes.
        self._reader.join(10)
        if self._reader.is_alive():
            raise AssertionError("the client's pty reader did not end")
        os.close(self.fd)
        self.fd = None


def main(argv):
    client = AttachedClient(Tmux(argv[1]), argv[2] if len(argv) > 2 else None)
    try:
        while True:
            keys = os.read(0, 4096)
            if not keys:
                return 0
            client.press(keys)
    finally:
        client.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
