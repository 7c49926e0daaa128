"""Processes as /proc shows them, the one reader of /proc/PID/stat. A process is
(pid, start time in clock ticks since boot), so a recycled pid is never taken
for the one it replaced."""
import os
import time


class Stat:
    """The fields of /proc/PID/stat that crewfile uses."""
    __slots__ = ("pid", "comm", "state", "ppid", "pgrp", "tpgid", "start")

    def __init__(self, pid, comm, state, ppid, pgrp, tpgid, start):
        self.pid, self.comm, self.state, self.ppid, self.pgrp = pid, comm, state, ppid, pgrp
        self.tpgid, self.start = tpgid, start

    @property
    def stopped(self):
        """Stopped by a signal (Ctrl-Z, SIGSTOP) or by a tracer."""
        return self.state in ("T", "t")

    @property
    def gone(self):
        return self.state in ("Z", "X", "x")


def stat(pid):
    """The process's Stat, or None if there is none (or it is unreadable). One
    os.read, not open(): 14 us against 24, and crew-status reads two per session."""
    try:
        fd = os.open(f"/proc/{int(pid)}/stat", os.O_RDONLY | os.O_CLOEXEC)
    except (OSError, ValueError, OverflowError):
        return None
    try:
        data = os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)
    # The command name (field 2) may hold spaces and ')': split after the last ')'.
    close = data.rfind(b")")
    fields = data[close + 2:].split()
    try:
        return Stat(int(pid), data[data.find(b"(") + 1:close].decode("utf-8", "replace"),
                    fields[0].decode("ascii", "replace"), int(fields[1]),
                    int(fields[2]), int(fields[5]), int(fields[19]))
    except (IndexError, ValueError):
        return None


def started_at(start):
    """Seconds since the epoch of a start time in clock ticks since boot, from
    the clocks now: /proc/stat's btime is whole seconds, and a time from it
    was up to 1 s early (seen: 0.6 s), older than the process's first records."""
    boot = time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)
    return boot + start / os.sysconf("SC_CLK_TCK")


def process_start(pid):
    """The process's start time in clock ticks since boot, or None if gone."""
    st = stat(pid)
    return st.start if st is not None else None


def alive(pid, start):
    """The process *pid* exists, is not a zombie, and started at *start*."""
    st = stat(pid)
    return st is not None and not st.gone and st.start == start


def lineage(pid=None, limit=64):
    """Stats of *pid* (default: this process) and its ancestors below pid 1,
    nearest first; [] if *pid* is gone."""
    st = stat(os.getpid() if pid is None else pid)
    out = [] if st is None else [st]
    while st is not None and st.ppid > 1 and len(out) <= limit:
        st = stat(st.ppid)
        if st is not None:
            out.append(st)
    return out


def ancestors(pid, limit=64):
    """Stats of *pid*'s parent, grandparent, ... up to (not including) pid 1."""
    return lineage(pid, limit)[1:]


def descends_from(pid, ancestor):
    """*pid* is *ancestor* or one of its descendants (by the parent chain now)."""
    return int(pid) == int(ancestor) or any(a.pid == int(ancestor) for a in ancestors(pid))


def agent_of(pid, pane_pid=None):
    """The agent among *pid*'s ancestors, (pid, start) or None: the nearest that
    leads the terminal's foreground job (the hook sits in it), else the pane's
    process or its child."""
    chain = ancestors(pid)
    for st in chain:
        if st.pid == st.pgrp == st.tpgid:
            return st.pid, st.start
    if pane_pid:
        for st in chain:
            if st.ppid == int(pane_pid) or st.pid == int(pane_pid):
                return st.pid, st.start
    return None
