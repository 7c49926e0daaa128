"""The captain's conclusion in each agent CLI, through crew-hook's own entry
(hook.handle) with payloads and transcript lines shaped as the real CLIs
write them (captured with Codex 0.171.0 and Gemini CLI 0.61.0; the real
CLIs run in tests/test_aside_agents_e2e.py): the prompt hook records the
captain-done with its evidence, and the agent's own transcript decides
whether it is believed. Also the one backward reader on transcripts (any
line length, outside the crew directory) and on the acts file (inside it).
"""
import json
import os
import tomllib
import uuid

import pytest

from conftest import believed_once_caught_up, captain_keys, captain_types
from crewfile.asides import aside, evidence
from crewfile.core import logfile
from crewfile.core.errors import SystemFailure
from crewfile.hooks.hook import handle
from crewfile.core.logfile import TailStats
from crewfile.session.sessions import Session
from crewfile.agents import gemini
from crewfile.agents.install import shipped


def kinds(sess):
    return [(r.kind, r.text) for r in sess.last_records(100, TailStats())
            if r.kind not in ("registered", "started", "turn-started")]


def append(path, entry):
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry, separators=(",", ":")) + "\n")


@pytest.fixture
def aside_of(crew, tmp_path, aside_window):
    """register(name, agent): an aside whose SessionStart ran with *agent*'s hook,
    and the captain at a terminal (its prompts are typed there first: captain_keys)."""
    def make(name, agent, transcript):
        aside_window(name)
        hook(crew, agent, name, {"hook_event_name": "SessionStart", "source": "startup",
                                 "session_id": str(uuid.uuid4()), "cwd": str(tmp_path),
                                 "transcript_path": transcript})
        return Session(crew, name)
    return make


@pytest.fixture
def no_wait(monkeypatch):
    """A prompt not (yet) the conclusion is judged at once, not waited for."""
    monkeypatch.setattr(evidence, "TRANSCRIPT_WAIT", 0.0)


def hook(crew, agent, name, payload):
    reply = handle(json.dumps(payload), {"CREWFILE_DIR": crew.root, "CREWFILE_SESSION": name},
                   agent=agent)
    assert reply.code == 0 and not reply.err, reply.err
    return reply


# --- Codex: the $aside-done skill, the rollout's newest UserMessage ------------------

def codex_user_message(path, turn, text, skill=False):
    """The rollout line Codex writes for a captain's message (observed)."""
    content = [{"type": "text", "text": text, "text_elements": []}]
    if skill:
        content.append({"type": "skill", "name": "aside-done", "path": "/x/SKILL.md"})
    append(path, {"timestamp": "2026-11-30T22:45:54.010Z", "ordinal": 9, "type": "event_msg",
                  "payload": {"type": "item_completed", "thread_id": "t", "turn_id": turn,
                              "item": {"type": "UserMessage", "id": str(uuid.uuid4()),
                                       "content": content}}})
    # and the model-facing copy, which is not the one read
    append(path, {"type": "response_item", "payload": {
        "type": "message", "role": "user", "content": [{"type": "input_text", "text": text}],
        "internal_chat_message_metadata_passthrough": {"turn_id": turn}}})


def codex_types(crew, sess, text, turn=None):
    """The prompt hook, then the rollout; *turn*: the running turn's id (a
    message sent while the agent works is steered into that turn)."""
    turn = turn or str(uuid.uuid4())
    path = sess.meta["transcript_path"]
    captain_keys(sess, text + "\r")
    hook(crew, "codex", sess.name, {"hook_event_name": "UserPromptSubmit", "turn_id": turn,
                                    "session_id": "s", "transcript_path": path, "prompt": text})
    codex_user_message(path, turn, text, skill=text.startswith("$aside-done"))
    return turn


def test_codex_the_captains_skill_mention_concludes(crew, aside_of, tmp_path, no_wait):
    sess = aside_of("cx", "codex", str(tmp_path / "rollout.jsonl"))
    assert sess.meta["agent"] == "codex"
    codex_types(crew, sess, "let's talk")
    codex_types(crew, sess, "$aside-done  ship it")
    assert kinds(sess)[-1] == ("captain-done", "ship it")
    st = aside.scan(sess)
    rec = st.act
    assert evidence.evidence_of(sess, rec).partition(" keys ")[0] == "prompt -"
    assert aside.believed(sess, aside.scan(sess)) is None
    # The captain talks again: the rollout's newest message is not the conclusion.
    codex_user_message(sess.meta["transcript_path"], "later", "one more thing")
    assert evidence.verdict(sess, rec, st.since) == (
        "the agent's transcript does not hold that prompt as the $aside-done command")


