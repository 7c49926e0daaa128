"""The protocol's primitives, floor 1: paths, the record line and its escaper, the
append-only log, locks, atomic replace, errors and exit codes, the shapes of
JSON files, names, durations, moments, clocks, and waiting on a directory.
Nothing here knows what a session is; each module's docstring says what it owns.
"""
