HELP = """\
crew-watch [options]
Print one event line `<ts> <session> <kind>[: <text>]` per new status record.

  --from-start       replay every record of every log from the beginning
  --once             exit when caught up (default: follow for ever)
  --cursor FILE      resume after the last event a previous run emitted, and
                     save the position there after each batch
  --poll DURATION    re-read the logs this often instead of using inotify
                     (for file systems without it, such as NFS)
  --stale DURATION   a generating session silent this long is `stale`
                     (default: 10m)
  --probe DURATION   how often liveness is probed for `lost` (default: 5s)

Sessions registered while it runs are followed from their first record.
Synthesized events: `stale` (generating and silent too long, once per
silence) and `lost` (its tmux pane or process is gone, not ended).

Example: crew-watch --cursor ~/.cache/crew-watch.cursor | wake-filter | wake-send firstmate
"""


def run(args):
    from ..cli import crew
    from ..watch import Watcher, DEFAULT_STALE, DEFAULT_PROBE
    w = Watcher(crew(args), from_start=args.from_start, cursor=args.cursor,
                stale_after=_duration(args.stale, "--stale", DEFAULT_STALE),
                probe_every=_duration(args.probe, "--probe", DEFAULT_PROBE),
                poll=_duration(args.poll, "--poll", None))
    if args.once:
        w.run_once()
        return 0
    try:
        w.follow()
    except KeyboardInterrupt:
        return 0
    finally:
        w.close()



def _duration(text, flag, default):
    from ..durations import parse_duration
    return default if text is None else parse_duration(text, flag)
