HELP = """\
crew-watch [options]
Print one event line `<ts> <session> <kind>[: <text>]` per new status record.

  --from-start       replay every record of every log from the beginning
  --once             exit when caught up (default: follow for ever)
  --cursor FILE      resume after the last event a previous run emitted, and
                     save the position there after each batch
  --poll SECONDS     re-read the logs every SECONDS instead of using inotify
                     (for file systems without it, such as NFS)
  --stale SECONDS    a generating session silent this long is `stale`
                     (default: 600)
  --probe SECONDS    how often liveness is probed for `lost` (default: 5)

Sessions registered while it runs are followed from their first record.
Synthesized events: `stale` (generating and silent too long, once per
silence) and `lost` (its tmux pane or process is gone, not ended).

Example: crew-watch --cursor ~/.cache/crew-watch.cursor | wake-filter | wake-send firstmate
"""


def run(args):
    from ..cli import crew
    from ..watch import Watcher, DEFAULT_STALE, DEFAULT_PROBE
    w = Watcher(crew(args), from_start=args.from_start, cursor=args.cursor,
                stale_after=_seconds(args.stale, "--stale", DEFAULT_STALE),
                probe_every=_seconds(args.probe, "--probe", DEFAULT_PROBE),
                poll=_seconds(args.poll, "--poll", None))
    if args.once:
        w.run_once()
        return 0
    try:
        w.follow()
    except KeyboardInterrupt:
        return 0
    finally:
        w.close()


def _seconds(text, flag, default):
    from ..errors import BadInput
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        value = -1
    if not value > 0:
        raise BadInput(f"bad {flag} {text!r}: a number of seconds above 0")
    return value
