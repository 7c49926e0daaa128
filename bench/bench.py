"""make bench: every figure printed as a ratio against a baseline measured in
the same run, by the same interpreter, in the same process tree.

Each bench/bench_*.py module has `run(b)` and reports through `b.figure(...)`.
Run one: `make bench ONLY=status`.
"""
import glob
import importlib.util
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
BIN = os.path.join(REPO, "bin")


class Bench:
    def __init__(self, tmp):
        self.tmp = tmp
        self.python = sys.executable
        self.env = dict(os.environ, PATH=f"{BIN}:{os.path.dirname(sys.executable)}:{os.environ['PATH']}")
        self.results = []

    def cmd(self, name):
        """argv that runs bin/NAME through this interpreter (not a pyenv shim)."""
        return [self.python, os.path.join(BIN, name)]

    def wall(self, argv, n=30, env=None, stdin=None, warmup=3):
        """Median wall time of running argv n times (seconds)."""
        times = []
        for i in range(n + warmup):
            t0 = time.perf_counter()
            subprocess.run(argv, env=env or self.env, stdin=stdin or subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if i >= warmup:
                times.append(time.perf_counter() - t0)
        return statistics.median(times)

    def wall_pair(self, argv_a, argv_b, n=30, env=None, warmup=3):
        """Median wall times of argv_a and argv_b, run alternately, so that a
        load that drifts during the run weighs on both alike."""
        times = ([], [])
        for i in range(n + warmup):
            for argv, out in ((argv_a, times[0]), (argv_b, times[1])):
                t0 = time.perf_counter()
                subprocess.run(argv, env=env or self.env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                if i >= warmup:
                    out.append(time.perf_counter() - t0)
        return statistics.median(times[0]), statistics.median(times[1])

    def pair(self, argv_a, argv_b, n=30, env=None, warmup=3):
        """As wall_pair, and the CPU time (user + system, the process and the
        children it waited for) beside: ((wall_a, wall_b), (cpu_a, cpu_b)),
        medians. CPU time is what a command costs whatever the machine's load."""
        walls, cpus = ([], []), ([], [])
        for i in range(n + warmup):
            for k, argv in enumerate((argv_a, argv_b)):
                t0 = time.perf_counter()
                proc = subprocess.Popen(argv, env=env or self.env, stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                _, _, usage = os.wait4(proc.pid, 0)
                proc.returncode = 0             # reaped here: Popen must not wait again
                if i >= warmup:
                    walls[k].append(time.perf_counter() - t0)
                    cpus[k].append(usage.ru_utime + usage.ru_stime)
        med = statistics.median
        return (med(walls[0]), med(walls[1])), (med(cpus[0]), med(cpus[1]))

    def figure(self, label, value, baseline, unit="ms", budget=None, base_label="baseline",
               lower_is_better=True):
        """Print one figure: value, its baseline, the ratio and the budget's verdict."""
        scale = 1000 if unit == "ms" else 1
        ratio = value / baseline if baseline else float("inf")
        verdict = ""
        if budget is not None:
            ok = ratio <= budget if lower_is_better else ratio >= budget
            verdict = f"  budget {'<=' if lower_is_better else '>='}{budget}x: {'OK' if ok else 'OVER'}"
        print(f"  {label}: {value * scale:.2f} {unit} vs {base_label} {baseline * scale:.2f} {unit}"
              f" = {ratio:.2f}x{verdict}", flush=True)
        self.results.append((label, value, baseline, ratio, budget))

    def note(self, text):
        print(f"  {text}", flush=True)


def main():
    only = os.environ.get("ONLY", "")
    print(f"crewfile bench: python {platform.python_version()} at {sys.executable}")
    print(f"  PYTHONUNBUFFERED={os.environ.get('PYTHONUNBUFFERED', '')!s} "
          f"PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')!s} "
          f"cores={os.cpu_count()} kernel={platform.release()}")
    for path in sorted(glob.glob(os.path.join(HERE, "bench_*.py"))):
        name = os.path.basename(path)[6:-3]
        if only and only not in name:
            continue
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        print(f"\n[{name}] {(mod.__doc__ or '').strip().splitlines()[0]}", flush=True)
        tmp = tempfile.mkdtemp(prefix=f"crewfile-bench-{name}-")
        try:
            mod.run(Bench(tmp))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.path.insert(0, os.path.join(REPO, "lib"))
    # Start-up is measured as a user meets it, from the .pyc files written on
    # a first run: with PYTHONDONTWRITEBYTECODE set (CI, this machine) a
    # source edited since would be compiled again by every trial.
    import compileall
    compileall.compile_dir(os.path.join(REPO, "lib"), quiet=1)
    main()
