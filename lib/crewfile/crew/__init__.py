"""The crew as a whole, floor 7: spawning a worker in its own tree, retiring it,
and crew-up, which runs the crew's supervision as one unit.

  crewup    crew-up: the crew's supervision as one unit, for one crew and one primary.
  retire    crew-retire: the captain's act when a worker is done.
  spawn     crew-spawn: a crew session in one command, in a tree of its own.
  worktree  Git worktrees for crew sessions: one tree and one branch per worker.
"""
