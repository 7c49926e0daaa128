import sys

from crewfile.cli import crew
from crewfile.core.errors import CrewfileError, PARTIAL
from crewfile.core.output import age_text, json_document, table
from crewfile.core.text import escape
from crewfile.session.sessions import Session, names, state
from crewfile.session.verdict import Look

HELP = """\
session-ls
The crew at a glance: one line per registered session.

  --json   a JSON array of the objects status-show --json prints
  --all    include ended sessions (default: only those not ended)

Columns: NAME KIND EXEMPT LIVE GEN AGE LAST CWD. A session whose files cannot
be used is listed with `?` and named on stderr: exit 5
(docs/commands/session-ls.md).

Example: session-ls | awk '$4 == "no"'    # sessions whose window is gone
"""


def run(args):
    c = crew(args)
    look = Look()
    rows = []
    bad = 0
    for name in names(c):
        try:
            st = state(Session(c, name), look)
        except CrewfileError as e:
            sys.stderr.write(f"session-ls: {name}: {escape(str(e))}\n")
            rows.append({"name": name, "error": str(e)})
            bad += 1
            continue
        if st["ended"] and not args.all:
            continue
        if st["warning"]:
            sys.stderr.write(f"session-ls: {name}: {escape(st['warning'])}\n")
        if st["why"] in FIXABLE:
            sys.stderr.write(f"session-ls: {name}: live unknown: {st['why']}:"
                             f" {escape(st['why_detail'] or '')}\n")
        rows.append(st)
    if args.json:
        sys.stdout.write(json_document(rows))
        return PARTIAL if bad else 0
    out = []
    for st in rows:
        if "error" in st:
            out.append([st["name"], "?", "?", "?", "?", "?",
                        "error: " + escape(st["error"]), "?"])
            continue
        last = st["last_kind"] or "-"
        if st["last_text"]:
            last += ": " + st["last_text"]
        out.append([st["name"], st["kind"], "yes" if st["exempt"] else "no",
                    _live(st), st["generating"], age_text(st["age"]),
                    escape(last)[:60], escape(st["cwd"] or "-")])
    sys.stdout.write(table(("NAME", "KIND", "EXEMPT", "LIVE", "GEN", "AGE", "LAST", "CWD"), out))
    return PARTIAL if bad else 0


FIXABLE = ("agent-unknown", "server-unknown")     # verdict.AGENT_UNKNOWN, SERVER_UNKNOWN


def _live(st):
    return "stopped" if st["live"] == "yes" and st["stopped"] == "yes" else st["live"]
