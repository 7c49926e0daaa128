"""A worker's day, from the seed alone: one line of the stand-in model's
script per turn (tests/model_server.py: RUN, SLOW, SAY), so that the same
SEED gives the same day whatever the wall clock does.

A turn is one of: a tool call (a short shell step), a long turn (SLOW: the
session is generating, nudges wait), a background job nobody waits for (its
outcome is announced to the worker's inbox), a job waited for (job-wait
hears it), a block that needs the captain, a task done, or a plain reply.
"""
import hashlib
import random

# (weight, kind): how often each kind of turn comes
KINDS = ((25, "tool"), (15, "slow"), (10, "job"), (8, "job-wait"), (5, "blocked"),
         (15, "done"), (22, "say"))


def turn(rng, name, i):
    kind = rng.choices([k for _, k in KINDS], [w for w, _ in KINDS])[0]
    if kind == "tool":
        return f"RUN: sleep {rng.choice((0.2, 0.5, 1))}; echo {name} step {i}"
    if kind == "slow":
        return f"SLOW: {rng.choice((1, 2, 4, 8))}"
    if kind == "job":
        return f"RUN: job-exec --label build-{i} -- sleep {rng.randint(2, 8)}"
    if kind == "job-wait":
        return (f"RUN: h=$(job-exec --label test-{i} -- sleep {rng.randint(1, 3)})"
                ' && job-wait "$h"')
    if kind == "blocked":
        return (f"RUN: status-append \"$CREWFILE_SESSION\" blocked"
                f" 'awaiting captain: which way for step {i}?'")
    if kind == "done":
        return f"RUN: status-append \"$CREWFILE_SESSION\" done 'task {i} shipped'"
    return f"SAY: {name} step {i} noted"


def script(seed, name, turns):
    """The first *turns* lines of worker NAME's day under SEED."""
    rng = random.Random(f"{seed}:{name}")
    return [turn(rng, name, i) for i in range(turns)]


def digest(scripts):
    """One short fingerprint of every worker's day: equal for equal seeds."""
    h = hashlib.sha256()
    for name in sorted(scripts):
        h.update(name.encode() + b"\0" + "\n".join(scripts[name]).encode() + b"\0")
    return h.hexdigest()[:16]
