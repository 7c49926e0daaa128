"""What the oldest and the newest supported Claude Code deliver, read by crewfile
the same way: recorded from the real CLIs (tests/CLAUDE_FINDINGS.md).

tests/transcripts/claude-VERSION-hooks.jsonl: every hook payload of one session
of each release (a prompt with a tool call, /aside-done, /exit), in the order
the hooks ran; long strings trimmed. 2.1.332 runs UserPromptSubmit before
UserPromptExpansion (2.1.197 the other way round).
tests/transcripts/claude-VERSION-aside-done.jsonl: that session's transcript;
2.1.332 no longer records /exit in it, and writes entries 2.1.197 did not (api-request,
api-request-blob, api-request-shape, cost-state, tools-used, atis-latch);
an api-request-blob repeats a prompt as a user-role message, with no promptId.
"""
import json
import os

import pytest

from crewfile.core import logfile
from crewfile.views import tokens
from crewfile.agents import claude
from crewfile.session.sessions import Session

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "transcripts")
RELEASES = ("2.1.197", "2.1.332")


def _payloads(version):
    with open(os.path.join(HERE, f"claude-{version}-hooks.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def _transcript_at(lines, data):
    """The recorded transcript as it stood when the hook of *data* ran: a
    prompt's hook runs before its prompt is written (a prompt already there
    is a replayed payload, and refused); the others once their turn is."""
    ids = [json.loads(line).get("promptId") for line in lines]
    pid = data.get("prompt_id")
    if pid not in ids:
        return lines if data["hook_event_name"] == "SessionEnd" else []
    first = ids.index(pid)
    if data["hook_event_name"] == "UserPromptSubmit":
        return lines[:first]
    later = [i for i in range(first, len(ids)) if ids[i] not in (None, pid)]
    return lines[:later[0]] if later else lines


def _replay(crew, run, version, tmp_path):
    """Each recorded payload piped into crew-hook as Claude Code runs it, with
    the session's transcript as it stood then; the session's records, as (kind, text)."""
    name = f"r{version.replace('.', '')}"
    with open(os.path.join(HERE, f"claude-{version}-aside-done.jsonl")) as f:
        lines = f.readlines()
    transcript = tmp_path / f"{version}.jsonl"
    for data in _payloads(version):
        if data["hook_event_name"] not in claude.EVENTS:
            continue            # UserPromptExpansion: crew-hook is not installed for it
        transcript.write_text("".join(_transcript_at(lines, data)))
        data.update(cwd=str(tmp_path), transcript_path=str(transcript))
        p = run("crew-hook", input=json.dumps(data), env={"CREWFILE_SESSION": name})
        assert (p.returncode, p.stderr) == (0, ""), (data["hook_event_name"], p.stderr)
    return [(r.kind, r.text) for r in
            Session(crew, name).last_records(100, logfile.TailStats())]


def test_both_releases_hook_payloads_write_the_same_records(crew, run, tmp_path):
    got = {v: _replay(crew, run, v, tmp_path) for v in RELEASES}
    assert got["2.1.332"] == got["2.1.197"]
    # /aside-done replayed from a recorded payload has no person's keys behind
    # it (no attached client typed it): refused as a self-conclusion, alike
    assert [k for k, _ in got["2.1.332"]] == [
        "registered", "started", "captain", "turn-started", "turn-ended",
        "problem", "turn-started", "turn-ended", "ended"]


def test_the_events_crewfile_reads_carry_the_same_fields_in_both_releases():
    fields = {v: {d["hook_event_name"]: set(d) for d in _payloads(v)} for v in RELEASES}
    for event in claude.EVENTS:
        if event in fields["2.1.197"]:
            assert fields["2.1.332"][event] == fields["2.1.197"][event], event


def test_the_new_transcript_entries_are_neither_prompts_nor_tokens():
    path = os.path.join(HERE, "claude-2.1.332-aside-done.jsonl")
    with open(path) as f:
        entries = [json.loads(line) for line in f if line.strip()]
    assert {"api-request", "api-request-blob", "cost-state"} <= {e["type"] for e in entries}
    prompts = [claude.transcript_prompt(e) for e in entries]
    found = [p for p in prompts if p is not None]
    # the typed prompt and its tool result share one promptId; /aside-done is its own
    assert [command for _, command in found] == [False, False, True, False]
    assert len({pid for pid, _ in found}) == 2
    blobs = [e for e in entries if e["type"] == "api-request-blob"
             and claude.COMMAND_MARK in json.dumps(e)]
    assert blobs and all(claude.transcript_prompt(e) is None for e in blobs)
    # three model messages of 12 tokens each (the stand-in model's usage); the
    # cost-state lines' running totals are not counted again
    assert tokens.read(path).total == 36


@pytest.mark.parametrize("version", RELEASES)
def test_the_recorded_samples_are_of_the_release_they_name(version):
    assert any(d.get("hook_event_name") == "SessionStart" for d in _payloads(version))
    if version != "2.1.197":
        with open(os.path.join(HERE, "claude-2.1.332-aside-done.jsonl")) as f:
            assert f'"version":"{version}"' in f.read()
