"""What the listing commands print: protocol.md's "Output" (a table, --json, --json-lines)."""
from crewfile.core.errors import UsageError
from crewfile.core.jsonio import dumps


def age_text(seconds):
    """An AGE column: '-', '42s', '5m', '3h', '2d'."""
    if seconds is None:
        return "-"
    seconds = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def table(header, rows):
    """The text of an aligned table, header first (rows: lists of strings)."""
    rows = [list(header)] + [list(r) for r in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header) - 1)]
    return "".join("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1] + "\n"
                   for r in rows)


def json_document(objects):
    return dumps(list(objects)) + "\n"


def json_lines(objects):
    return "".join(dumps(o) + "\n" for o in objects)


def json_choice(args, objects):
    """The JSON text for --json or --json-lines, or None when neither was given."""
    if args.json and args.json_lines:
        raise UsageError("--json and --json-lines exclude each other")
    if args.json:
        return json_document(objects)
    if args.json_lines:
        return json_lines(objects)
    return None
