"""crew-up: the crew's supervision as one unit, for one crew and one primary
(docs/commands/crew-up.md; its files: docs/files/crew-up.md). A stage is a
pipe of crewfile commands; if one ends, the rest are stopped and the stage
starts again whole (a pipe cannot be mended in the middle).
"""
import ctypes
import os
import select
import shlex
import signal
import subprocess
import sys
import time

from crewfile.background.jobs import signal_name
from crewfile.core import jsonio, logfile, logwrite, paths, records
from crewfile.core.atomic import read_json, read_text, replace
from crewfile.core.errors import CrewfileError, Refused, SystemFailure, reason
from crewfile.core.liveness import stat
from crewfile.core.locks import acquire, holder, holders, is_held
from crewfile.core.names import check_name
from crewfile.core.pinned import command_line
from crewfile.core.text import escape
from crewfile.wake.watch import first_position

DIR = "crew-up"
LOCK, STATE, LOG, CURSOR, NOTIFY_CURSOR = "lock", "state", "log", "cursor", "notify-cursor"
BACKOFF_FIRST = 0.25
BACKOFF_MAX = 30.0
RESET_AFTER = 10.0
STOP_GRACE = 5.0
HANDOVER = 10.0
DEFAULT_SWEEP = 600.0
FAILING_AT_ONCE = 3         # ends in a row, each before RESET_AFTER: said on stderr
PR_SET_PDEATHSIG = 1
MAX_UNLOGGED = 1000         # log lines kept in memory while crew-up/log cannot be written


def files(crew):
    d = crew.sub(DIR)
    return {k: os.path.join(d, k) for k in (LOCK, STATE, LOG, CURSOR, NOTIFY_CURSOR)}


def bin_path(name):
    """The command *name* beside the running command's executable, links resolved
    (installed, this module lies in site-packages, nowhere near the commands)."""
    return os.path.join(os.path.dirname(os.path.realpath(sys.argv[0])), name)


def _die_with_parent(parent):
    """A preexec_fn: PR_SET_PDEATHSIG (docs/commands/crew-up.md, Notes). Compared
    with *parent* (its pid taken before the fork), not 1: an orphan goes to a
    subreaper or init."""
    def preexec():
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:      # the parent died before prctl: follow it now
            os._exit(0)
    return preexec


class Proc:
    """One running child: its name, Popen, stage, and its stderr's unfinished line."""

    def __init__(self, name, popen, stage):
        self.name, self.popen, self.stage, self.carry = name, popen, stage, b""


class Backoff:
    """When what failed may be tried again (`at`, monotonic), doubling up to
    *most*; for one of crew-up's own files, why writing it fails (`failing`)."""

    def __init__(self, most):
        self.most, self.at, self.wait, self.failing = most, 0.0, BACKOFF_FIRST, None

    def due(self):
        return time.monotonic() >= self.at

    def later(self):
        """Put the next try off; return by how long."""
        delay = min(self.wait, self.most)
        self.at, self.wait = time.monotonic() + delay, min(self.wait * 2, self.most)
        return delay

    def reset(self):
        self.at, self.wait = 0.0, BACKOFF_FIRST


class Stage:
    """A restartable unit: the bookkeeping --status shows, and when it may (re)start."""

    def __init__(self, name, backoff_max):
        self.name, self.procs, self.since, self.restarts = name, [], None, 0
        self.last_error = self.last_said = None     # last_said: its last line on stderr
        self.retry = Backoff(backoff_max)
        self.quick_ends = 0         # ends in a row, each before RESET_AFTER


