HELP = """\
job-ls
List the jobs, oldest first: handle, session, state, code, who heard it, age, label.

  --json   a JSON array, one object per job (every field job-ls knows)

STATE: starting, running, exited, killed (by a signal), or lost (the watcher
was killed: the fate is unknown; the command's process group is reported
alive or gone). CODE: the exit code, 128+N for signal N, - while running.
HEARD: wait, notice, or no; `no!` when the announcement found nobody to tell
(the owning session was not live, had ended, or there was none). AGE: since
the job ended (since it was created while it runs).

Example: job-ls | awk '$5 == "no" || $5 == "no!"'    # outcomes nobody heard
"""


def run(args):
    import sys
    from ..cli import crew
    from ..jobs import list_jobs
    rows = list_jobs(crew(args))
    if args.json:
        from ..jsonio import dumps
        sys.stdout.write(dumps(rows) + "\n")
        return 0
    out = [["HANDLE", "SESSION", "STATE", "CODE", "HEARD", "AGE", "LABEL"]]
    if rows:
        from ..sessions import age_text
    for r in rows:
        heard = r["heard"] or ("no!" if r["announced"] is False else "no")
        state = r["state"]
        if state == "lost":
            state = "lost(" + {True: "group-alive", False: "group-gone",
                               None: "group-unknown"}[r.get("group_alive")] + ")"
        out.append([r["handle"], r["session"] or "-", state,
                    "-" if r["code"] is None else str(r["code"]), heard, age_text(r["age"]),
                    r["label"] or "-"])
    widths = [max(len(row[i]) for row in out) for i in range(len(out[0]) - 1)]
    sys.stdout.write("".join("  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[-1]
                             + "\n" for row in out))
    return 0
