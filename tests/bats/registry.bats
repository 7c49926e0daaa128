#!/usr/bin/env bats
# Registering from the agent CLI's own registry, as a shell user does it: the
# agent is a `sleep` in a pane, its entry written the way Claude Code writes
# sessions/PID.json (tests/test_registry_e2e.py runs the real CLI).

load common

setup() {
  crew_setup
  private_tmux
  export CLAUDE_CONFIG_DIR="$BATS_TEST_TMPDIR/claude"
  mkdir -p "$CLAUDE_CONFIG_DIR/sessions"
}

teardown() {
  private_tmux_teardown
}

# entry PID SESSIONID [PANE]: the registry file for process PID
entry() {
  local start
  start=$(awk '{sub(/.*\) /, ""); print $20}' "/proc/$1/stat")
  printf '{"pid":%s,"sessionId":"%s","procStart":"%s","kind":"interactive","tmux":"crew:@0.%s"}' \
    "$1" "$2" "$start" "${3:-}" > "$CLAUDE_CONFIG_DIR/sessions/$1.json"
}

@test "registered from the registry, then held when it disagrees" {
  pane=$(tmux -S "$CREWFILE_TMUX" -f /dev/null new-session -d -s crew -P -F '#{pane_id}' 'sleep 600')
  pid=$(tmux -S "$CREWFILE_TMUX" display-message -p -t "$pane" '#{pane_pid}')
  entry "$pid" conv-1 "$pane"
  run session-add w1 --from-registry --tmux "$pane"
  assert_success
  assert_output "w1: registered: agent process $pid, conversation conv-1, pane $pane"
  run status-show w1
  assert_line 'live: yes'
  entry "$pid" conv-2 "$pane"
  run status-show w1
  assert_line 'live: unknown'
  assert_output --partial "registry-disagrees: the agent registry says process $pid holds conversation conv-2, not conv-1"
  run session-add w1 --from-registry --tmux "$pane"
  assert_success
  assert_output "w1: repaired: agent process $pid, conversation conv-2, pane $pane"
  run status-show w1
  assert_line 'live: yes'
}

@test "no entry, a stale entry: said, nothing registered" {
  run session-add w1 --from-registry --pid 1
  assert_failure 3
  assert_output "session-add: no entry for process 1 in the agent registry $CLAUDE_CONFIG_DIR/sessions"
  printf '{"pid":1,"procStart":"123456789012"}' > "$CLAUDE_CONFIG_DIR/sessions/1.json"
  run session-add w1 --from-registry --pid 1
  assert_failure 1
  assert_output "session-add: the registry's entry $CLAUDE_CONFIG_DIR/sessions/1.json is stale: process 1 is another process now"
  run session-ls
  assert_output 'NAME  KIND  EXEMPT  LIVE  GEN  AGE  LAST  CWD'
}
