import sys

from crewfile.background.jobs import list_jobs
from crewfile.cli import crew
from crewfile.core.errors import PARTIAL
from crewfile.core.output import age_text, json_document, table
from crewfile.core.text import escape


def run(args):
    rows = list_jobs(crew(args), full=bool(args.json))
    bad = [r for r in rows if "error" in r]
    sys.stderr.write("".join(f"job-ls: {escape(r['error'])}\n" for r in bad))
    code = PARTIAL if bad else 0
    if args.json:
        sys.stdout.write(json_document({k: v for k, v in r.items() if k != "created" or "error" not in r}
                                       for r in rows))
        return code
    out = []
    for r in rows:
        if "error" in r:
            out.append([r["handle"], "?", "damaged", "?", "?", "?", "error: " + escape(r["error"])])
            continue
        heard = r["heard"] or ("no!" if r["announced"] is False else "no")
        state = r["state"]
        if state == "lost":
            state = "lost(" + {True: "group-alive", False: "group-gone",
                               None: "group-unknown"}[r.get("group_alive")] + ")"
        out.append([r["handle"], escape(r["session"] or "-"), state,
                    "-" if r["code"] is None else str(r["code"]), heard, age_text(r["age"]),
                    escape(r["label"] or "-")])
    sys.stdout.write(table(("HANDLE", "SESSION", "STATE", "CODE", "HEARD", "AGE", "LABEL"), out))
    return code
