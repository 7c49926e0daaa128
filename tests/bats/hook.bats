#!/usr/bin/env bats
# crew-hook as Claude Code runs it: a JSON payload on stdin, exit 0, JSON on stdout.

setup() {
  load common
  crew_setup
  export CREWFILE_SESSION=w1
}

ev() {  # ev EVENT [extra JSON members]
  printf '{"session_id":"s-1","cwd":"%s","transcript_path":"/t/s-1.jsonl","hook_event_name":"%s"%s}' \
    "$BATS_TEST_TMPDIR" "$1" "${2:+,$2}"
}

@test "a whole turn writes started, captain, turn-started, turn-ended, ended" {
  run crew-hook <<<"$(ev SessionStart '"source":"startup"')"
  assert_success
  assert_output ''
  ev UserPromptSubmit '"prompt":"fix the build"' | crew-hook
  ev Stop '"stop_hook_active":false' | crew-hook
  ev Notification '"notification_type":"idle_prompt","message":"waiting"' | crew-hook
  ev SessionEnd '"reason":"prompt_input_exit"' | crew-hook
  run cut -d' ' -f2- "$CREWFILE_DIR/sessions/w1/status"
  assert_output "registered: kind=crew
started: startup
captain: fix the build
turn-started
turn-ended
idle
ended: prompt_input_exit"
  run grep -c '"agent_session_id": "s-1"' "$CREWFILE_DIR/sessions/w1/meta"
  assert_output 1
}

@test "a notice posted with flock(1) reaches the next prompt's additionalContext" {
  session-add w1
  flock "$CREWFILE_DIR/sessions/w1/lock" sh -c \
    "echo '2026-11-29T22:01:17.123Z job: 1-2-3 j-9 ended: exit 0' >> '$CREWFILE_DIR/sessions/w1/inbox'"
  run crew-hook <<<"$(ev UserPromptSubmit '"prompt":"next"')"
  assert_success
  assert_output --partial '"hookEventName": "UserPromptSubmit"'
  assert_output --partial 'crewfile notice: job j-9 ended: exit 0 (posted 2026-11-29T22:01:17.123Z, id 1-2-3)'
  run inbox-drain w1
  assert_output ''
}

@test "the guard denies aside-done in a Bash command, exit 0" {
  session-add w1 --kind aside
  run crew-hook <<<"$(ev PreToolUse '"tool_name":"Bash","tool_input":{"command":"aside-done w1"}')"
  assert_success
  assert_output --partial '"permissionDecision": "deny"'
  run status-show w1
  assert_line --regexp "^last: .* problem: self-conclusion refused: the agent ran .aside-done w1.; denied\$"
}

@test "garbage, an unknown event and no crew directory: exit 0, one line on stderr at most" {
  run crew-hook <<<'not json'
  assert_success
  assert_output 'crew-hook: malformed payload: not JSON'
  run crew-hook <<<'{"hook_event_name":"FutureEvent"}'
  assert_success
  assert_output ''
  CREWFILE_SESSION= run crew-hook <<<"$(ev Stop)"
  assert_success
  assert_output --partial 'no crewfile session for agent session s-1'
  [ ! -e "$CREWFILE_DIR" ]
}

@test "Codex notify: the JSON is the last argument" {
  run crew-hook '{"type":"agent-turn-complete","thread-id":"t1","turn-id":"u1","cwd":"/tmp"}'
  assert_success
  run status-show w1
  assert_line --regexp '^last: .* turn-ended$'
}

@test "--install merges into an existing settings.json and is idempotent" {
  d="$BATS_TEST_TMPDIR/.claude"
  mkdir -p "$d"
  echo '{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"notify-send done"}]}]}}' > "$d/settings.json"
  run crew-hook --install "$d" --dry-run
  assert_success
  assert_line "would be updated $d/settings.json"
  run crew-hook --install "$d"
  assert_success
  assert_line "updated $d/settings.json"
  first=$(cat "$d/settings.json")
  run crew-hook --install "$d"
  assert_line "unchanged $d/settings.json"
  [ "$first" = "$(cat "$d/settings.json")" ]
  run grep -c 'notify-send done' "$d/settings.json"
  assert_output 1
  [ -f "$d/skills/aside/SKILL.md" ] && [ -f "$d/commands/aside-done.md" ]
}