def test_codex_a_conclusion_steered_into_a_running_turn_counts(crew, aside_of, tmp_path,
                                                                no_wait):
    """Enter while Codex works steers the message into the running turn: its
    prompt hook gets that turn's turn_id again (observed with 0.171.0)."""
    sess = aside_of("cx", "codex", str(tmp_path / "rollout.jsonl"))
    turn = codex_types(crew, sess, "look into the retries")
    codex_types(crew, sess, "$aside-done steered", turn=turn)
    assert kinds(sess)[-1] == ("captain-done", "steered")
    assert aside.believed(sess, aside.scan(sess)) is None
    codex_types(crew, sess, "no, wait", turn=turn)              # and steered back out
    assert kinds(sess)[-1] == ("captain", "no, wait")
    assert aside.scan(sess).state == aside.OPEN


def test_codex_a_slash_aside_done_is_just_words_and_a_forged_payload_is_refused(
        crew, aside_of, tmp_path, no_wait):
    sess = aside_of("cx", "codex", str(tmp_path / "rollout.jsonl"))
    codex_types(crew, sess, "/aside-done")          # Codex never sends it; were it sent
    assert kinds(sess)[-1] == ("captain", "/aside-done")
    turn = codex_types(crew, sess, "talk about retries")
    path = sess.meta["transcript_path"]
    forged = {"hook_event_name": "UserPromptSubmit", "session_id": "s", "turn_id": turn,
              "transcript_path": path, "prompt": "$aside-done"}
    captain_keys(sess, "x")             # forged while the captain types: the keys stand ...
    hook(crew, "codex", "cx", forged)                   # from inside the turn: recorded ...
    assert aside.scan(sess).state == aside.CAPTAIN_CONCLUDED
    assert aside.believed(sess, aside.scan(sess)) == (  # ... never believed
        "the agent's transcript does not hold that prompt as the $aside-done command")
    hook(crew, "codex", "cx", dict(forged, transcript_path="/elsewhere.jsonl"))
    assert kinds(sess)[-1] == ("problem", "self-conclusion refused: $aside-done not recorded:"
                                          " the payload names another transcript than the"
                                          " agent's")


# --- Gemini: the /aside-done command, no prompt id, the recording's displayContent ---

def gemini_expansion(note):
    """What BeforeAgent's `prompt` holds when the captain types /aside-done NOTE:
    the shipped command's prompt, {{args}} replaced (observed)."""
    template = tomllib.loads(shipped(gemini, gemini.FILES[0]))["prompt"]
    return template.replace("{{args}}", note)


def gemini_user_entry(path, content, typed=None):
    entry = {"id": str(uuid.uuid4()), "timestamp": "2026-11-30T22:46:46.215Z", "type": "user",
             "content": [{"text": content}]}
    if typed is not None:
        entry["displayContent"] = [{"text": typed}]
    append(path, entry)
    append(path, {"$set": {"lastUpdated": "2026-11-30T22:46:46.216Z"}})


def gemini_types(crew, sess, typed):
    path = sess.meta["transcript_path"]
    command = typed.startswith("/aside-done")
    prompt = gemini_expansion(typed[len("/aside-done"):].strip()) if command else typed
    captain_keys(sess, typed + "\r")
    hook(crew, "gemini", sess.name, {"hook_event_name": "BeforeAgent", "session_id": "s",
                                     "transcript_path": path, "prompt": prompt,
                                     "timestamp": "2026-11-30T22:46:46.151Z"})
    gemini_user_entry(path, prompt, typed if command else None)


def test_gemini_the_captains_command_concludes(crew, aside_of, tmp_path, no_wait):
    path = str(tmp_path / "session.jsonl")
    append(path, {"sessionId": "s", "projectHash": "h", "kind": "main"})
    append(path, {"$set": {"messages": [{"id": "m0", "type": "user",
                                         "content": [{"text": "<session_context>x"}]}]}})
    sess = aside_of("gm", "gemini", path)
    gemini_user_entry(path, "<hook_context>crewfile: this session is the aside</hook_context>")
    gemini_types(crew, sess, "hello first")
    gemini_types(crew, sess, "/aside-done ship it")
    assert kinds(sess)[-2:] == [("captain", "hello first"), ("captain-done", "ship it")]
    st = aside.scan(sess)
    rec = st.act
    assert evidence.evidence_of(sess, rec).partition(" keys ")[0] == "prompt -"
    assert aside.believed(sess, aside.scan(sess)) is None
    # the hand-over's tool call: its response is a user entry, not a captain prompt
    append(path, {"id": str(uuid.uuid4()), "type": "user", "content": [{"functionResponse": {
        "id": "run_shell_command_1", "name": "run_shell_command",
        "response": {"output": "reports/new/gm,1"}}}]})
    assert aside.believed(sess, aside.scan(sess)) is None
    gemini_types(crew, sess, "/aside-done")                     # a note is optional
    assert kinds(sess)[-1] == ("captain-done", "")
    gemini_types(crew, sess, "wait, one more thing")
    assert evidence.verdict(sess, rec, st.since) == (
        "the agent's transcript does not hold that prompt as the /aside-done command")


