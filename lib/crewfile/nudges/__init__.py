"""Scheduled nudges, floor 4: schedules as files, and the tick that types a due
message only into the live, idle conversation it belongs to.

  nudge       Scheduled nudges: a message typed into an idle session when nobody else will.
  nudgewatch  nudge-tick --watch: tick whenever a target's status log or a schedule
  schedules   Nudge schedules: the files nudges/ID, one per (user, session).
"""
