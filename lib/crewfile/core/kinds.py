"""The vocabulary of status record kinds, owned here so no reader keeps a copy
(docs/files/status.md says what each kind means). No imports: the hook loads it.
"""

# The newest of these decides whether a turn is running (`background`: the
# agent goes on by itself when its background tasks end). Not `compacted`:
# the agent compacts its conversation mid-turn too, and goes on working.
TURN_STATE = {"turn-started": "yes", "waiting": "yes", "background": "yes",
              "turn-ended": "no", "idle": "no", "account-blocked": "no", "turn-failed": "no",
              "started": "no", "ended": "no", "closed": "no", "registered": "no"}

# The newest of these says whether the account's block stands (a turn that
# succeeded lifts it).
ACCOUNT_STATE = frozenset({"account-blocked", "turn-ended"})

# The newest of these says whether the session's own loop (Claude Code's cron
# jobs) is armed: a `crons`; a turn's end without one, or a new life, says not.
NATIVE_STATE = frozenset({"crons", "turn-ended", "background", "started", "registered",
                          "ended", "closed"})

# What runs inside a session but is not it: ends no turn, wakes nobody.
INSIDE = frozenset({"subagent"})

# The newest of these decides whether the session's life has ended (and so if its
# window's closing is `lost`). Not `concluded`: the captain may type again.
LIFECYCLE = {"registered": False, "ended": True, "closed": True}

# Only these may follow `paused` while the human wait lasts.
KEEPS_PAUSE = frozenset({"idle", "stale", "paused", "subagent"})

# Something needs the primary (the views' `blocked`) ...
BLOCKERS = frozenset({"blocked", "problem", "error", "account-blocked"})
# ... until a record of one of these says the session moved on.
MOVES_ON = frozenset({"turn-started", "waiting", "registered", "started", "respawned", "ended",
                      "closed", "captain", "captain-done", "concluded", "nudge"})

# protocol.md's "Record kinds": kind -> (its only writers, the evidence a reader
# that acts on it asks for; the agent can append any line). Others are anyone's.
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

# protocol.md's "The agent's word": kinds that stay anyone's (a
# guard on the status line would be for show: their writers read files the
# agent writes itself), and the most a reader does with one. kind -> (who
# writes it, what a reader that acts on it believes).
AGENTS_WORD = {
    "account-blocked": ("the agent's hook (Claude Code's StopFailure), crew-watch (a Codex"
                        " turn's error read from its rollout), anyone",
                        "as written, only to hold crewfile's typing while it stands and to wake"
                        " the primary; it ends, concludes and lifts nothing"),
    "turn-failed": ("the agent's hook (Claude Code's StopFailure), crew-watch (a Codex turn's"
                    " error read from its rollout), anyone",
                    "as written, only that the turn is over and to wake the primary: no more"
                    " than the agent's own turn-ended says; it lifts no account block"),
}

# What needs the person, not the primary: the events crew-notify passes on
# (`lost` and `error` are crew-watch's synthesized kinds).
CAPTAINS = frozenset({"paused", "concluded", "lost", "blocked", "account-blocked", "problem",
                      "error"})