class Supervisor:
    def __init__(self, crew, primary, sweep=DEFAULT_SWEEP, backoff_max=BACKOFF_MAX,
                 remotes=None, notify=None, notify_options=()):
        check_name(primary)
        self.crew, self.primary, self.sweep = crew, primary, sweep
        self.notify = notify                    # crew-notify's CMD, or None: no notify stage
        self.notify_options = list(notify_options)
        self.files = files(crew)
        self.env = dict(os.environ, CREWFILE_DIR=os.path.abspath(crew.root))
        self.remotes = dict(remotes or {})      # host -> its crew directory there
        names = ["wake", "nudge", "sweep"] + (["notify"] if notify else []) + [
            f"{k}@{h}" for h in self.remotes for k in ("wake", "nudge")]
        self.stages = {n: Stage(n, backoff_max) for n in names}
        self.stop, self.started, self.lock = False, time.time(), None
        self.writing = {STATE: Backoff(backoff_max), LOG: Backoff(backoff_max)}
        self.unlogged = []          # log lines not written yet (the log is failing)
        self.dropped = 0            # and those dropped from memory meanwhile
        self.state_due = False      # the state changed since it was last written

    # -- records ------------------------------------------------------------
    def log(self, kind, text=""):
        """Append a record to crew-up/log; held in memory while it cannot be."""
        self.unlogged.append(records.new_line(kind, text))
        if len(self.unlogged) > MAX_UNLOGGED:
            del self.unlogged[0]
            self.dropped += 1
        self.retry_writes()

    def write_log(self):
        lines = self.unlogged
        if self.dropped:
            lines = [records.new_line("said", f"crew-up: {self.dropped} line(s) of this log lost"
                                              " while it could not be written")] + lines
        logwrite.append(self.files[LOG], self.files[LOG] + ".lock", lines,
                       rotate=logfile.rotate_limits())

    def save_state(self):
        """Write crew-up/state now, or as soon as it can be (see retry_writes)."""
        self.state_due = True
        self.retry_writes()

    def write_state(self):
        stages = {s.name: {"running": bool(s.procs), "pids": {p.name: p.popen.pid for p in s.procs},
                           "since": records.timestamp(s.since) if s.since else None,
                           "restarts": s.restarts, "last_error": s.last_error}
                  for s in self.stages.values()}
        replace(self.files[STATE], jsonio.dumps({
            "version": 1, "pid": os.getpid(), "primary": self.primary,
            "started": records.timestamp(self.started), "stages": stages}) + "\n")

    def retry_writes(self):
        """Make the writes that are due, each once its backoff (if it failed) is over."""
        if self.unlogged and self._write(LOG, self.write_log):
            self.unlogged, self.dropped = [], 0
        if self.state_due and self._write(STATE, self.write_state):
            self.state_due = False

    def _write(self, which, write):
        """Run *write* (one of crew-up's own files) unless its backoff runs; True
        if it worked. A failure is said once, not raised (supervision goes on)."""
        w = self.writing[which]
        if not w.due():
            return False
        try:
            write()
        except (CrewfileError, OSError) as e:
            why = reason(e)
            if w.failing is None:
                held = "; its lines are held until then" if which == LOG else ""
                self._tell(f"crew-up: {why}; the stages go on, retrying{held}")
            w.failing = why
            w.later()
            return False
        if w.failing is not None:
            self._tell(f"crew-up: {self.files[which]} is written again")
        w.failing = None
        w.reset()
        return True

    def _tell(self, text):
        """A line on crew-up's own stderr (the captain's terminal, or the journal)."""
        try:
            sys.stderr.write(escape(text) + "\n")
            sys.stderr.flush()
        except OSError:
            pass            # a stderr that cannot be written stops nothing either

    # -- life ---------------------------------------------------------------
    def acquire(self):
        """Take the crew's crew-up lock, or Refused if another crew-up holds it (or
        a SIGKILLed one's child, not yet exec'd, past HANDOVER: crew-up.md, Output)."""
        paths.ensure_dir(self.crew.sub(DIR))
        self.lock = acquire(self.files[LOCK], timeout=0)
        if self.lock is None:
            pid = read_state(self.crew).get("pid")
            st = stat(pid) if isinstance(pid, int) and pid > 0 else None
            if st is None or st.gone:
                who = f"crew-up pid {pid} is gone" if pid else "crew-up/state names none"
                self._tell(f"crew-up: the lock is busy but {who}: waiting up to"
                           f" {HANDOVER:g}s for a child it was starting to let go")
                self.lock = acquire(self.files[LOCK], timeout=HANDOVER)
        if self.lock is None:
            pid = read_state(self.crew).get("pid", "?")
            raise Refused(f"crew-up already runs for {self.crew.root} (pid {pid})")
        self.save_state()           # at once: a second crew-up sees a live pid

    def run(self):
        """Supervise until SIGTERM/SIGINT; then stop every stage."""
        def on_signal(_sig, _frame):
            self.stop = True
        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        self.acquire()
        try:
            try:
                first_position(self.crew, self.files[CURSOR])   # from now on, nothing is missed
                if self.notify:
                    first_position(self.crew, self.files[NOTIFY_CURSOR])
            except (CrewfileError, OSError) as e:     # a full disk: crew-watch takes it
                self._tell(f"crew-up: {reason(e)}; the wake pipe takes its first position"
                           " when it can write it")
            for host, rdir in self.remotes.items():
                self.remote_first_position(host, rdir)
            self.log("up", f"pid {os.getpid()} primary {self.primary}")
            self.save_state()
            while not self.stop:
                self.step()
        finally:
            self.shutdown()

    def step(self, wait=0.2):
        for stage in self.stages.values():
            if not stage.procs and stage.retry.due() and not self.stop:
                self.start(stage)
        fds = {p.popen.stderr.fileno(): p for s in self.stages.values() for p in s.procs}
        ready, _, _ = select.select(list(fds), [], [], wait)
        for fd in ready:
            self.read_stderr(fds[fd])
        ended = [s for s in self.stages.values()
                 if s.procs and any(p.popen.poll() is not None for p in s.procs)]
        for stage in ended:
            self.ended(stage)
        if ended:
            self.save_state()
        self.retry_writes()

    def commands(self, stage):
        """[(name, argv, first line for its stdin or None)] of a stage's processes."""

        def local(name, *args):
            return (name, [sys.executable, bin_path(name), *args], None)
        if stage.name == "nudge":
            return [local("nudge-tick", "--watch", "--quiet")]
        if stage.name == "sweep":
            return [local("job-sweep")]
        if stage.name == "notify":
            cursor = self.files[NOTIFY_CURSOR]
            return [local("crew-watch", "--resume", cursor),
                    local("crew-notify", "--cursor", cursor, "--exec", self.notify,
                          *self.notify_options)]
        if stage.name == "wake":
            return [local("crew-watch", "--resume", self.files[CURSOR]), local("wake-filter"),
                    local("wake-send", self.primary, "--cursor", self.files[CURSOR])]
        kind, _, host = stage.name.partition("@")
        remote_dir = self.remotes[host]
        if kind == "nudge":         # that crew's own nudge-tick, there
            return [("ssh", ssh_argv(host, remote_nudge(remote_dir)), "")]
        cursor = remote_cursor(self.crew, host)
        doc = (read_text(cursor) or "").strip()
        return [("ssh", ssh_argv(host, remote_pipe(remote_dir)), doc + "\n"),
                local("wake-send", self.primary, "--cursor", cursor, "--host", host)]

    def start(self, stage):
        stdin = subprocess.DEVNULL
        try:
            cmds = self.commands(stage)
            for i, (name, argv, first) in enumerate(cmds):
                last = i == len(cmds) - 1
                p = subprocess.Popen(argv, stdin=subprocess.PIPE if first is not None else stdin,
                                     stdout=subprocess.DEVNULL if last else subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=self.env,
                                     preexec_fn=_die_with_parent(os.getpid()),
                                     close_fds=True)
                stage.procs.append(Proc(name, p, stage))   # at once: stopped if what follows fails
                if first is not None:       # kept open: its end is the remote's end
                    p.stdin.write(first.encode())
                    p.stdin.flush()
                if stdin is not subprocess.DEVNULL:
                    stdin.close()           # the next stage holds it now
                stdin = p.stdout
        except (OSError, subprocess.SubprocessError) as e:
            # Started in part (EMFILE, EAGAIN, ENOMEM for a later process; a
            # child whose preexec_fn failed: SubprocessError): what did start
            # is stopped and reaped, its pipes closed, so the stage is one
            # that did not start: counted here, retried the same way.
            self.kill(stage)
            stage.last_error = f"cannot start {stage.name}: {getattr(e, 'strerror', None) or e}"
            self.log("stage-failed", f"{stage.name}: {stage.last_error}")
            stage.retry.later()
            stage.quick_ends += 1
            self.tell_failing(stage, [stage.last_error])
        else:
            stage.since = time.time()
            self.log("stage-started", f"{stage.name}: " + ", ".join(
                f"{p.name} pid {p.popen.pid}" for p in stage.procs))
        self.save_state()

    def remote_first_position(self, host, rdir):
        """first_position() for a remote crew, from its crew-watch's acknowledgements
        (unreachable: the pipe does it when it first connects)."""
        cursor = remote_cursor(self.crew, host)
        if os.path.lexists(cursor):
            return
        try:
            out = subprocess.run(ssh_argv(host, remote_pipe(rdir, once=True)), input=b"\n",
                                 capture_output=True, env=self.env, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as e:
            self.log("said", f"ssh {host}: first position not taken: {e}")
            return
        if out.returncode != 0:
            self.log("said", f"ssh {host}: first position not taken: exit {out.returncode}: "
                             + out.stderr.decode("utf-8", "replace").strip()[-300:])
            return
        acks = [jsonio.loads(line[1:].decode()) for line in out.stdout.split(b"\n")
                if line.startswith(b"\t")]
        state = {tok["s"]: tok["at"] for tok in acks}
        try:
            replace(cursor, jsonio.dumps({"version": 1, "sessions": state}) + "\n")
        except CrewfileError as e:      # a full disk: the pipe takes it when it first connects
            self.log("said", f"ssh {host}: first position not kept: {e}")

    def read_stderr(self, proc):
        """Log the whole lines *proc* wrote on stderr (at its end, the rest
        too); False at its end."""
        data = os.read(proc.popen.stderr.fileno(), 65536)
        lines = (proc.carry + data).split(b"\n")
        proc.carry = lines.pop() if data else b""
        if len(proc.carry) > 4096:
            lines.append(proc.carry)
            proc.carry = b""
        for line in lines:
            if line:
                self._said(proc, line)
        return bool(data)

    def _said(self, proc, line):
        text = line.decode("utf-8", "replace")[:2000].removeprefix(proc.name + ": ")
        self.log("said", f"{proc.name}: {text}")
        proc.stage.last_error, proc.stage.last_said = text, f"{proc.name}: {text}"

    def ended(self, stage):
        """One process of the stage ended: stop the rest, log, schedule a restart."""
        procs = stage.procs
        first = [p for p in procs if p.popen.poll() is not None]
        forced = self.kill(stage)
        # and each that died of a signal crew-up did not send (docs/internals.md#crew-up)
        what = [f"{p.name} pid {p.popen.pid} {describe(p.popen.returncode)}" for p in procs
                if p in first or (p not in forced and p.popen.returncode is not None
                                  and p.popen.returncode < 0 and p.popen.returncode != -signal.SIGTERM)]
        ran = time.time() - (stage.since or time.time())
        done = all(p.popen.returncode == 0 for p in procs)
        if stage.name == "sweep" and done:
            stage.retry.at = time.monotonic() + self.sweep
            self.log("stage-done", f"sweep: {', '.join(what)}; next in {self.sweep:g}s")
            return
        stage.restarts += 1
        if ran >= RESET_AFTER:
            stage.retry.reset()
            stage.quick_ends = 0
        else:
            stage.quick_ends += 1
        delay = stage.retry.later()
        if stage.name == "sweep":       # a failed sweep waits for its time too
            stage.retry.at = max(stage.retry.at, time.monotonic() + self.sweep)
        self.log("stage-exited", f"{stage.name}: {', '.join(what)} after {ran:.1f}s;"
                                 f" restart {stage.restarts} in {delay:g}s")
        stage.last_error = "; ".join(what)
        self.tell_failing(stage, what)

    def tell_failing(self, stage, what):
        """Say once on stderr that a stage fails as soon as it starts: restarted for
        ever, the reason only in the log, it looked like a crew that runs. Called
        after each end counted, so the count meets FAILING_AT_ONCE once a row."""
        if stage.quick_ends != FAILING_AT_ONCE:
            return
        said = f"; it said: {stage.last_said}" if stage.last_said else ""
        self._tell(f"crew-up: stage {stage.name} fails at once ({stage.quick_ends} times"
                   f" in a row; {', '.join(what)}{said}); still restarting it,"
                   f" see {self.files[LOG]}")

    def kill(self, stage):
        """SIGTERM every process of the stage, SIGKILL after STOP_GRACE, and forget
        them; return those killed."""
        forced = []
        for p in stage.procs:
            p.popen.send_signal(signal.SIGTERM)     # a process already reaped is skipped
        deadline = time.monotonic() + STOP_GRACE
        for p in stage.procs:
            try:
                p.popen.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.popen.kill()
                p.popen.wait()
                forced.append(p)
            # what it said last; not waiting on a pipe a child of its own may hold
            while select.select([p.popen.stderr], [], [], 0)[0] and self.read_stderr(p):
                pass
            if p.carry:
                self._said(p, p.carry)
                p.carry = b""
            for f in (p.popen.stdin, p.popen.stdout, p.popen.stderr):
                if f is not None:
                    f.close()
        stage.procs = []
        return forced

    def shutdown(self):
        for stage in self.stages.values():
            self.kill(stage)
        if self.lock is not None:
            self.writing[LOG].at = 0.0     # one last try for what is held
            self.log("down", f"pid {os.getpid()}")
            try:
                os.unlink(self.files[STATE])
            except FileNotFoundError:
                pass
            self.lock.release()
            self.lock = None


def remote_cursor(crew, host):
    return os.path.join(crew.sub(DIR), f"{CURSOR}@{host}")


def ssh_argv(host, command):
    """ssh (or $CREWFILE_SSH, split as a shell would) to *host*, running *command*;
    keepalives end a dead connection within ~15 s on our side."""
    base = shlex.split(os.environ.get("CREWFILE_SSH") or "ssh")
    return base + ["-o", "BatchMode=yes", "-o", "ServerAliveInterval=5",
                   "-o", "ServerAliveCountMax=3", "--", host, command]


def remote_command(remote_dir, name, *args):
    """Command *name* for the remote crew, shell-quoted: crewfile at the same path there."""
    argv = [sys.executable, bin_path(name), *args]
    return f"CREWFILE_DIR={shlex.quote(remote_dir)} {shlex.join(argv)}"


def remote_pipe(remote_dir, once=False):
    """The remote half of a remote crew's wake pipe, one shell line: its own
    crew-watch and wake-filter (each machine classifies by its own meta)."""
    watch = remote_command(remote_dir, "crew-watch", "--resume", "-") + (" --once" if once else "")
    return f"{watch} | {remote_command(remote_dir, 'wake-filter')}"


def remote_nudge(remote_dir):
    """`nudge-tick --watch` for the remote crew, stopped when its ssh connection
    (stdin) ends: nudge-tick writes nothing that would fail."""
    tick = remote_command(remote_dir, "nudge-tick", "--watch", "--quiet")
    return f"{tick} </dev/null & p=$!; cat >/dev/null; kill $p; wait $p"


def describe(code):
    return f"killed by {signal_name(-code)}" if code < 0 else f"exit {code}"


def read_state(crew):
    """crew-up/state as a dict ({} when absent or damaged)."""
    try:
        data = read_json(files(crew)[STATE])
    except (OSError, ValueError, CrewfileError):    # damaged or unreadable: as if absent
        return {}
    return data if isinstance(data, dict) else {}


def running(crew):
    """True if a crew-up holds this crew's lock."""
    return is_held(files(crew)[LOCK])


def down(crew, timeout=30.0):
    """SIGTERM the crew's crew-up and wait until its lock is free. False if none ran.
    Only the process holding the lock is signalled: `state` is a file any
    process of the user can write, and a pid alone may name anything."""
    lock = files(crew)[LOCK]
    if not running(crew):
        return False
    pid = read_state(crew).get("pid")
    if not isinstance(pid, int) or pid <= 1:
        raise SystemFailure("crew-up holds the lock but its state names no pid")
    if pid not in (holders(lock) or ()):
        raise SystemFailure(f"crew-up/state names pid {pid}, but crew-up/lock is held by"
                            f" {holder(lock)}: nothing signalled")
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    stopped = acquire(lock, timeout=timeout)   # free once every stage stopped
    if stopped is None:
        raise SystemFailure(f"crew-up (pid {pid}) did not stop within {timeout:g}s")
    stopped.release()
    return True


def status_lines(crew):
    """The table --status prints (header first), or None if not running."""
    if not running(crew):
        return None
    st = read_state(crew)
    rows = [("STAGE", "RUNNING", "PIDS", "SINCE", "RESTARTS", "LAST-ERROR")]
    for name, s in sorted((st.get("stages") or {}).items()):
        pids = ",".join(f"{k}={v}" for k, v in (s.get("pids") or {}).items()) or "-"
        rows.append((name, "yes" if s.get("running") else "no", pids, s.get("since") or "-",
                     str(s.get("restarts", 0)), s.get("last_error") or "-"))
    head = f"crew-up pid {st.get('pid')} primary {st.get('primary')} since {st.get('started')}"
    return head, rows


def systemd_unit(crew, primary, argv0, extra=()):
    """A systemd user unit running crew-up in the foreground for this crew
    (*extra*: more of crew-up's arguments)."""
    root = os.path.abspath(crew.root)
    tmux = os.environ.get("CREWFILE_TMUX") or os.environ.get("TMUX", "").split(",")[0]
    env = f'Environment="CREWFILE_DIR={root}"\n'
    if tmux:
        env += f'Environment="CREWFILE_TMUX={tmux}"\n'
    # systemd expands $VAR and %x itself, even inside quotes: a notify
    # command's $CREWFILE_NOTIFY_TITLE is for its shell, so written $$.
    start = command_line(argv0, primary, '--dir', root, *extra).replace("%", "%%").replace("$", "$$")
    return (f"[Unit]\nDescription=crewfile supervision of {root} for {primary}\n\n"
            f"[Service]\nType=simple\n{env}"
            f"ExecStart={start}\n"
            "KillMode=mixed\nTimeoutStopSec=15\nRestart=on-failure\nRestartSec=5\n\n"
            "[Install]\nWantedBy=default.target\n")
