import sys

from crewfile.background.jobs import list_jobs
from crewfile.core.errors import PARTIAL
from crewfile.core.output import age_text, json_document, table
from crewfile.core.paths import Crew
from crewfile.core.text import escape

LOST_GROUP = {True: "group-alive", False: "group-gone", None: "group-unknown"}


def run(args):
    rows = list_jobs(Crew(args.dir), full=bool(args.json))
    bad = [r for r in rows if "error" in r]
    sys.stderr.write("".join(f"job-ls: {escape(r['error'])}\n" for r in bad))
    if args.json:
        sys.stdout.write(json_document({k: v for k, v in r.items() if k != "created" or "error" not in r}
                                       for r in rows))
    else:
        sys.stdout.write(table(("HANDLE", "SESSION", "STATE", "CODE", "HEARD", "AGE", "LABEL"),
                               map(_row, rows)))
    return PARTIAL if bad else 0


def _row(r):
    if "error" in r:
        return [r["handle"], "?", "damaged", "?", "?", "?", "error: " + escape(r["error"])]
    heard = r["heard"] or ("no!" if r["announced"] is False else "no")
    state = f"lost({LOST_GROUP[r.get('group_alive')]})" if r["state"] == "lost" else r["state"]
    return [r["handle"], escape(r["session"] or "-"), state,
            "-" if r["code"] is None else str(r["code"]), heard, age_text(r["age"]),
            escape(r["label"] or "-")]
