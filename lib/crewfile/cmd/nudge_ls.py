import sys

from crewfile.cli import crew
from crewfile.core.errors import PARTIAL
from crewfile.core.output import json_document, table
from crewfile.core.records import escape, timestamp
from crewfile.nudges.nudge import own_loops
from crewfile.nudges.schedules import load_all


def run(args):
    bad = []
    rows = [s for s in load_all(crew(args), bad) if not args.user or s.get("user") == args.user]
    for name, e in bad:
        sys.stderr.write(f"nudge-ls: {escape(str(e))}\n")
    errors = [{"id": name, "error": str(e)} for name, e in bad]
    rows = sorted(rows + errors, key=lambda s: s["id"])
    code = PARTIAL if bad else 0
    if args.json:
        sys.stdout.write(json_document(rows))
        return code
    out = []
    own = own_loops(crew(args), [s for s in rows if "error" not in s])
    for s in rows:
        if "error" in s:
            out.append([escape(s["id"])] + ["?"] * 9 + ["error: " + escape(s["error"])])
            continue
        session = s.get("session") or s.get("session_key") or s.get("agent_session_id") or "-"
        out.append([escape(c) for c in (
            s["id"], s.get("user") or "-", session, f"{s['every']}s",
            f"{s['attempts']}/{s['max']}", "yes" if s.get("armed") else "no",
            s.get("last_attempt") or "-", s.get("last_outcome") or "-",
            timestamp(s["until"]) if s.get("until") is not None else "-",
            "-" if own.get(s["id"]) is None else str(own[s["id"]]),
            s.get("last_reason") or "-")])
    sys.stdout.write(table(("ID", "USER", "SESSION", "EVERY", "ATTEMPTS", "ARMED", "LAST",
                            "OUTCOME", "UNTIL", "OWN", "REASON"), out))
    return code
