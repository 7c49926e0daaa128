#!/usr/bin/env bats
# Background jobs as a shell user runs them: job-exec, job-wait, job-ls, job-sweep.

bats_require_minimum_version 1.5.0

setup() {
  load common
  crew_setup
  GO="$BATS_TEST_TMPDIR/go"
  mkfifo "$GO"
}

wait_for() {   # wait_for COMMAND...: until it succeeds (state with no event to await)
  for _ in $(seq 1000); do "$@" && return 0; sleep 0.01; done
  return 1
}

settled() {    # the watcher wrote the result and let go of its life lock
  [ -e "$CREWFILE_DIR/jobs/$1/result" ] && flock -n "$CREWFILE_DIR/jobs/$1/alive" true
}

@test "job-exec prints a handle; job-wait prints the result line and the tail, exits with the code" {
  h="$(job-exec --label count -- sh -c 'seq 1 20; exit 5')"
  [[ "$h" =~ ^j-[0-9a-f]{6}$ ]]
  run -5 job-wait "$h" --tail 2
  assert_line --index 0 --regexp "^$h exited 5 after [0-9.]+s; heard by this wait\$"
  assert_line --index 1 '19'
  assert_line --index 2 '20'
  run job-wait "$h" --all
  assert_failure 5
  assert_line --index 0 --partial 'heard already by wait'
  assert_line --index 20 '20'
}

@test "a wait that times out exits 124; the outcome is then announced to the session" {
  session-add w1 --pid $$
  h="$(job-exec --session w1 --label deploy -- sh -c 'read x < "$1"; echo deployed' sh "$GO")"
  run job-wait "$h" --timeout 0.1
  assert_failure 124
  assert_output --regexp "^$h running: timed out after waiting"
  echo go > "$GO"
  wait_for settled "$h"
  run inbox-drain w1
  assert_success
  assert_output --regexp " job: [0-9a-f]+-[0-9]+-[0-9]+ job $h \(deploy\) exited 0 after [0-9.]+s; last output: deployed\$"
  run job-ls
  assert_line --index 1 --regexp "^$h +w1 +exited +0 +notice +[0-9]+s +deploy\$"
}

@test "job-wait's own errors exit 125 with nothing on stdout" {
  run --separate-stderr job-wait j-000000
  assert_failure 125
  assert_output ''
  [ "$stderr" = "job-wait: no job 'j-000000'" ]
  run job-wait
  assert_failure 125
  run job-wait x --timeout forever
  assert_failure 125
  assert_output --partial "bad --timeout 'forever'"
}

@test "an empty command is refused; a missing one still gets a handle and exit 127" {
  run job-exec --
  assert_failure 2
  assert_output --partial 'missing COMMAND'
  h="$(job-exec -- no-such-program-here)"
  run -127 job-wait "$h"
  assert_line --index 1 'job-exec: no-such-program-here: No such file or directory'
}

@test "job-sweep removes heard outcomes, keeps unheard and running ones" {
  heard="$(job-exec -- echo a)"
  job-wait "$heard" >/dev/null
  unheard="$(job-exec -- echo b)"
  running="$(job-exec -- sh -c 'read x < "$1"' sh "$GO")"
  wait_for settled "$unheard"
  run job-sweep --older-than 0s
  assert_success
  assert_output "$heard"
  [ ! -e "$CREWFILE_DIR/jobs/$heard" ]
  run job-ls
  assert_output --regexp "$unheard +- +exited +0 +no! "
  assert_output --regexp "$running +- +running +- +no "
  echo go > "$GO"
  run job-wait "$running"
  assert_success
}

@test "the files are the protocol: a shell reads the result under the job's lock" {
  h="$(job-exec -- sh -c 'exit 9')"
  wait_for settled "$h"
  run flock "$CREWFILE_DIR/jobs/$h/lock" cat "$CREWFILE_DIR/jobs/$h/result"
  assert_output --partial '"code": 9'
  run cat "$CREWFILE_DIR/jobs/$h/notice"
  assert_output --partial '"reason": "no owning session"'
}

@test "a shell waiter takes part in the decision with flock(1), as protocol.md spells it" {
  session-add w1 --pid $$
  h="$(job-exec --session w1 -- sh -c 'read x < "$1"; echo from-shell' sh "$GO")"
  d="$CREWFILE_DIR/jobs/$h"
  exec 8<>"$d/lock"; flock 8                    # take lock
  [ ! -e "$d/result" ]
  exec 9<>"$d/waiters"; flock -s 9              # count in
  flock -u 8                                    # release lock
  echo go > "$GO"
  timeout 60 flock -s "$d/running" true         # wait: granted once the outcome is written
  flock 8
  [ -e "$d/result" ]
  [ ! -e "$d/heard" ]
  printf '{"at": "%s", "by": "wait", "pid": %d}\n' "$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)" $$ > "$d/.heard.tmp.$$"
  mv "$d/.heard.tmp.$$" "$d/heard"
  flock -u 8; exec 8>&-
  exec 9>&-                                     # count out
  wait_for settled "$h"
  run inbox-drain w1
  assert_output ''
  run job-ls
  assert_line --index 1 --regexp "^$h +w1 +exited +0 +wait "
}
