"""The vocabulary of status record kinds: what each kind means to the readers.

One module owns it, so no reader keeps a copy; no imports (crew-status and
the hook load it). docs/files/status.md says what each kind means.
"""

# The newest of these decides whether a turn is running. `background`: the
# turn ended with background tasks still running (Claude Code's Stop lists
# them), so the agent goes on by itself when they end: not finished.
# `account-blocked` and `turn-failed`: the turn ended in an error (StopFailure).
TURN_STATE = {"turn-started": "yes", "waiting": "yes", "background": "yes",
              "turn-ended": "no", "idle": "no", "account-blocked": "no", "turn-failed": "no",
              "started": "no", "ended": "no", "closed": "no", "registered": "no"}

# The newest of these says whether the account's block stands: a
# `turn-ended` after it is a turn that succeeded, which lifts it.
ACCOUNT_STATE = frozenset({"account-blocked", "turn-ended"})

# The session's own loop (Claude Code's session-only cron jobs): the hook
# writes `crons: N crons (ID SCHEDULE: PROMPT; ...)` after the turn's record
# at a Stop whose payload lists some. The newest of these says whether the
# loop is armed: a `crons`; a turn's end without one (the next Stop shows
# none), or a new life, says it is not (session/verdict.py: own_loop).
NATIVE_STATE = frozenset({"crons", "turn-ended", "background", "started", "registered",
                          "ended", "closed"})

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

# protocol.md's "Record kinds", this table: the guarded kinds' writers, and
# the evidence a reader that acts on one checks (the agent, the same user,
# can append any line: the line alone is never believed). Every kind not
# here is anyone's, believed as written.
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

# What needs the person, not the primary: the events crew-notify passes on
# (`lost` and `error` are crew-watch's synthesized kinds).
CAPTAINS = frozenset({"paused", "concluded", "lost", "blocked", "account-blocked", "problem",
                      "error"})
