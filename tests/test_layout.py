"""The layout shows the architecture, and stays so: packages by concept on
floors (crewfile/__init__.py draws them), every import pointing down or
within its own package, no circle, no private name borrowed, imports at the
top of each file but where a budgeted path keeps them lazy on purpose."""
import ast
import os
import subprocess
import sys

import pytest

from crewfile.core.paths import Crew
from crewfile.session.sessions import register
from crewfile.session.tmux import LISTED_FORMAT

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIB = os.path.join(REPO, "lib", "crewfile")

# The floors, from the ground up (as crewfile/__init__.py draws them).
FLOOR = {"core": 1, "agents": 2, "session": 3, "asides": 4, "nudges": 4, "wake": 5,
         "background": 6, "hooks": 6, "crew": 7, "views": 8, "cli": 9, "cmd": 10}

# Modules whose imports inside functions are deliberate: the hook runs on
# every agent event and crew-status from tmux's status line (DESIGN.md,
# "Budgets"), so what only some of their paths need is imported there. Each
# holds at least one such import (test_every_budgeted_module_defers_an_import).
BUDGETED = {
    "crewfile.cli", "crewfile.cmd.crew_hook", "crewfile.cmd.crew_status",
    "crewfile.hooks.hook", "crewfile.agents.codex", "crewfile.agents.gemini",
    "crewfile.asides.captain", "crewfile.asides.evidence", "crewfile.session.sessions",
    "crewfile.session.verdict", "crewfile.views.glance",
    "crewfile.core.jsonio", "crewfile.session.reader",
    "crewfile.core.paths",
}
# Optional or heavy dependencies, imported only where a flag needs them.
OPTIONAL = {"dateutil", "inotify_simple"}


def modules():
    for d, _, files in os.walk(LIB):
        for f in sorted(files):
            if f.endswith(".py"):
                path = os.path.join(d, f)
                rel = os.path.relpath(path, os.path.dirname(LIB))[:-3].replace(os.sep, ".")
                yield rel.removesuffix(".__init__"), path


def package(mod):
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else None


def imports(path):
    """(node, target module names, at top level) of each crewfile import in *path*."""
    tree = ast.parse(open(path).read())
    top = {id(n) for n in tree.body}
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and n.module:
            yield n, [n.module] + [f"{n.module}.{a.name}" for a in n.names], id(n) in top
        elif isinstance(n, ast.Import):
            yield n, [a.name for a in n.names], id(n) in top


def is_module(name):
    parts = name.split(".")
    base = os.path.join(os.path.dirname(LIB), *parts)
    return os.path.exists(base + ".py") or os.path.exists(os.path.join(base, "__init__.py"))


def test_every_module_has_a_floor():
    for mod, _ in modules():
        if mod != "crewfile":
            assert package(mod) in FLOOR, f"{mod}: its package has no floor in FLOOR"


def test_imports_point_down_or_within_their_package():
    wrong = []
    for mod, path in modules():
        here = package(mod)
        if here is None:
            continue
        for node, targets, _ in imports(path):
            for t in targets:
                if not t.startswith("crewfile.") or not is_module(t):
                    continue
                there = package(t)
                if there == here or there is None:
                    continue
                if FLOOR[there] >= FLOOR[here]:
                    wrong.append(f"{mod}:{node.lineno} imports {t} (floor {FLOOR[there]}"
                                 f" from floor {FLOOR[here]})")
    assert not wrong, "\n".join(wrong)


def test_no_circle_of_imports():
    edges = {}
    for mod, path in modules():
        edges[mod] = {t for _, targets, _ in imports(path) for t in targets
                      if t.startswith("crewfile.") and is_module(t) and t != mod}
    circles, state = [], {}

    def visit(u, stack):
        state[u] = "open"
        stack.append(u)
        for v in sorted(edges.get(u, ())):
            if state.get(v) == "open":
                circles.append(" -> ".join(stack[stack.index(v):] + [v]))
            elif v not in state:
                visit(v, stack)
        stack.pop()
        state[u] = "done"

    for u in sorted(edges):
        if u not in state:
            visit(u, [])
    assert not circles, "\n".join(circles)


def test_no_private_name_borrowed_from_another_module():
    borrowed = []
    for mod, path in modules():
        for node, _, _ in imports(path):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("crewfile"):
                for a in node.names:
                    if a.name.startswith("_") and node.module != mod:
                        borrowed.append(f"{mod}:{node.lineno} imports {node.module}.{a.name}")
    assert not borrowed, "\n".join(borrowed)


def test_every_budgeted_module_defers_an_import():
    """BUDGETED grants no more than is used: a module whose in-function
    imports are gone leaves the list."""
    deferring = {mod for mod, path in modules()
                 if any(not top for _, _, top in imports(path))}
    assert BUDGETED <= deferring, sorted(BUDGETED - deferring)


