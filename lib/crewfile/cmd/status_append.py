HELP = """\
status-append NAME KIND [TEXT...]
Append one record `<timestamp> KIND[: TEXT]` to NAME's status log.

With KIND `-`, each line of stdin is one record written as `KIND[: TEXT]`;
with TEXT `-`, each line of stdin is the text of one KIND record. A bad
stdin line is reported on stderr and skipped; the good ones are all written,
each as it arrives; the exit code is then 2.

KIND `captain` and `captain-done` are refused (exit 1; a line on stdin:
skipped, exit 2), each attempt a `problem` record: the captain's words are
written only by the agent's prompt hook, aside-say and aside-done.

Example: status-append w1 paused awaiting captain
         make 2>&1 | status-append w1 log -
"""


def run(args):
    import sys
    from ..cli import crew
    from ..evidence import CAPTAIN_KINDS, refuse_hand_written
    from ..sessions import Session
    sess = Session(crew(args), args.name)
    text = " ".join(args.text or [])
    if args.kind in CAPTAIN_KINDS:
        refuse_hand_written(sess, args.kind, "status-append")
    if args.kind != "-" and text != "-":
        sess.append(args.kind, text)
        return 0
    return _from_stdin(sess, None if args.kind == "-" else args.kind, sys.stdin.buffer)


def _from_stdin(sess, kind, stream):
    import sys
    from .. import records
    from ..errors import BadInput, Refused
    from ..evidence import CAPTAIN_KINDS, refuse_hand_written
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
                k, _, text = line.partition(": ") if ": " in line else (line, "", "")
                if k.strip() in CAPTAIN_KINDS:
                    refuse_hand_written(sess, k.strip(), "status-append")
                sess.append_lines([records.new_line(k.strip(), text)])
            else:
                sess.append_lines([records.new_line(kind, line)])
        except (BadInput, Refused) as e:
            bad += 1
            sys.stderr.write(f"status-append: stdin line {n}: {e}\n")
    from ..errors import USAGE
    return USAGE if bad else 0
