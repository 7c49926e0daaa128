"""Asides, floor 4: sessions the captain drives, which only the captain's act
concludes (its evidence checked here), and their reports, a maildir.

  aside     Asides: sessions the captain drives, which only the captain can conclude.
  captain   The captain's acts: what the captain typed into a session becomes a record.
  evidence  Evidence that a captain act came from the captain, not from the aside's agent.
  reports   Aside reports: a maildir (reports/tmp, new, cur) the way qmail delivers mail.
"""