def test_imports_at_the_top_but_on_budgeted_paths():
    inner = []
    for mod, path in modules():
        if mod in BUDGETED:
            continue
        for node, targets, top in imports(path):
            if top or targets[0].split(".")[0] in OPTIONAL:
                continue
            inner.append(f"{mod}:{node.lineno} imports {targets[0]} inside a function")
    assert not inner, "\n".join(inner)


HOOK_EVENTS = {
    "claude": ["SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop",
               "Notification", "SessionEnd"],
    "codex": ["SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop"],
    "gemini": ["SessionStart", "BeforeAgent", "BeforeTool", "AfterTool", "AfterAgent",
               "Notification", "SessionEnd"],
}
# What the hook may load on any event: the modules on its path, nothing a
# command needs beyond it (tmux, verdict, delivery, asides' conclusion, jobs,
# views). A module added here is start-up time on every agent event.
HOOK_CLOSURE = {
    "crewfile", "crewfile.cli", "crewfile.cmd", "crewfile.cmd.crew_hook",
    "crewfile.hooks", "crewfile.hooks.hook", "crewfile.agents", "crewfile.agents.claude",
    "crewfile.agents.codex", "crewfile.agents.gemini", "crewfile.asides",
    "crewfile.asides.captain", "crewfile.asides.evidence", "crewfile.core",
    "crewfile.core.atomic", "crewfile.core.errors", "crewfile.core.jsonio",
    "crewfile.core.kinds", "crewfile.core.locks", "crewfile.core.logfile", "crewfile.core.logwrite",
    "crewfile.core.names", "crewfile.core.paths", "crewfile.core.records",
    "crewfile.core.shapes", "crewfile.core.text", "crewfile.core.liveness",
    "crewfile.session", "crewfile.session.liveness", "crewfile.session.reader", "crewfile.session.sessions",
    "crewfile.wake", "crewfile.wake.inbox", "crewfile.wake.words",
}


def modules_loaded(command, args, env, cwd, stdin=""):
    """The modules bin/COMMAND ARGS... has loaded when it exits (by os._exit,
    as cli.leave() does, or at the interpreter's exit), and its output."""
    code = ("import sys\n"
            "sys.argv = [%r] + sys.argv[1:]\n"
            "sys.path.insert(0, %r)\n"
            "from crewfile import cli\n"
            "import atexit, os\n"
            "report = lambda: sys.__stderr__.write('MODULES ' + ' '.join(sorted(sys.modules)) + '\\n')\n"
            "atexit.register(report)\n"
            "leave = os._exit\n"
            "os._exit = lambda code: (report(), sys.__stderr__.flush(), leave(code))\n"
            "cli.main(%r)\n") % (command, os.path.join(REPO, "lib"),
                                  os.path.join(REPO, "bin", command))
    out = subprocess.run([sys.executable, "-c", code] + args, input=stdin, text=True,
                         capture_output=True, env=env, cwd=cwd)
    line = [l for l in out.stderr.splitlines() if l.startswith("MODULES ")]
    assert line, out.stderr
    return set(line[-1].split()[1:]), out


@pytest.mark.parametrize("agent,event", [(a, e) for a, es in HOOK_EVENTS.items() for e in es])
def test_the_hooks_import_closure_stays_small(tmp_path, agent, event):
    """Each hook event, run as the agent runs it, loads only HOOK_CLOSURE of
    crewfile, and neither subprocess nor the json package on its way."""
    payload = '{"hook_event_name": "%s", "prompt": "hello", "prompt_id": "p1",' \
              ' "tool_name": "Bash", "tool_input": {"command": "ls"}}' % event
    env = dict(os.environ, CREWFILE_DIR=str(tmp_path / "crew"), CREWFILE_SESSION="w1")
    loaded, _ = modules_loaded("crew-hook", ["--agent", agent], env, str(tmp_path), payload)
    extra = {m for m in loaded if m.startswith("crewfile")} - HOOK_CLOSURE
    assert not extra, f"{agent} {event} loads {sorted(extra)}"
    assert "subprocess" not in loaded, f"{agent} {event} loads subprocess"


def test_job_wait_leaves_shutil_out(tmp_path):
    """job-wait's exit is on its budget's path (DESIGN.md, "Budgets": job end
    -> job-wait returning), and an exit unmaps all that was loaded: shutil
    and the compression libraries it brings are not."""
    env = dict(os.environ, CREWFILE_DIR=str(tmp_path / "crew"))
    env.pop("CREWFILE_SESSION", None)
    handle = subprocess.run([sys.executable, os.path.join(REPO, "bin", "job-exec"), "--", "true"],
                            env=env, capture_output=True, text=True, check=True).stdout.strip()
    loaded, out = modules_loaded("job-wait", [handle], env, str(tmp_path))
    assert out.returncode == 0 and out.stdout.startswith(f"{handle} exited 0"), out
    assert not {"shutil", "bz2", "lzma", "zlib"} & loaded, sorted(loaded)


