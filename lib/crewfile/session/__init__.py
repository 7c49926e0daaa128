"""What a session is now, and reaching it, floor 3: its registration and status
log, the verdict (live, generating, dialog, tree), the processes and tmux panes
behind it, and delivery, the one way crewfile types into a pane.

  fromregistry  Registering (or repairing) a session from the agent CLI's own registry.
  delivery  Typing text into a session's pane, safely: the one way crewfile speaks to an agent.
  ownloop   The session's own voice: Claude Code's own cron jobs and /goal, armed or not.
  prompt    Reading an agent's prompt line off its pane's screen, and the captain check
            (captain_at: a key pressed in the pane's window, or a draft on that line).
  reader    A session's files read: metadata, status log, the state a view shows (no lock, no write).
  sessions  Sessions written: registration, the status log's and the metadata's one writer.
  tmux      Talking to tmux: a session's own server, else CREWFILE_TMUX's, else the current client's.
  tmuxseen  What one look at a tmux server found: its state, identity and panes.
  verdict   What a session is now: the one answer every command asks for.
  window    A session's tmux window: opened with its agent in it, its scrollback kept.
"""
