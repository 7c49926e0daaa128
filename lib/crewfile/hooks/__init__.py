"""The agents' hook, floor 6: crew-hook's shared core, run on every agent event,
so its imports are kept few (tests/test_layout.py holds them).

  hook    The agent hook's shared core: an agent's hook events (and Codex's notify)
  rewake  crew-hook --rewake: the agent's asyncRewake Stop hook (Claude Code), the
"""
