#!/usr/bin/env bats
# Nudges as a shell user runs them, on a private tmux server.
bats_require_minimum_version 1.5.0

setup() {
  load common
  crew_setup
  private_tmux
  tmux -S "$CREWFILE_TMUX" -f /dev/null new-session -d -s crew -x 160 -y 30
}

teardown() {
  [ -n "$HOLDER" ] && kill -- "-$HOLDER" 2>/dev/null
  private_tmux_teardown
}

agent() {   # agent NAME: a fake agent in a window, registered; prints its pane
  local pane
  pane="$(tmux -S "$CREWFILE_TMUX" new-window -d -t crew -n "$1" -P -F '#{pane_id}' \
    -e "CREWFILE_SESSION=$1" -e "CREWFILE_DIR=$CREWFILE_DIR" "$BATS_TEST_DIRNAME/../fake-agent")"
  session-add "$1" --tmux "$pane" --cwd "$BATS_TEST_TMPDIR" \
    --pid "$(tmux -S "$CREWFILE_TMUX" display -p -t "$pane" '#{pane_pid}')" >/dev/null
  wait_screen "$pane" 'ready>'
  echo "$pane"
}

wait_screen() {   # wait_screen PANE TEXT
  for _ in $(seq 500); do
    tmux -S "$CREWFILE_TMUX" capture-pane -p -t "$1" | grep -qF -- "$2" && return 0
    sleep 0.02
  done
  return 1
}

tick_until() {    # tick_until WORD: run nudge-tick until an outcome line holds WORD
  for _ in $(seq 200); do
    nudge-tick | grep -qF -- "$1" && return 0
    sleep 0.02
  done
  return 1
}

@test "add, refuse a second, replace, list, remove" {
  session-add w1 --tmux %99
  run --separate-stderr nudge-add --session w1 --every 60 --message 'keep going'
  assert_success
  id="$output"
  [[ "$stderr" == "nudge-add: note: w1 is not live ("*"): when the nudge is due, a tick disarms the schedule unless the session is live again by then" ]]
  run nudge-add --session w1 --every 60 --message 'again'
  assert_failure 1
  assert_output --partial "already has schedule $id"
  run --separate-stderr nudge-add --session w1 --every 30 --message 'again' --replace
  assert_output "$id"
  run nudge-ls
  assert_line --index 1 --regexp "^$id +[^ ]+ +w1 +30s +0/100 +yes +- +- +- +0 +-$"
  run nudge-rm "$id"
  assert_success
  run nudge-rm "$id"
  assert_failure 3
}

@test "a due nudge is typed literally into an idle agent and recorded" {
  pane="$(agent w1)"
  nudge-add --session w1 --every 1 --message "-x 'q' \"dq\" \$(id) a;" --max 2
  tick_until delivered
  wait_screen "$pane" "agent: ok"
  run grep -c '^.* captain: -x '"'"'q'"'"' "dq" \$(id) a;$' "$CREWFILE_DIR/sessions/w1/status"
  assert_output 1
  run grep -E ' nudge: n[0-9a-f]+ attempt 1/2: delivered$' "$CREWFILE_DIR/sessions/w1/status"
  assert_success
}

@test "a target whose window is gone: refused and disarmed, nothing typed" {
  pane="$(agent w1)"
  other="$(agent w2)"
  id="$(nudge-add --session w1 --every 1 --message 'wake up')"
  tmux -S "$CREWFILE_TMUX" kill-pane -t "$pane"
  tick_until disarmed
  run nudge-ls --json
  assert_output --partial '"armed": false'
  run grep -c captain "$CREWFILE_DIR/sessions/w2/status"
  assert_output 0
  run grep nudge-disarmed "$CREWFILE_DIR/sessions/w1/status"
  assert_output --partial "$id refused and disarmed: not-live"
}

@test "an overlapping tick exits 1 at once and does nothing" {
  session-add w1 --tmux %99
  nudge-add --session w1 --every 1 --message 'x' >/dev/null
  mkdir -p "$CREWFILE_DIR/locks"
  setsid flock -o "$CREWFILE_DIR/locks/nudge-tick" sleep 60 >/dev/null 2>&1 3>&- &
  HOLDER=$!
  while flock -n "$CREWFILE_DIR/locks/nudge-tick" true; do sleep 0.01; done
  before="$(cat "$CREWFILE_DIR"/nudges/*)"
  run nudge-tick
  assert_failure 1
  assert_output ''
  assert_equal "$(cat "$CREWFILE_DIR"/nudges/*)" "$before"
}
