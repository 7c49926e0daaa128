"""Registration from the agent CLI's own registry, and the verdict's cross-check
against it, with real processes in real tmux panes.

The agent here is a plain `sleep` and its registry entry is written by the
test, in the shape Claude Code writes it (tests/test_registry_e2e.py runs the
real CLI): the registry is the agent's own writing, so a test that writes
it is an agent that writes it.
"""
import json
import os
import signal

import pytest

from conftest import cmd, make_due, wait_for
from crewfile.agents import registry
from crewfile.core.liveness import process_start
from crewfile.core.logfile import TailStats
from crewfile.session import verdict
from crewfile.session.sessions import Session

SID = "0f8a5d2c-1111-4222-8333-944455556666"


def write_entry(where, pid, **fields):
    os.makedirs(where, exist_ok=True)
    entry = {"pid": pid, "sessionId": SID, "cwd": "/", "procStart": str(process_start(pid)),
             "kind": "interactive", "status": "idle"}
    entry.update(fields)
    entry = {k: v for k, v in entry.items() if v is not None}
    with open(os.path.join(where, f"{pid}.json"), "w") as f:
        json.dump(entry, f)
    return entry


def kinds(crew, name):
    return [(r.kind, r.text) for r in Session(crew, name).last_records(50, TailStats())]


def agent_in_shell(tmux, name="w"):
    """A bash pane running `sleep` as its agent (the shell stays when it dies):
    (pane, the agent's pid)."""
    pane = tmux.new_window("bash --norc --noprofile", name=name)
    return pane, start_sleep(tmux, pane)


def start_sleep(tmux, pane):
    shell = tmux.pane_pid(pane)
    before = set(children(shell))
    tmux("send-keys", "-t", pane, "-l", "sleep 3600")
    tmux("send-keys", "-t", pane, "Enter")
    return wait_for(lambda: next(iter(set(children(shell)) - before), None),
                    what="the agent's process")


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except FileNotFoundError:
        return []


@pytest.fixture
def where(tmp_path):
    return str(tmp_path / "claude" / "sessions")


def add(*args):
    return cmd("session-add", *args)


def test_registered_from_the_pane_with_the_registry_facts_then_live(crew, tmux, where, tmp_path):
    pane, pid = agent_in_shell(tmux)
    write_entry(where, pid, tmux=f"crew:@0.{pane}", cwd=str(tmp_path))
    p = add("w1", "--from-registry", "--tmux", pane, "--registry", where)
    assert p.returncode == 0, p.stderr
    assert p.stdout == f"w1: registered: agent process {pid}, conversation {SID}, pane {pane}\n"
    meta = Session(crew, "w1").meta
    assert (meta["pid"], meta["pid_start"], meta["agent_session_id"]) == (
        pid, process_start(pid), SID)
    assert (meta["tmux"], meta["tmux_socket"], meta["agent_registry"], meta["cwd"]) == (
        pane, tmux.sock, where, str(tmp_path))
    v = verdict.of(Session(crew, "w1"))
    assert (v.live, v.pane) == (verdict.LIVE, pane)


def test_registered_by_pid_and_found_nowhere_else(crew, tmux, where):
    pane, pid = agent_in_shell(tmux)
    write_entry(where, pid)                      # 2.1.197: no tmux field
    p = add("w1", "--from-registry", "--pid", str(pid), "--registry", where)
    assert p.returncode == 0, p.stderr
    assert p.stdout == f"w1: registered: agent process {pid}, conversation {SID}\n"
    assert "tmux" not in Session(crew, "w1").meta
    p = add("w2", "--from-registry", "--pid", "1", "--registry", where)
    assert (p.returncode, p.stderr) == (3, f"session-add: no entry for process 1 in the agent"
                                           f" registry {where}\n")
    p = add("w2", "--from-registry", "--registry", where)        # not run by the agent
    assert (p.returncode, p.stderr) == (3, f"session-add: no agent of the registry {where} among"
                                           " this command's ancestors (name it with --tmux,"
                                           " --pid or --adopt)\n")


def test_a_stale_entry_is_refused(crew, tmux, where):
    pane, pid = agent_in_shell(tmux)
    write_entry(where, pid, procStart="12345")         # another process of that pid, once
    p = add("w1", "--from-registry", "--pid", str(pid), "--registry", where)
    assert (p.returncode, p.stderr) == (1, f"session-add: the registry's entry {where}/{pid}.json"
                                           f" is stale: process {pid} is another process now\n")
    assert not Session(crew, "w1").exists()