# What crew-status may load as tmux's status line runs it (--tmux --panes),
# live sessions in panes (DESIGN.md, "Budgets": within 1.2x of `python -c
# pass`): the verdict's probe of the list handed in and the records, not the
# agent CLIs' adapters nor a read of their registry (which can only make a
# live session unknown: no word of the line tells it from live), tmux, locks
# or writers. The verdict imports the agents package (adapter_of) at its
# top: a small module over core ones the line loads anyway.
STATUS_CLOSURE = {
    "crewfile", "crewfile.agents",
    "crewfile.cli", "crewfile.cmd", "crewfile.cmd.crew_status",
    "crewfile.core", "crewfile.core.errors", "crewfile.core.jsonio", "crewfile.core.kinds",
    "crewfile.core.liveness", "crewfile.core.logfile", "crewfile.core.names",
    "crewfile.core.paths", "crewfile.core.records", "crewfile.core.shapes",
    "crewfile.core.text", "crewfile.session", "crewfile.session.reader",
    "crewfile.session.tmuxseen", "crewfile.session.verdict", "crewfile.views",
    "crewfile.views.glance",
}


def test_the_status_lines_import_closure_stays_small(tmp_path, tmux):
    """crew-status --tmux --panes over live sessions in panes, one working,
    one idle, loads only STATUS_CLOSURE of crewfile, and neither subprocess
    nor the json package, nor pwd."""
    crew = Crew(str(tmp_path / "crew"))
    for name, kinds in (("w1", ["turn-started"]), ("w2", ["turn-started", "turn-ended"])):
        pane = tmux.new_window("sleep 600", name=name)
        sess = register(crew, name, tmux=pane, pid=tmux.pane_pid(pane),
                        env={"CREWFILE_TMUX": tmux.sock})
        for kind in kinds:
            sess.append(kind)
    listed = tmux("display-message", "-p", LISTED_FORMAT).rstrip("\n")
    env = dict(os.environ, CREWFILE_DIR=crew.root)
    loaded, out = modules_loaded("crew-status", ["--tmux", "--panes", listed], env,
                                 str(tmp_path))
    said = [line for line in out.stderr.splitlines() if not line.startswith("MODULES ")]
    assert (out.returncode, said) == (0, []), out
    assert out.stdout == "#[fg=green]1 working#[default] #[fg=default]1 idle#[default]\n"
    extra = {m for m in loaded if m.startswith("crewfile")} - STATUS_CLOSURE
    assert not extra, f"crew-status --tmux --panes loads {sorted(extra)}"
    assert not {"subprocess", "json", "pwd"} & loaded, sorted(loaded)


# With a transcript recorded (every Claude session once its hook has run),
# the line also shows the crew's tokens: the tokens view and what it reads
# (tokens.cache, the inbox's words for a wake turn), not the hook or wake-send.
TOKENS_CLOSURE = STATUS_CLOSURE | {
    "crewfile.views.tokens", "crewfile.wake", "crewfile.wake.words", "crewfile.core.atomic",
}


def test_the_status_lines_closure_with_tokens_stays_small(tmp_path, tmux):
    """crew-status --tmux --panes over a session whose transcript is recorded
    loads only TOKENS_CLOSURE: once, the tokens view loaded wake-send (and
    with it delivery and tmux) for one string, twice the line's budget; then
    the inbox and its locks for two."""
    crew = Crew(str(tmp_path / "crew"))
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(open(os.path.join(REPO, "tests", "transcripts",
                                            "claude-primary.jsonl")).read())
    pane = tmux.new_window("sleep 600", name="w1")
    sess = register(crew, "w1", tmux=pane, pid=tmux.pane_pid(pane),
                    env={"CREWFILE_TMUX": tmux.sock})
    sess.append("turn-started")
    sess.update_meta(transcript_path=str(transcript))
    listed = tmux("display-message", "-p", LISTED_FORMAT).rstrip("\n")
    env = dict(os.environ, CREWFILE_DIR=crew.root)
    loaded, out = modules_loaded("crew-status", ["--tmux", "--panes", listed], env,
                                 str(tmp_path))
    assert out.returncode == 0 and " tok" in out.stdout, out
    extra = {m for m in loaded if m.startswith("crewfile")} - TOKENS_CLOSURE
    assert not extra, f"crew-status --tmux --panes with tokens loads {sorted(extra)}"
