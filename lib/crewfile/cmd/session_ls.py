import sys

from crewfile.core.errors import CrewfileError, PARTIAL
from crewfile.core.output import age_text, json_document, table
from crewfile.core.paths import Crew
from crewfile.core.text import escape
from crewfile.session.reader import names, state
from crewfile.session.sessions import Session
from crewfile.session.verdict import AGENT_UNKNOWN, SERVER_UNKNOWN, Look


def run(args):
    c = Crew(args.dir)
    look = Look()
    rows = []
    for name in names(c):
        try:
            st = state(Session(c, name), look)
        except CrewfileError as e:
            sys.stderr.write(f"session-ls: {name}: {escape(str(e))}\n")
            rows.append({"name": name, "error": str(e)})
            continue
        if st["ended"] and not args.all:
            continue
        if st["warning"]:
            sys.stderr.write(f"session-ls: {name}: {escape(st['warning'])}\n")
        if st["why"] in (AGENT_UNKNOWN, SERVER_UNKNOWN):      # what session-add can fix
            sys.stderr.write(f"session-ls: {name}: live unknown: {st['why']}:"
                             f" {escape(st['why_detail'] or '')}\n")
        rows.append(st)
    sys.stdout.write(json_document(rows) if args.json else table(
        ("NAME", "KIND", "EXEMPT", "LIVE", "GEN", "AGE", "LAST", "CWD"), map(_row, rows)))
    return PARTIAL if any("error" in st for st in rows) else 0


def _row(st):
    if "error" in st:
        return [st["name"], "?", "?", "?", "?", "?", "error: " + escape(st["error"]), "?"]
    last = st["last_kind"] or "-"
    if st["last_text"]:
        last += ": " + st["last_text"]
    live = "stopped" if st["live"] == "yes" and st["stopped"] == "yes" else st["live"]
    return [st["name"], st["kind"], "yes" if st["exempt"] else "no", live, st["generating"],
            age_text(st["age"]), escape(last)[:60], escape(st["cwd"] or "-")]
