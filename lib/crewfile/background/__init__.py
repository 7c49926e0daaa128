"""Background commands, floor 6: a job's files, its watcher, and waiting for it,
so that each outcome is heard exactly once.

  jobs      Background jobs: a job's files, and reading them (listing).
  sweep     Removing jobs: one nothing was started from, those past their retention.
  jobwait   Waiting for a job, and the one decision: reported by a wait, or announced.
  jobwatch  Starting a job and its watcher: a process that outlives its caller.
"""
