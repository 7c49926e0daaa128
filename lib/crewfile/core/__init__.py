"""The protocol's primitives, floor 1: paths, the record line and its escaper, the
append-only log, locks, atomic replace, errors and exit codes, the shapes of
JSON files, names, durations, moments, clocks, and waiting on a directory.
Nothing here knows what a session is.

  atomic     The one atomic-replace helper: temporary name, fsync, rename, fsync dir.
  clocks     The clocks a schedule keeps: wall time, CLOCK_BOOTTIME and the boot id.
  durations  The command line's numbers: one duration grammar, one count grammar.
  errors     One exception base and one table from exception to exit code.
  jsonio     JSON for the hot path, without the json package's start-up cost.
  kinds      The vocabulary of status record kinds: what each kind means to the readers.
  liveness   Processes as /proc shows them: start times, parents, stopped, foreground.
  locks      The one lock helper: flock(2) on a lock file that is never unlinked.
  logfile    An append-only file of records: the one writer and the one tail reader.
  moments    Moments a person types (`--until`, `--since`): one strict grammar.
  names      Validation of names that become path components (sessions, handles).
  notify     inotify, or polling when it cannot be had: the one way a waiting command
  output     What the listing commands print, in one grammar:
  paths      The crew directory's layout, defined once.
  pinned     How crewfile names itself in what other programs run (the hooks in a
  records    The record line: `<RFC 3339 UTC timestamp, ms> <kind>[: <text>]`.
  shapes     The shape of every JSON file crewfile reads, checked in one place per kind.
  text       The one escaper: what crewfile did not write itself reaches a record line or
"""
