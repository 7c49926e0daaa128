"""The vocabulary of status record kinds: what each kind means to the readers.

One module owns it so that no reader keeps a copy of its own (the wake
filter, the watcher, the verdict and the views all ask here). Plain dicts and
frozensets, no imports: crew-status, run by tmux every few seconds, and the
hook, run on every agent event, load it.
"""

# The newest of these decides whether a turn is running.
TURN_STATE = {"turn-started": "yes", "waiting": "yes", "turn-ended": "no", "idle": "no",
              "started": "no", "ended": "no", "closed": "no", "registered": "no"}

# The newest of these decides whether the session's life has ended (and so
# whether its window's closing is `lost`). `concluded` is not among them: the
# agent has handed over its report, but the window stays the captain's, who
# may type again and reopen the conversation, until aside-reconcile closes it.
LIFECYCLE = {"registered": False, "ended": True, "closed": True}

# Only these may follow `paused` (awaiting captain) while the human wait
# lasts; any other kind ends it.
KEEPS_PAUSE = frozenset({"idle", "stale", "paused"})
