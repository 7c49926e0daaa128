import sys

from crewfile.asides.evidence import refuse_hand_written
from crewfile.core import records
from crewfile.core.errors import BadInput, Refused, USAGE
from crewfile.core.kinds import GUARDED
from crewfile.core.paths import Crew
from crewfile.session.sessions import Session


def run(args):
    sess = Session(Crew(args.dir), args.name)
    text = " ".join(args.text or [])
    if args.kind in GUARDED:
        refuse_hand_written(sess, args.kind, "status-append")
    if args.kind != "-" and text != "-":
        sess.append(args.kind, text)
        return 0
    return _from_stdin(sess, None if args.kind == "-" else args.kind, sys.stdin.buffer)


def _from_stdin(sess, kind, stream):
    bad = 0
    for n, raw in enumerate(records.bounded_lines(stream), 1):
        if raw is None:
            bad += 1
            sys.stderr.write(f"status-append: stdin line {n}: longer than {records.MAX_LINE}"
                             " bytes, skipped\n")
            continue
        line = raw.decode("utf-8", "surrogateescape")
        try:
            if kind is None:
                k, _, text = line.partition(": ")
                if k.strip() in GUARDED:
                    refuse_hand_written(sess, k.strip(), "status-append")
                sess.append_lines([records.new_line(k.strip(), text)])
            else:
                sess.append_lines([records.new_line(kind, line)])
        except (BadInput, Refused) as e:
            bad += 1
            sys.stderr.write(f"status-append: stdin line {n}: {e}\n")
    return USAGE if bad else 0
