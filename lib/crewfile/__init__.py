"""crewfile: a crew of agent sessions supervised through files.

Only this package touches the crew directory; the commands in bin/ are a few
lines over it (cli.py runs crewfile.cmd.<name>). protocol.md is the contract.
The packages are concepts, on floors: each imports only from the floors
below it and from itself (tests/test_layout.py holds this). Imports are at
the top of each file, but on the two paths with a start-up budget (the hook on
every agent event, crew-status as tmux's status line): there a module imports
inside a function what only some of its calls need, a comment naming the
budget, and test_layout.py lists those modules and holds both closures.
Where the status line reads, reading and writing are separate modules
(core.logfile and core.logwrite, session.reader and session.sessions), so
it loads no lock and no writer while every import stays at the top.

  floor 10 cmd/         one module per command: arguments in, one library call, exit code out
  floor 9  cli.py       the command runner: exceptions to exit codes, one line on stderr
  floor 8  views/       crew-status, crew-top, crew-timeline, tokens
  floor 7  crew/        crew-spawn, crew-retire, crew-up
  floor 6  background/  jobs: job-exec, job-wait
           hooks/       crew-hook's core, on every agent event
  floor 5  wake/        crew-watch, wake-filter, wake-send, inboxes (it believes an
                        aside's conclusion by the asides' own evidence)
  floor 4  asides/      the captain's asides and their reports
           nudges/      schedules and nudge-tick
  floor 3  session/     a session now: registration, verdict, liveness, tmux, delivery
  floor 2  agents/      facts about each agent CLI (Claude Code, Codex, Gemini CLI)
  floor 1  core/        paths, records, logs, locks, atomic writes, errors, kinds
"""
__version__ = "0.1.0"
