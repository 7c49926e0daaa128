"""The captain's acts: what the captain typed into a session becomes a record.

Every prompt hook calls record_captain_input, so this module needs only the
session and its evidence: the rest of asides (reports, windows) stays out of
the prompt's path (its start-up is measured: `make bench`).
"""
from crewfile.asides import evidence
from crewfile.asides.evidence import CAPTAIN, CAPTAIN_DONE, SELF_CONCLUSION
from crewfile.session.sessions import Session
from crewfile.agents import is_conclusion

CONCLUDE_COMMAND = "/aside-done"
CAPTAIN_TEXT_MAX = 2048           # characters kept of one captain input (escaped, < 16 KiB)
PROBLEM = "problem"


def parse_captain_input(text, command=CONCLUDE_COMMAND):
    """(kind, text) of the record a captain input becomes: captain-done (text
    the note) for the conclusion *command*, else captain."""
    if is_conclusion(text, command):
        return CAPTAIN_DONE, clip(text.strip()[len(command):].strip())
    return CAPTAIN, clip(text)


def clip(text):
    # Never refuse a captain's act over its bytes: a lone surrogate (from a
    # hook's JSON) becomes its \uXXXX spelling instead of failing the record.
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    if len(text) <= CAPTAIN_TEXT_MAX:
        return text
    return text[:CAPTAIN_TEXT_MAX] + f" [... {len(text) - CAPTAIN_TEXT_MAX} more characters]"


def record_captain_input(crew, name, text, prompt_id=None, transcript=None, agent=None):
    """Record what the captain typed into session NAME; return the kind appended.
    THE entry point for prompt hooks (*agent*: the hook's adapter, Claude Code's
    by default); the rules are docs/files/asides.md."""
    if agent is None:
        from crewfile.agents import claude as agent  # the hook's budget: another agent's hook
    kind, note = parse_captain_input(text, agent.CONCLUDE)
    sess = Session(crew, name)
    if kind == CAPTAIN:
        sess.append(kind, note)
        return kind
    why, keys = _not_a_prompt(sess, prompt_id, transcript, agent), None
    pane = sess.meta.get("tmux")
    if not why and (not isinstance(pane, str) or not pane):
        why = "the session's tmux pane is not recorded, so no person's keys can be shown"
    elif not why:
        why, keys = evidence.hands(sess, pane)    # typed keys reach the agent only in its pane
    if why:
        sess.append(PROBLEM, f"{SELF_CONCLUSION}: {agent.CONCLUDE} not recorded: {why}")
        return PROBLEM
    evidence.record_act(sess, CAPTAIN_DONE, note,
                        f"{evidence.PROMPT} {prompt_id if agent.PROMPT_ID else evidence.NO_ID}"
                        f" {keys}")
    return CAPTAIN_DONE


def _not_a_prompt(sess, prompt_id, transcript, agent):
    if agent.PROMPT_ID and (not isinstance(prompt_id, str) or not prompt_id
                            or prompt_id == evidence.NO_ID
                            or any(c.isspace() for c in prompt_id)):
        return "no prompt id: it cannot be checked against the agent's transcript"
    mine = sess.meta.get("transcript_path")
    if not mine:
        return "the agent's transcript is not recorded (no SessionStart)"
    if transcript and transcript != mine:
        return "the payload names another transcript than the agent's"
    if agent.PROMPT_ID and evidence.newest_prompt(mine, agent) == prompt_id:
        return "the agent's transcript already holds that prompt (a replayed payload)"
    return None
