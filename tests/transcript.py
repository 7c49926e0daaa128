"""Writing an agent transcript the way Claude Code does, for the stand-ins of
the real CLI (tests/fake-agent, conftest.captain_types). Standard library only.

Claude Code runs the UserPromptSubmit hook first and only then appends the
prompt to its transcript (seen with 2.1.197): one JSON line carrying the
prompt's `promptId`; an installed slash command in its expanded form.
"""
import json

COMMAND = ("<command-message>aside-done</command-message>\n"
           "<command-name>/aside-done</command-name>\n<command-args>{args}</command-args>")


def append_prompt(path, text, prompt_id):
    """Append the prompt *text* (submitted as *prompt_id*) to the transcript at *path*."""
    stripped = text.strip()
    if stripped == "/aside-done" or (stripped.startswith("/aside-done")
                                     and stripped[len("/aside-done")].isspace()):
        content = COMMAND.format(args=stripped[len("/aside-done"):].strip())
        entry = {"promptId": prompt_id, "type": "user",
                 "message": {"role": "user", "content": content}}
    else:
        entry = {"promptId": prompt_id, "type": "user", "origin": {"kind": "human"},
                 "promptSource": "typed", "message": {"role": "user", "content": text}}
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry, separators=(",", ":")) + "\n")
