import json
import sys
import time

from crewfile.cli import crew
from crewfile.core.durations import parse_count
from crewfile.core.kinds import TURN_STATE
from crewfile.core.logfile import TailStats, records_since
from crewfile.core.moments import parse_moment
from crewfile.core.output import age_text
from crewfile.core.text import escape
from crewfile.session.sessions import Session, state

HELP = """\
status-show NAME
Show NAME's current state: last record, its age, live, generating.

  --json   one JSON object instead of `key: value` lines
  --last N   also print the last N records (default: none, at most 1000000)
  --since MOMENT   also print the records since MOMENT ('2026-11-30 09:00',
                   '09:00', 2h ago); with --last N, at most the last N of them

live, why, stopped and foreground come from verdict.py (the recorded agent
process, alive with its start time, in its pane on its own tmux server);
generating from the newest turn record, which `turn` names. Each is yes, no
or unknown; why names the reason when live is not yes, with what to do
about it. A `paused`, `blocked` or `done` record does not end a turn: an
agent writes it during its turn, which runs on until its `turn-ended` (the
hook writes it), so after `turn-started` then `paused` generating is still
yes, and nothing is typed into the session until the turn ends.

Example: status-show w1 --json | jq .generating
"""


def run(args):
    sess = Session(crew(args), args.name)
    scanned = sess.scan()
    st = state(sess, recs=scanned)
    turn = scanned.last_of(TURN_STATE)
    if st["warning"]:
        sys.stderr.write(f"status-show: {args.name}: {escape(st['warning'])}\n")
    last_n = None if args.last is None else parse_count(args.last, "--last")
    recs = None
    if args.since is not None:
        since = parse_moment(args.since, "--since", future=False)
        recs = records_since(sess.log_paths(), since, TailStats(), most=last_n)
    elif last_n:
        recs = sess.last_records(last_n, TailStats())
    lines = [r.line().rstrip("\n") for r in recs or ()]
    if args.json:
        st = dict(st)
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
    return 0
