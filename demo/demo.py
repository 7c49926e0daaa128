"""make demo: a real crew scenario end to end, on a private tmux server and a
temporary crew directory, narrated as it happens. Cleans up after itself
(`--keep` leaves the crew directory for inspection).

Scenes are demo/scene_*.py, run in order; each has `run(d)`. Naming some
(`demo.py scene_10 scene_20`) runs only those, in order: a later scene may
need what an earlier one set up.
"""
import glob
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


class Demo:
    def __init__(self, root):
        self.root = root
        self.crew = os.path.join(root, "crew")
        self.sock = os.path.join(root, "tmux.sock")
        self.env = dict(os.environ, CREWFILE_DIR=self.crew, CREWFILE_TMUX=self.sock,
                        PATH=f"{os.path.join(REPO, 'bin')}:{os.path.dirname(sys.executable)}:"
                             f"{os.environ['PATH']}")
        self.env.pop("TMUX", None)
        self.fake_agent = os.path.join(HERE, "fake-agent")

    def say(self, text):
        print(text, flush=True)

    def sh(self, command, show=True, check=True):
        """Run a shell command as the captain would, echoing it and its output."""
        if show:
            print(f"  $ {command}", flush=True)
        proc = subprocess.run(command, shell=True, env=self.env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
        if show and proc.stdout:
            print("".join(f"    {l}\n" for l in proc.stdout.rstrip("\n").split("\n")), end="")
        if check and proc.returncode != 0:
            raise SystemExit(f"demo: `{command}` exited {proc.returncode}")
        return proc.stdout

    def tmux(self, *args):
        return subprocess.run(["tmux", "-S", self.sock, "-f", "/dev/null", *args], env=self.env,
                              capture_output=True, text=True).stdout

    def wait(self, predicate, timeout=20, what="the demo's next step"):
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise SystemExit(f"demo: timed out waiting for {what}")
            time.sleep(0.05)


def main():
    keep = "--keep" in sys.argv
    only = [a for a in sys.argv[1:] if a != "--keep"]
    root = tempfile.mkdtemp(prefix="crewfile-demo-")
    d = Demo(root)
    d.tmux("new-session", "-d", "-s", "crew", "-n", "captain", "-x", "160", "-y", "40")
    try:
        for path in sorted(glob.glob(os.path.join(HERE, "scene_*.py"))):
            if only and not any(os.path.basename(path).startswith(o) for o in only):
                continue
            spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            print(f"\n== {(mod.__doc__ or '').strip().splitlines()[0]}", flush=True)
            mod.run(d)
        print("\ndemo: done.", flush=True)
    finally:
        d.tmux("kill-server")
        if keep:
            print(f"demo: crew directory kept at {d.crew}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
