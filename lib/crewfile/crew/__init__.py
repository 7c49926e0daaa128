"""The crew as a whole, floor 7: spawning a worker in its own tree (spawn,
worktree), retiring it (retire), and crew-up, the crew's supervision as one
unit (crewup)."""
