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
    """(kind, text) of the record a captain input becomes.

    The conclusion *command* (/aside-done; Codex: $aside-done) alone or
    followed by whitespace and a note is the conclusion (kind captain-done,
    text the note); anything else is kind
    captain with the input as text. Text beyond CAPTAIN_TEXT_MAX characters
    is cut with a marker, and text that is not valid UTF-8 (a lone surrogate)
    is spelled with backslash escapes: the act must always be recorded; the
    transcript keeps the words.
    """
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

    THE entry point for prompt hooks (*agent*: the hook's adapter, Claude
    Code's by default): `captain` for an ordinary input; `captain-done` for
    the agent's conclusion command, written with its evidence (`prompt
    PROMPT_ID`, or `prompt -` for an agent whose hook names no prompt,
    checked against the agent's transcript whenever the conclusion is acted
    on, then `keys SECOND`: a person's key input in a tmux client looking at
    the session's pane, evidence.hands). A conclusion that cannot be such a
    prompt, or has no person's keys behind it, is refused at once and
    becomes a `problem: self-conclusion refused` record (kind `problem`
    returned): no prompt id from an agent that names its prompts, a payload
    naming another transcript than the session's, or a prompt id the
    transcript already holds as its newest prompt (the CLI writes a prompt
    to its transcript only after the hook: a payload replayed from inside a
    turn). Works for any kind of session. Raises NotFound for an
    unregistered session.
    """
    if agent is None:
        from crewfile.agents import claude as agent
    kind, note = parse_captain_input(text, agent.CONCLUDE)
    sess = Session(crew, name)
    if kind == CAPTAIN:
        sess.append(kind, note)
        return kind
    why = _not_a_prompt(sess, prompt_id, transcript, agent)
    keys = None
    if not why:
        why, keys = _hands_at_the_pane(sess)
    if why:
        sess.append(PROBLEM, f"{SELF_CONCLUSION}: {agent.CONCLUDE} not recorded: {why}")
        return PROBLEM
    evidence.record_act(sess, CAPTAIN_DONE, note,
                        f"{evidence.PROMPT} {prompt_id if agent.PROMPT_ID else evidence.NO_ID}"
                        f" {keys}")
    return CAPTAIN_DONE


def _hands_at_the_pane(sess):
    """evidence.hands for a prompt: typed keys reach the agent only through its own pane."""
    pane = sess.meta.get("tmux")
    if not isinstance(pane, str) or not pane:
        return "the session's tmux pane is not recorded, so no person's keys can be shown", None
    return evidence.hands(sess, pane)


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
