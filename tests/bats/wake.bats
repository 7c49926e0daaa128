#!/usr/bin/env bats
# Wake supervision as a shell user runs it: crew-watch | wake-filter | wake-send.

setup() {
  load common
  crew_setup
  private_tmux
}

teardown() {
  [ -n "${WATCH_PID:-}" ] && kill "$WATCH_PID" 2>/dev/null || true
  [ -n "${FILTER_PID:-}" ] && kill "$FILTER_PID" 2>/dev/null || true
  private_tmux_teardown
}

wait_for_file() {   # wait_for_file FILE TEXT
  for _ in $(seq 500); do
    grep -qF -- "$2" "$1" 2>/dev/null && return 0
    sleep 0.02
  done
  cat "$1" >&2
  return 1
}

@test "crew-watch --from-start --once | wake-filter: an aside's churn is held, its conclusion passes" {
  session-add w1
  session-add design --kind aside
  for i in 1 2 3; do
    # the captain's input, as a prompt hook writes it (status-append refuses captain kinds)
    flock "$CREWFILE_DIR/sessions/design/lock" sh -c 'printf "%s captain: question %s\n" "$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)" "$1" >> "$2"' - "$i" "$CREWFILE_DIR/sessions/design/status"
    status-append design turn-started
    status-append design turn-ended
    status-append design paused awaiting captain
    status-append design idle
  done
  status-append w1 turn-started
  status-append w1 turn-ended
  status-append w1 idle
  # the conclusion, as aside-conclude leaves it: its report in reports/new/,
  # and the record naming it (status-append refuses guarded kinds)
  report="$CREWFILE_DIR/reports/new/design,1796040000.M000123P1Q1.host"
  mkdir -p "${report%/*}" && echo "the report" > "$report"
  flock "$CREWFILE_DIR/sessions/design/lock" sh -c 'printf "%s concluded: %s\n" "$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)" "$2" >> "$1"' - "$CREWFILE_DIR/sessions/design/status" "$report"
  run bash -c 'crew-watch --from-start --once | wake-filter'
  assert_success
  assert_equal "${#lines[@]}" 2
  assert_line --index 0 --regexp '^[0-9T:.-]+Z w1 turn-ended$'
  assert_line --index 1 --regexp '^[0-9T:.-]+Z design concluded: /.*/reports/new/design,1796040000\.M000123P1Q1\.host$'
  run bash -c 'crew-watch --from-start --once | wc -l'
  assert_output 21
}

@test "a following pipeline passes a record as soon as it is appended" {
  session-add w1
  mkfifo "$BATS_TEST_TMPDIR/events"
  crew-watch --from-start > "$BATS_TEST_TMPDIR/events" 3>&- &
  WATCH_PID=$!
  wake-filter < "$BATS_TEST_TMPDIR/events" > "$BATS_TEST_TMPDIR/wakes" 3>&- &
  FILTER_PID=$!
  status-append w1 turn-started
  status-append w1 blocked 'needs $(the) `password`'
  wait_for_file "$BATS_TEST_TMPDIR/wakes" 'w1 blocked: needs $(the) `password`'
  run cat "$BATS_TEST_TMPDIR/wakes"
  assert_equal "${#lines[@]}" 1
}

@test "wake-send types into a fake primary's pane literally; metacharacters are not run" {
  tmux -S "$CREWFILE_TMUX" -f /dev/null new-session -d -s crew -x 160 -y 30 \
    -e CREWFILE_SESSION=boss -e CREWFILE_DIR="$CREWFILE_DIR" "$BATS_TEST_DIRNAME/../fake-agent"
  pane="$(tmux -S "$CREWFILE_TMUX" list-panes -a -F '#{pane_id}')"
  session-add boss --kind primary --tmux "$pane" \
    --pid "$(tmux -S "$CREWFILE_TMUX" display -p -t "$pane" '#{pane_pid}')"
  session-add w1
  for _ in $(seq 500); do
    tmux -S "$CREWFILE_TMUX" capture-pane -p -t "$pane" | grep -qF 'ready>' && break
    sleep 0.02
  done
  pwned="$BATS_TEST_TMPDIR/pwned"
  printf '2026-11-29T22:01:17.123Z w1 blocked: $(touch %s)\n' "$pwned" |
    wake-send boss --window 0.1 --say "{n} from {from}: \$(touch $pwned); \`touch $pwned\` | cat;"
  for _ in $(seq 500); do
    grep -qF 'captain: 1 wake from w1' "$CREWFILE_DIR/sessions/boss/status" && break
    sleep 0.02
  done
  run grep -F "captain: 1 wake from w1: \$(touch $pwned); \`touch $pwned\` | cat;" "$CREWFILE_DIR/sessions/boss/status"
  assert_success
  assert [ ! -e "$pwned" ]
  run inbox-drain boss
  assert_success
  assert_output --regexp "^[0-9T:.-]+Z wake: [0-9a-f]+-[0-9]+-1 2026-11-29T22:01:17.123Z w1 blocked: \\\$\\(touch $pwned\\)\$"
}
