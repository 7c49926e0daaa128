import sys

from crewfile.core.errors import PARTIAL
from crewfile.core.output import json_document, table
from crewfile.core.paths import Crew
from crewfile.core.records import escape, timestamp
from crewfile.nudges.nudge import own_loops
from crewfile.nudges.schedules import load_all


def run(args):
    c = Crew(args.dir)
    bad = []
    rows = [s for s in load_all(c, bad) if not args.user or s.get("user") == args.user]
    for name, e in bad:
        sys.stderr.write(f"nudge-ls: {escape(str(e))}\n")
        rows.append({"id": name, "error": str(e)})
    rows.sort(key=lambda s: s["id"])
    if args.json:
        sys.stdout.write(json_document(rows))
    else:
        own = own_loops(c, [s for s in rows if "error" not in s])
        sys.stdout.write(table(("ID", "USER", "SESSION", "EVERY", "ATTEMPTS", "ARMED", "LAST",
                                "OUTCOME", "UNTIL", "OWN", "REASON"),
                               (_row(s, own.get(s["id"])) for s in rows)))
    return PARTIAL if bad else 0


def _row(s, own):
    """*s*'s columns; *own*: how many of its target's own cron jobs are armed."""
    if "error" in s:
        return [escape(s["id"])] + ["?"] * 9 + ["error: " + escape(s["error"])]
    session = s.get("session") or s.get("session_key") or s.get("agent_session_id") or "-"
    return [escape(c) for c in (
        s["id"], s.get("user") or "-", session, f"{s['every']}s",
        f"{s['attempts']}/{s['max']}", "yes" if s.get("armed") else "no",
        s.get("last_attempt") or "-", s.get("last_outcome") or "-",
        timestamp(s["until"]) if s.get("until") is not None else "-",
        "-" if own is None else str(own), s.get("last_reason") or "-")]