def test_an_agent_not_in_the_pane_named_is_refused(crew, tmux, where):
    pane, pid = agent_in_shell(tmux)
    other = tmux.new_window("sleep 3600", name="other")
    write_entry(where, pid, tmux=f"crew:@0.{pane}")
    p = add("w1", "--from-registry", "--pid", str(pid), "--tmux", other, "--registry", where)
    assert (p.returncode, p.stderr) == (1, f"session-add: agent process {pid} does not run in"
                                           f" tmux pane {other}\n")


@pytest.mark.parametrize("change, why", [
    ({"sessionId": "another-conversation"},
     "the agent registry says process {pid} holds conversation another-conversation, not " + SID),
    ({"tmux": "crew:@7.%99"},
     "the agent registry says process {pid} runs in pane %99, not {pane}"),
])
def test_a_registry_that_disagrees_makes_the_session_unknown_and_nothing_is_typed(
        crew, tmux, where, tmp_path, change, why):
    pane, pid = agent_in_shell(tmux)
    write_entry(where, pid, tmux=f"crew:@0.{pane}")
    assert add("w1", "--from-registry", "--tmux", pane, "--registry", where).returncode == 0
    sentinel = tmp_path / "SENTINEL"
    p = cmd("nudge-add", "--session", "w1", "--every", "600", "--message", f"touch {sentinel}")
    assert p.returncode == 0, p.stderr
    sid = p.stdout.split()[0]
    write_entry(where, pid, **dict({"tmux": f"crew:@0.{pane}"}, **change))
    why = why.format(pid=pid, pane=pane)
    v = verdict.of(Session(crew, "w1"))
    assert (v.live, v.why) == (verdict.UNKNOWN, verdict.Answer(verdict.REGISTRY_DISAGREES, why))
    make_due(crew, sid)
    out = cmd("nudge-tick").stdout
    assert f"{sid} w1 refused: live-unknown: {verdict.REGISTRY_DISAGREES}: {why}" in out, out
    assert not sentinel.exists()
    watch = cmd("crew-watch", "--once").stdout
    assert " lost" not in watch                  # unknown is never lost
    ls = cmd("status-show", "w1", "--json")
    assert json.loads(ls.stdout)["live"] == "unknown"
    os.unlink(os.path.join(where, f"{pid}.json"))   # no entry: no cross-check
    assert verdict.of(Session(crew, "w1")).live == verdict.LIVE


def test_an_unreadable_entry_withholds_too(crew, tmux, where):
    pane, pid = agent_in_shell(tmux)
    write_entry(where, pid, tmux=f"crew:@0.{pane}")
    assert add("w1", "--from-registry", "--tmux", pane, "--registry", where).returncode == 0
    with open(os.path.join(where, f"{pid}.json"), "w") as f:
        f.write('{"pid": 1, "procStart": "1"}')
    v = verdict.of(Session(crew, "w1"))
    assert (v.live, v.why.code) == (verdict.UNKNOWN, verdict.REGISTRY_DISAGREES)
    assert v.why.detail == (f"the agent registry's entry cannot be read: {where}/{pid}.json:"
                            f" names pid 1, not {pid}")


def test_a_registration_moves_to_the_new_process_in_its_pane(crew, tmux, where):
    """`claude --resume` in the same pane, without crewfile's hook: the old
    process is gone (lost, once), the new one has an entry for the same
    conversation; session-add --from-registry moves the row to it."""
    pane, pid = agent_in_shell(tmux)
    write_entry(where, pid, tmux=f"crew:@0.{pane}")
    assert add("w1", "--from-registry", "--tmux", pane, "--registry", where).returncode == 0
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: verdict.of(Session(crew, "w1")).live == verdict.NOT_LIVE, what="not live")
    cursor = os.path.join(crew.root, "..", "cursor")
    watch = cmd("crew-watch", "--once", "--cursor", cursor).stdout
    assert f"w1 lost: agent process {pid} is gone" in watch, watch
    os.unlink(os.path.join(where, f"{pid}.json"))          # a --resume's exit removes it
    new = start_sleep(tmux, pane)
    write_entry(where, new, tmux=f"crew:@0.{pane}")
    p = add("w1", "--from-registry", "--tmux", pane, "--registry", where)
    assert p.returncode == 0, p.stderr
    assert p.stdout == f"w1: repaired: agent process {new}, conversation {SID}, pane {pane}\n"
    assert kinds(crew, "w1")[-1] == ("registered", f"from the agent registry: agent process"
                                                   f" {new}, conversation {SID}")
    assert verdict.of(Session(crew, "w1")).live == verdict.LIVE
    assert "lost" not in cmd("crew-watch", "--once", "--cursor", cursor).stdout
    os.kill(new, signal.SIGKILL)                           # a new life may be lost again, once
    wait_for(lambda: verdict.of(Session(crew, "w1")).live == verdict.NOT_LIVE, what="not live")
    watch = cmd("crew-watch", "--once", "--cursor", cursor).stdout
    assert f"w1 lost: agent process {new} is gone" in watch, watch


