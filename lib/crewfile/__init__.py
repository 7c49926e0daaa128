"""crewfile: a crew of agent sessions supervised through files.

The modules are the protocol's nouns: records, locks, atomic, statuslog,
sessions, liveness (processes), tmux, verdict (what a session is now: the
one answer), prompt, delivery, inbox (and, on top of them, watch, wakefilter, wakesend,
aside, clocks, schedules, nudge, nudgewatch, jobs, hook). Only this package touches the crew directory; the
commands in bin/ are thin shells over it. See protocol.md.
"""
__version__ = "0.1.0"
