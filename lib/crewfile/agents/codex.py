"""Codex CLI (@openai/codex): Claude-like hooks in hooks.json next to a
config layer (~/.codex/hooks.json, <repo>/.codex/hooks.json); versions,
the feature flag and hook trust: crewfile.agents.codexconf.

Source: openai/codex codex-rs/hooks (schema/generated/*.schema.json,
src/events/pre_tool_use.rs). No idle notification exists. SessionEnd is
in its schema and `codex exec` fires it at its end (reason `other`), but
0.171.0's interactive /exit fires none (the UI says
"Disconnected from this task": the thread lives on in its app-server
daemon): an ended Codex is found by its process (liveness). A 429 from the
model fires no hook at all (tests/test_codex_hooks_e2e.py). Stop's output allows no
additionalContext (the schema forbids other properties), so a primary's
wakes continue the turn as decision "block" with the text as its reason,
which Codex gives the model as the next prompt."""
from crewfile.agents import (
    additional_context as context, block as carry_on, is_conclusion, permission_deny as deny,
    whole_prompt as captain_text)

NAME = "codex"
EVENTS = {"SessionStart": "SessionStart", "UserPromptSubmit": "UserPromptSubmit",
          "PreToolUse": "PreToolUse", "PermissionRequest": "PermissionRequest",
          "PostToolUse": "PostToolUse", "Stop": "Stop", "SessionEnd": "SessionEnd",
          "SubagentStart": "Inside", "SubagentStop": "Inside"}
# Its subagents (spawn_agent, multi_agent on by default) are work inside the
# session: SubagentStart/SubagentStop, and the session's own hooks run for
# the subagent's turn with its agent_id (crewfile.hooks.hook.SUBAGENT_TURN).
SHELL_TOOLS = ("Bash",)
# Observed (0.171.0, tmux capture-pane -e): the empty prompt line is
# `› Ask Codex to do anything` (the suggestion varies) drawn dim, ESC[2m;
# typed text is drawn plain.
PLACEHOLDER = "2"
NOTIFICATIONS = {}

HOOKS_FILE = "hooks.json"
INSTALL = (("SessionStart", None), ("UserPromptSubmit", None), ("PreToolUse", "Bash"),
           ("PermissionRequest", None), ("PostToolUse", None), ("Stop", None),
           ("SubagentStart", None), ("SubagentStop", None), ("SessionEnd", None))
TIMEOUT = 10         # seconds
FILES = ("skills/aside-done/SKILL.md", "skills/aside-done/agents/openai.yaml")  # crewfile/agents/files/codex/

# SessionEnd came only at `codex exec`'s end, reason `other`; how it ends a
# session hung up on is not known, and `other` names no deliberate end.
NOT_ON_PURPOSE = frozenset({"other"})
HOOKS_AT_START = False           # its SessionStart runs at the first prompt
# ... and the typed text stays on its prompt line until that hook has run,
# while an Enter pressed meanwhile is taken as the same prompt again (seen in
# every soak start on a loaded machine: tests/CODEX_FINDINGS.md). So the text
# still shown is no sign its first Enter was dropped: delivery waits for the
# hook's record and never presses Enter twice (crewfile.session.delivery).
START_WITH_FIRST_PROMPT = True
RESUME = "resume {id}"           # a subcommand (codex resume --help, 0.171.0)


def install_extras(directory, uninstall=False):
    """The feature flag its version needs, its hook trust (crewfile.agents.codexconf)."""
    from crewfile.agents.codexconf import plan
    return plan(directory, uninstall)


# The captain's conclusion (crewfile.asides.evidence). Codex has no custom slash
# commands since 0.117 (custom prompts were removed; `/aside-done` is
# "Unrecognized command" and never sent, observed with 0.171.0): the captain
# mentions the skill FILES installs, `$aside-done`, which the skill's
# agents/openai.yaml keeps out of the model's own choice. The rollout
# (transcript_path) records each message of the captain as an
# item_completed UserMessage with an id of its own. The prompt hook's
# turn_id names no message: a message sent while the agent works (Enter
# steers it into the running turn) comes with that turn's id (observed), so
# the rule is the rollout's newest message alone, as for Gemini CLI.
CONCLUDE = "$aside-done"
PROMPT_ID = None
TRANSCRIPT_MARK = b'"UserMessage"'


def transcript_prompt(entry):
    """(message id, is `$aside-done [note]`) of a rollout entry of a
    captain's message, else None."""
    payload = entry.get("payload")
    if entry.get("type") != "event_msg" or not isinstance(payload, dict) or payload.get(
            "type") != "item_completed":
        return None
    item = payload.get("item")
    if not isinstance(item, dict) or item.get("type") != "UserMessage" or not isinstance(
            item.get("id"), str) or not item["id"]:
        return None
    text = "".join(c["text"] for c in item.get("content") or ()
                   if isinstance(c, dict) and c.get("type") == "text"
                   and isinstance(c.get("text"), str))
    return item["id"], is_conclusion(text, CONCLUDE)