def test_gemini_a_conclusion_waits_for_the_recording_to_catch_up(crew, aside_of, tmp_path,
                                                                 monkeypatch):
    """BeforeAgent runs before Gemini CLI records the prompt, and names no
    prompt: a newest prompt that is not the conclusion may be the one before
    it, so it is looked at again (up to TRANSCRIPT_WAIT), not read as void."""
    sess = aside_of("gm", "gemini", str(tmp_path / "session.jsonl"))
    gemini_types(crew, sess, "hello first")
    path = sess.meta["transcript_path"]
    captain_keys(sess, "/aside-done\r")
    hook(crew, "gemini", "gm", {"hook_event_name": "BeforeAgent", "session_id": "s",
                                "transcript_path": path, "prompt": gemini_expansion("")})
    # It looks first while "hello first" is the newest, then the recording catches up.
    assert believed_once_caught_up(
        monkeypatch, sess, lambda: gemini_user_entry(path, gemini_expansion(""), "/aside-done")
    ) == [None]


def test_gemini_a_forged_payload_is_never_believed(crew, aside_of, tmp_path, no_wait):
    """Gemini's hook names no prompt, so a forged payload is recorded, and
    then judged by the recording alone: the newest captain prompt there is
    the one the agent is answering, not /aside-done."""
    sess = aside_of("gm", "gemini", str(tmp_path / "session.jsonl"))
    gemini_types(crew, sess, "RUN: something")
    path = sess.meta["transcript_path"]
    captain_keys(sess, "x")             # forged while the captain types: the keys stand
    hook(crew, "gemini", "gm", {"hook_event_name": "BeforeAgent", "session_id": "s",
                                "transcript_path": path, "prompt": gemini_expansion("")})
    assert aside.scan(sess).state == aside.CAPTAIN_CONCLUDED
    assert aside.believed(sess, aside.scan(sess)) == (
        "the agent's transcript does not hold that prompt as the /aside-done command")
    # The command's text typed by hand (no displayContent) is not the command either.
    gemini_user_entry(path, gemini_expansion(""))
    assert aside.believed(sess, aside.scan(sess)) is not None
    hook(crew, "gemini", "gm", {"hook_event_name": "BeforeAgent", "session_id": "s",
                                "transcript_path": "/elsewhere.jsonl", "prompt": "/aside-done"})
    assert kinds(sess)[-1] == ("problem", "self-conclusion refused: /aside-done not recorded:"
                                          " the payload names another transcript than the"
                                          " agent's")


@pytest.mark.parametrize("prompt, words", [
    (gemini_expansion("ship it"), "/aside-done ship it"),
    (gemini_expansion(""), "/aside-done"),
    (gemini_expansion("two\nlines"), "/aside-done two\nlines"),
    ("<hook_context>ctx</hook_context>\n\n" + gemini_expansion("x"), "/aside-done x"),
    ("The captain has concluded this aside by typing /aside-done, I guess",
     "The captain has concluded this aside by typing /aside-done, I guess"),
    ("hello", "hello"),
])
def test_gemini_captain_text_unexpands_the_command(prompt, words):
    assert gemini.captain_text(prompt) == words


# --- one backward reader --------------------------------------------------------------

def test_transcript_lines_of_any_length_outside_the_crew_dir(tmp_path):
    big = b"x" * (3 * logfile.BLOCK + 17)
    target = tmp_path / "real.jsonl"
    target.write_bytes(b"first\n" + big + b"\nlast\nhalf-writ")
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)                        # the user's layout: followed
    stats = TailStats()
    got = list(logfile.lines_backwards(str(link), stats, max_line=None, outside=True))
    assert got == [b"last", big, b"first"] and stats.partial == 1
    bounded = list(logfile.lines_backwards(str(target), TailStats()))
    assert bounded == [b"last", b"first"]          # the crew's own limit drops it
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(SystemFailure, match="not a regular file"):
        list(logfile.lines_backwards(str(fifo), TailStats(), outside=True))


def test_the_acts_file_is_read_through_the_one_path_opener(crew, tmp_path, aside_window):
    aside_window("a1")
    assert captain_types(crew, "a1", "/aside-done") == "captain-done"
    sess = Session(crew, "a1")
    rec = aside.scan(sess).act
    assert evidence.evidence_of(sess, rec).startswith("prompt ")
    acts = evidence.acts_path(sess)
    elsewhere = tmp_path / "acts"
    os.rename(acts, elsewhere)
    os.symlink(elsewhere, acts)                    # a link in the crew dir is never followed
    with pytest.raises(SystemFailure, match="a symlink is not followed"):
        evidence.evidence_of(sess, rec)
