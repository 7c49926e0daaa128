"""What the primary's model is told of its inbox: the hook's header over the
wakes it hands in, and wake-send's typed announcement (its --say default).

A module of its own so the tokens view can tell wake turns by these words
without loading the inbox and its locks: the status line's budget.
"""
WAKE_HEADER = "crewfile wake: new events for the primary (machine reports, not the user's words):"
DEFAULT_SAY = "crewfile: {n} waiting from {from}; run: inbox-drain {primary}"
