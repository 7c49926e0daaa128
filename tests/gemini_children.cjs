// Preloaded into the Gemini CLI's node processes by tests/test_gemini_e2e.py
// (NODE_OPTIONS=--require): appends one JSON line per child process they
// spawn (its argv, exit code, signal) to $CREWFILE_TEST_CHILDREN. Why: the
// launcher relaunches itself as a child and, when that child dies of a
// signal, exits 1 without a word (0.61.0: child.on("close", code => code ?? 1));
// this log says which child ended how. It observes only: nothing is changed.
const log = process.env.CREWFILE_TEST_CHILDREN;
if (log) {
  const fs = require("node:fs");
  const cp = require("node:child_process");
  const spawn = cp.spawn;
  cp.spawn = function (...args) {
    const child = spawn.apply(this, args);
    const argv = [args[0]].concat(Array.isArray(args[1]) ? args[1] : [])
      .map((a) => String(a).slice(0, 200));
    child.on("exit", (code, signal) => {
      try {
        fs.appendFileSync(log, JSON.stringify(
          { parent: process.pid, pid: child.pid, argv, code, signal }) + "\n");
      } catch (e) { /* a diagnostic never breaks the run */ }
    });
    return child;
  };
  require("node:module").syncBuiltinESMExports();
}