def test_a_repair_needs_its_pane_or_its_conversation_and_no_live_agent(crew, tmux, where):
    pane, pid = agent_in_shell(tmux, "a")
    write_entry(where, pid, tmux=f"crew:@0.{pane}")
    assert add("w1", "--from-registry", "--tmux", pane, "--registry", where).returncode == 0
    other, stranger = agent_in_shell(tmux, "b")
    write_entry(where, stranger, tmux=f"crew:@0.{other}", sessionId="someone-else")
    p = add("w1", "--from-registry", "--tmux", other, "--registry", where)
    assert (p.returncode, p.stderr) == (1, f"session-add: session 'w1' has a live agent, process"
                                           f" {pid}, that is not the registry's process"
                                           f" {stranger}\n")
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: verdict.of(Session(crew, "w1")).live == verdict.NOT_LIVE, what="not live")
    p = add("w1", "--from-registry", "--tmux", other, "--registry", where)
    assert (p.returncode, p.stderr) == (1, f"session-add: session 'w1' is registered and not"
                                           f" ended, and the registry's process {stranger} is"
                                           f" neither in its pane, its conversation nor its"
                                           f" job\n")
    assert Session(crew, "w1").meta["pid"] == pid


def test_usage(crew, where):
    for args, said in [
        (("--from-registry", "--adopt", "x"), "--from-registry and --adopt: one or the other"),
        (("--adopt", "x", "--pid", "1"), "--adopt takes no --tmux or --pid: a background"
                                         " session has no pane"),
        (("--registry", where), "--registry goes with --from-registry or --adopt"),
        (("--from-registry", "--agent-session-id", "x"),
         "--agent-session-id comes from the registry here"),
    ]:
        p = add("w1", *args)
        assert (p.returncode, p.stderr) == (
            2, f"session-add: {said}\nTry 'session-add --help'.\n"), args


def test_the_reader_takes_what_claude_code_writes(tmp_path):
    where = str(tmp_path)
    pid = os.getpid()
    with open(os.path.join(where, f"{pid}.json"), "w") as f:     # 2.1.332, as written here
        f.write(json.dumps({"pid": pid, "sessionId": SID, "cwd": "/p", "procStart": "1138155",
                            "kind": "interactive", "tmux": "0:@0.%12", "name": "project-e8",
                            "messagingSocketPath": "/tmp/cc-socks/1.sock"}))
    e = registry.read(pid, where)
    assert (e.pid, e.start, e.session_id, e.pane, e.window, e.background) == (
        pid, 1138155, SID, "%12", "@0", False)
    assert registry.read(pid + 1, where) is None
    os.symlink(os.path.join(where, f"{pid}.json"), os.path.join(where, "7.json"))
    with pytest.raises(registry.Unreadable):
        registry.read(7, where)
    assert [x.pid for x in registry.entries(where)] == [pid]
    assert registry.directory({"HOME": "/h"}) == "/h/.claude/sessions"
    assert registry.directory({"HOME": "/h", "CLAUDE_CONFIG_DIR": "/c"}) == "/c/sessions"
    assert registry.directory({}) is None


def test_an_entry_caught_empty_is_read_again_then_said(crew, tmux, where, tmp_path):
    """Claude Code rewrites its file in place: an empty one is not an entry.
    session-add says so (exit 1), never a traceback; the verdict holds."""
    pane, pid = agent_in_shell(tmux)
    write_entry(where, pid, tmux=f"crew:@0.{pane}")
    assert add("w1", "--from-registry", "--tmux", pane, "--registry", where).returncode == 0
    open(os.path.join(where, f"{pid}.json"), "w").close()
    p = add("w2", "--from-registry", "--pid", str(pid), "--registry", where)
    assert (p.returncode, p.stderr) == (1, "session-add: the registry's entry cannot be read:"
                                           f" {where}/{pid}.json: not JSON\n")
    v = verdict.of(Session(crew, "w1"))
    assert (v.live, v.why.detail) == (verdict.UNKNOWN, f"the agent registry's entry cannot be"
                                                       f" read: {where}/{pid}.json: not JSON")
