"""Waking the primary, floor 5: crew-watch turns status records into events, the
filter keeps only what the primary must act on, the sender delivers them; each
session's inbox holds what its model is told. The teller tells the person.

  announce    Which of a session's wake notices have been announced, by either path
  cursors     The crew-watch cursor (docs/files/cursor.md): each session's position,
  inbox       A session's inbox: notices for its model, machine reports, never captain words.
  rewake      The primary's wake that needs no keystroke: a waiter the agent CLI starts
  stream      The one loop of the commands that read event lines on stdin and act on a
  tell        crew-notify: the events that need the captain (core/kinds.CAPTAINS), told
  wakefilter  wake-filter: which events are worth a turn of the primary (wakesend.py
  wakesend    wake-send: wakes (the lines wake-filter kept) posted to the primary's
  watch       crew-watch: one event line for every new status record of every session.
  words       What the primary's model is told of its inbox: the hook's header over the
"""
