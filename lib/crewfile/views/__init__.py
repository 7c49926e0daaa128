"""Seeing the crew, floor 8: crew-status's one line, crew-top, crew-timeline, and
what supervision costs in tokens. Nothing below imports a view.

  glance    Each session's one word of state, from the verdict and its records.
  timeline  The crew over time: one lane per session, as SVG or HTML.
  tokens    The tokens a session's agent used, from its transcript.
  top       crew-top's rows and footer, kept between frames: what a change makes stale.
  topview   crew-top's live view: the frame in curses, redrawn when a file changes.
"""
