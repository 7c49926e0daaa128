"""The vocabulary of status record kinds: what each kind means to the readers.

One module owns it so that no reader keeps a copy of its own (the wake
filter, the watcher, the verdict and the views all ask here). Plain dicts and
frozensets, no imports: crew-status, run by tmux every few seconds, and the
hook, run on every agent event, load it.
"""

# The newest of these decides whether a turn is running. `background`: the
# turn ended with background tasks still running (Claude Code's Stop lists
# them), so the agent goes on by itself when they end: not finished.
# `account-blocked` and `turn-failed`: the turn ended in an error (StopFailure).
TURN_STATE = {"turn-started": "yes", "waiting": "yes", "background": "yes",
              "turn-ended": "no", "idle": "no", "account-blocked": "no", "turn-failed": "no",
              "started": "no", "ended": "no", "closed": "no", "registered": "no"}

# The account stopped the turn (StopFailure: rate_limit, billing_error, ...):
# `account-blocked: ERROR until TS: MESSAGE` (`until -` where no time lifts
# it). The newest of these says whether the block stands: a `turn-ended`
# after it is a turn that succeeded, which lifts it (session/verdict.py).
ACCOUNT_STATE = frozenset({"account-blocked", "turn-ended"})

# Records of what runs inside a session but is not the session: a subagent
# stopped, a teammate idle, a task completed. They never end a turn, never
# mark the session done or idle, never wake the primary.
INSIDE = frozenset({"subagent"})

# The newest of these decides whether the session's life has ended (and so
# whether its window's closing is `lost`). `concluded` is not among them: the
# agent has handed over its report, but the window stays the captain's, who
# may type again and reopen the conversation, until aside-reconcile closes it.
LIFECYCLE = {"registered": False, "ended": True, "closed": True}

# Only these may follow `paused` (awaiting captain) while the human wait
# lasts; any other kind ends it.
KEEPS_PAUSE = frozenset({"idle", "stale", "paused", "subagent"})

# Something needs the primary (the views' `blocked`) ...
BLOCKERS = frozenset({"blocked", "problem", "error", "account-blocked"})
# ... until a record of one of these says the session moved on.
MOVES_ON = frozenset({"turn-started", "waiting", "registered", "started", "respawned", "ended",
                      "closed", "captain", "captain-done", "concluded", "nudge"})

# Who may write each kind, and what a reader that acts on one checks. A kind
# that moves a lifecycle or ends something is written only by its own
# commands, after their checks; status-append refuses it (evidence.py:
# refuse_hand_written). Yet the agent runs as the same user and can append
# any line with printf or flock(1), or run the hook with a payload of its
# own making: so no reader that acts believes such a line for being there,
# only for the evidence its command kept, facts the reader checks itself.
# Every kind not here is anyone's: ordinary progress, believed as written.
# protocol.md, "Record kinds", is this table.
#   kind: (its writers, the evidence a reader that acts on it asks for)
GUARDED = {
    "registered": ("session-add (also a repair from the agent registry), aside-open,"
                   " crew-spawn, the agent's hook (a new life)",
                   "none needed: a beginning only makes the verdict probe the agent again,"
                   " and holds an aside's conclusion back"),
    "captain": ("the agent's prompt hook, aside-say",
                "none needed: the captain's input only reopens an aside, never ends it"),
    "captain-done": ("the agent's prompt hook, aside-say, aside-done",
                     "its line in acts, and that evidence checked (the agent's own transcript,"
                     " or the caller's ancestry)"),
    "concluded": ("aside-conclude",
                  "a believed captain-done before it, and its report (the record's text) in"
                  " reports/new/ or reports/cur/, named for the aside and delivered after the"
                  " captain's newest input"),
    "closed": ("aside-reconcile; aside-open (a window not opened)",
               "its report (the record's text) accepted into reports/cur/, named for the aside,"
               " after a captain-done with its line in acts; a text that is no report only"
               " where no window was ever recorded"),
    "ended": ("the agent's hook (SessionEnd; SessionStart after a crash), crew-retire,"
              " crew-spawn (a failed start)",
              "the agent not found live by the liveness probe"),
    "respawned": ("crew-respawn", "none: no reader acts on it"),
}

# What needs the person, not the primary: the events crew-notify passes to the
# captain's phone or desktop (a session waiting for them, an aside's report
# ready, a session lost, an account or a session blocked, a problem). Turns,
# tool calls and routine progress are never among them. `lost` and `error`
# are crew-watch's synthesized kinds (see protocol.md, Event lines).
CAPTAINS = frozenset({"paused", "concluded", "lost", "blocked", "account-blocked", "problem",
                      "error"})
