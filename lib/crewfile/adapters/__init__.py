"""One module per agent CLI: how its hook events map onto crew-hook's shared
actions (hook.py) and how its replies are spelled. Adding an agent is one
new module here with the same names (see claude.py); crew-hook imports only
the one it is run for (`--agent NAME`), so start-up stays small."""
