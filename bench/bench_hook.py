"""Agent hook: crew-hook's wall time per Claude Code, Codex and Gemini CLI event vs python -c pass."""
import json
import os
import statistics
import subprocess
import time


def run(b):
    crew = os.path.join(b.tmp, "crew")
    env = dict(b.env, CREWFILE_DIR=crew, CREWFILE_SESSION="w1")
    subprocess.run(b.cmd("session-add") + ["w1"], env=env, check=True)
    # Byte-compiled, as after pip install: PYTHONDONTWRITEBYTECODE would
    # otherwise make every run compile each module changed since its .pyc.
    lib = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib")
    subprocess.run([b.python, "-m", "compileall", "-q", lib], stdout=subprocess.DEVNULL, check=True)
    for event, fields in (("UserPromptSubmit", {"prompt": "fix the build"}),
                          ("Stop", {"stop_hook_active": False}),
                          ("PostToolUse", {"tool_name": "Bash", "tool_input": {"command": "ls"},
                                           "tool_response": {"stdout": ""}}),
                          ("PreToolUse", {"tool_name": "Bash", "tool_input": {"command": "ls"}})):
        path = os.path.join(b.tmp, f"{event}.json")
        with open(path, "w") as f:
            json.dump(dict({"session_id": "s-1", "cwd": b.tmp, "hook_event_name": event,
                            "transcript_path": "/t/s-1.jsonl"}, **fields), f)
        t, base = interleaved(b.cmd("crew-hook"), [b.python, "-c", "pass"], path, env)
        b.figure(f"crew-hook {event} wall time", t, base, budget=1.5,
                 base_label="python -c pass")
    other_agents(b, env)
    installed(b, env)


# Codex and Gemini CLI events (crew-hook --agent), the payloads of their docs.
OTHERS = (("codex", "UserPromptSubmit", {"turn_id": "t-1", "prompt": "fix the build"}),
          ("codex", "Stop", {"turn_id": "t-1", "stop_hook_active": False}),
          ("codex", "PreToolUse", {"turn_id": "t-1", "tool_name": "Bash",
                                   "tool_input": {"command": "ls"}}),
          ("gemini", "BeforeAgent", {"prompt": "fix the build"}),
          ("gemini", "AfterAgent", {"prompt": "x", "prompt_response": "y",
                                    "stop_hook_active": False}),
          ("gemini", "BeforeTool", {"tool_name": "run_shell_command",
                                    "tool_input": {"command": "ls"}}))


def other_agents(b, env):
    for agent, event, fields in OTHERS:
        path = os.path.join(b.tmp, f"{agent}-{event}.json")
        with open(path, "w") as f:
            json.dump(dict({"session_id": "s-1", "cwd": b.tmp, "hook_event_name": event,
                            "transcript_path": "/t/s-1.jsonl"}, **fields), f)
        t, base = interleaved(b.cmd("crew-hook") + ["--agent", agent],
                              [b.python, "-c", "pass"], path, env, n=20)
        b.figure(f"crew-hook --agent {agent} {event} wall time", t, base, budget=1.5,
                 base_label="python -c pass")


def installed(b, env):
    """Stop as Claude Code runs it: the exact command `crew-hook --install`
    wrote into settings.json, through sh -c; against `python -c pass` of the
    same interpreter, and against the same hook reached through a shell-level
    `python3` lookup on the user's PATH (a version manager's shim, if any)."""
    import shlex
    import shutil
    claude_dir = os.path.join(b.tmp, "dot-claude")
    subprocess.run(b.cmd("crew-hook") + ["--install", claude_dir], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    with open(os.path.join(claude_dir, "settings.json")) as f:
        command = json.load(f)["hooks"]["Stop"][0]["hooks"][0]["command"]
    python = shlex.split(command)[0]
    hook = shlex.split(command)[1]
    b.note(f"installed Stop command: {command}")
    path = os.path.join(b.tmp, "Stop.json")
    user_env = dict(env, PATH=os.environ["PATH"])
    t, base = interleaved(["sh", "-c", command], ["sh", "-c", f"{shlex.quote(python)} -c pass"],
                          path, user_env)
    b.figure("crew-hook Stop, the installed command", t, base, budget=1.5,
             base_label="the same python -c pass")
    looked_up = shutil.which("python3", path=os.environ["PATH"])
    if looked_up is None:
        b.note("no python3 on PATH: the lookup figure is skipped")
        return
    t_path, t_pinned = interleaved(["sh", "-c", f"python3 {shlex.quote(hook)}"],
                                   ["sh", "-c", command], path, user_env)
    b.figure(f"crew-hook Stop via `python3` on PATH ({looked_up})", t_path, t_pinned,
             base_label="the installed command")


def interleaved(argv, base_argv, path, env, n=40, warmup=3):
    """Median wall times of argv (with the file *path* on stdin) and of
    base_argv, run alternately so that a drifting machine load hits both."""
    times, base = [], []
    for i in range(n + warmup):
        for out, cmd in ((times, argv), (base, base_argv)):
            with open(path, "rb") as stdin:
                t0 = time.perf_counter()
                subprocess.run(cmd, env=env, stdin=stdin,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                if i >= warmup:
                    out.append(time.perf_counter() - t0)
    return statistics.median(times), statistics.median(base)
