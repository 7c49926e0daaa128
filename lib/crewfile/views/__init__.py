"""Seeing the crew, floor 8: crew-status's one line, crew-top, crew-timeline, and
what supervision costs in tokens. Nothing below imports a view.

  glance    The crew at a glance: each session's one word of state, for the views
  timeline  The crew over time, as a picture: one lane per session, from its files.
  tokens    What supervision costs: the tokens a session's agent used, from the
  top       crew-top's frame: one row per session and a footer, from the same files
  topview   crew-top's live view: the frame of top.py in curses, redrawn when a file
"""
