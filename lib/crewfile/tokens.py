"""What supervision costs: the tokens a session's agent used, from its
transcript (meta `transcript_path`), for crew-top's TOKENS column.

Claude Code writes one JSON line per content block of each model message,
each carrying the message's `id` and its `usage` (input_tokens,
cache_creation_input_tokens, cache_read_input_tokens, output_tokens); the
lines of one message repeat its usage, so a message counts once (its last
line). A line that is not JSON, or not of that shape, is skipped: a
transcript is another program's file. Only the last MAX_BYTES are read.
"""
import os

MAX_BYTES = 64 << 20
FIELDS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens",
          "output_tokens")


def used(path):
    """Total tokens of the messages in the transcript at *path*; None when
    there is no transcript or it cannot be read."""
    import json
    import stat
    if not path or not isinstance(path, str):
        return None
    try:            # the agent's own file, outside the crew directory: no FIFO, no hang
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (OSError, ValueError):
        return None
    f = os.fdopen(fd, "rb")
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        f.close()
        return None
    per_message = {}
    try:
        with f:
            start = max(0, os.fstat(f.fileno()).st_size - MAX_BYTES)
            f.seek(start)
            if start:
                f.readline()                    # a line cut in two by the window
            for raw in f:
                if b'"usage"' not in raw:
                    continue
                try:
                    entry = json.loads(raw)
                    msg = entry["message"]
                    usage = msg["usage"]
                    n = sum(int(usage.get(k) or 0) for k in FIELDS)
                except (ValueError, KeyError, TypeError, AttributeError):
                    continue
                per_message[msg.get("id") or f"#{len(per_message)}"] = n
    except OSError:
        return None
    return sum(per_message.values())


def text(n):
    """A TOKENS column: '-', '950', '12k', '3.4M'."""
    if n is None:
        return "-"
    if n < 1000:
        return str(n)
    if n < 1_000_000:
        return f"{n // 1000}k"
    return f"{n / 1_000_000:.1f}M"
