import json
import sys
import time

from crewfile.core.durations import parse_count
from crewfile.core.kinds import TURN_STATE
from crewfile.core.logfile import TailStats, last_records
from crewfile.core.moments import parse_moment
from crewfile.core.output import age_text
from crewfile.core.paths import Crew
from crewfile.core.text import escape
from crewfile.session.reader import state
from crewfile.session.sessions import Session


def run(args):
    sess = Session(Crew(args.dir), args.name)
    scanned = sess.scan()
    st = state(sess, recs=scanned)
    turn = scanned.last_of(TURN_STATE)
    if st["warning"]:
        sys.stderr.write(f"status-show: {args.name}: {escape(st['warning'])}\n")
    last_n = parse_count(args.last, "--last")
    recs = None
    if args.since is not None:
        since = parse_moment(args.since, "--since", future=False)
        recs = last_records(sess.log_paths(), last_n, TailStats(), since)
    elif last_n:
        recs = sess.last_records(last_n, TailStats())
    lines = [r.line().rstrip("\n") for r in recs or ()]
    if args.json:
        if recs is not None:
            st["records"] = lines
        sys.stdout.write(json.dumps(st) + "\n")
        return 0
    out = [f"name: {st['name']}", f"kind: {st['kind']}",
           f"exempt: {'yes' if st['exempt'] else 'no'}",
           f"last: {st['last'] or '-'}", f"age: {age_text(st['age'])}",
           f"live: {st['live']}",
           f"why: {st['why'] + ': ' + st['why_detail'] if st['why'] else '-'}",
           f"stopped: {st['stopped']}", f"foreground: {st['foreground']}",
           f"generating: {st['generating']}",
           f"turn: {turn.kind + ' ' + age_text(time.time() - turn.time) + ' ago' if turn else '-'}",
           f"ended: {'yes' if st['ended'] else 'no'}",
           f"cwd: {escape(st['cwd'] or '-')}", f"tmux: {escape(st['tmux'] or '-')}"]
    out += lines
    sys.stdout.write("\n".join(out) + "\n")
