#!/usr/bin/env bats
# The foundation's commands as a shell user runs them.

setup() {
  load common
  crew_setup
}

@test "register, append, show" {
  run session-add w1 --cwd "$BATS_TEST_TMPDIR"
  assert_success
  run status-append w1 paused awaiting captain
  assert_success
  run status-show w1
  assert_success
  assert_line --regexp '^last: [0-9T:.-]+Z paused: awaiting captain$'
  assert_line 'generating: no'
  assert_line 'live: unknown'
}

@test "a shell writer with flock(1) interleaves with status-append" {
  session-add w1
  lock="$CREWFILE_DIR/sessions/w1/lock"
  log="$CREWFILE_DIR/sessions/w1/status"
  for i in 1 2 3 4 5; do
    flock "$lock" sh -c "echo \"\$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ) note: shell $i\" >> '$log'" &
    status-append w1 note "python $i" &
  done
  wait
  run grep -c ' note: ' "$log"
  assert_output 10
  run status-show w1 --json
  assert_success
  refute_output --partial '"warning": "skipped'
}

@test "records piped in through stdin, bad lines reported, good ones kept" {
  session-add w1
  run bash -c 'printf "idle\nBad Kind\nblocked: needs db\n" | status-append w1 -'
  assert_failure 2
  assert_output --partial 'stdin line 2'
  run grep -c -E ' (idle|blocked: needs db)$' "$CREWFILE_DIR/sessions/w1/status"
  assert_output 2
}

@test "a command's output pipes into grep and awk" {
  session-add w1
  session-add w2
  status-append w2 blocked waiting for review
  run bash -c "session-ls | awk 'NR > 1 { print \$1 }' | sort"
  assert_output $'w1\nw2'
  run bash -c "status-show w2 --last 5 | grep -c 'blocked: waiting for review'"
  assert_output 2
}

@test "errors: one line, documented codes" {
  run status-append nobody idle
  assert_failure 3
  assert_output "status-append: no session 'nobody' (register it with session-add)"
  run session-add '../x'
  assert_failure 2
  run session-add w1 --kind robot
  assert_failure 2
  assert_output "session-add: bad kind 'robot': one of crew, aside, primary"
  session-add w1
  run session-add w1
  assert_failure 1
}

@test "the crew directory is private" {
  session-add w1
  run stat -c %a "$CREWFILE_DIR" "$CREWFILE_DIR/sessions/w1" "$CREWFILE_DIR/sessions/w1/status"
  assert_output $'700\n700\n600'
}

@test "a session in a real tmux pane is live until its pane dies" {
  sockdir=$(mktemp -d /tmp/cf-XXXX)
  export CREWFILE_TMUX="$sockdir/s"
  tmux -S "$CREWFILE_TMUX" -f /dev/null new-session -d -s crew 'sleep 600'
  session-add w1 --tmux crew:0 --pid "$(tmux -S "$CREWFILE_TMUX" display -p -t crew:0 '#{pane_pid}')"
  run status-show w1
  assert_line 'live: yes'
  tmux -S "$CREWFILE_TMUX" kill-server
  run status-show w1
  assert_line 'live: no'
  rm -rf "$sockdir"
}
