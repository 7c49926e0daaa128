#!/usr/bin/env bats
# crew-notify as a shell user runs it: the acknowledged pipe, a command that
# writes what it is told to a file, restarts from the cursor.

setup() {
  load common
  crew_setup
  C="$BATS_TEST_TMPDIR/notify.cur"
  OUT="$BATS_TEST_TMPDIR/told"
  session-add w1 >/dev/null
  crew-watch --resume "$C" --once >/dev/null      # the starting position
}

tell() {   # the pipe once, telling into $OUT
  crew-watch --resume "$C" --once |
    crew-notify --cursor "$C" --always --window 0 \
      --exec 'printf "%s\n" "$CREWFILE_NOTIFY_IDS" >> '"$OUT.ids"'; cat >> '"$OUT"
}

@test "only what needs the captain is told, once, across runs" {
  status-append w1 turn-started
  status-append w1 paused "awaiting captain"
  status-append w1 turn-ended
  run tell
  assert_success
  assert_output ""
  run cat "$OUT"
  assert_line --index 0 "crewfile: 1 event needs you: w1 paused"
  assert_line --index 1 --regexp '^[-0-9T:.]+Z w1 paused: awaiting captain$'
  refute_output --partial "turn-"
  run tell
  assert_success
  run wc -l < "$OUT"
  assert_output 2
  status-append w1 problem "disk full"
  run tell
  assert_success
  run tail -n 1 "$OUT"
  assert_output --regexp ' w1 problem: disk full$'
  run wc -l < "$OUT.ids"
  assert_output 2
  run grep -c "^sent " "$C.journal"
  assert_output 2
}

@test "usage: --exec is required, a bad quiet span is refused" {
  run crew-notify < /dev/null
  assert_failure 2
  assert_output "crew-notify: missing --exec CMD
Try 'crew-notify --help'."
  run crew-notify --exec true --quiet 25:00-07:00 < /dev/null
  assert_failure 2
  assert_output "crew-notify: bad --quiet '25:00-07:00': HH:MM-HH:MM such as 22:00-07:00"
  run crew-notify --exec true --cursor "$BATS_TEST_TMPDIR/nope/x" < /dev/null
  assert_failure 111
  assert_output "crew-notify: $BATS_TEST_TMPDIR/nope/x.lock: No such file or directory"
}
