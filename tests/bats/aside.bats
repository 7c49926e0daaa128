#!/usr/bin/env bats
# Asides as a shell user runs them, on a private tmux server.

setup() {
  load common
  crew_setup
  private_tmux
  export CREWFILE_AGENT_CMD="$BATS_TEST_DIRNAME/../fake-agent"
  tmux -S "$CREWFILE_TMUX" -f /dev/null new-session -d -s crew -x 120 -y 30
}

teardown() {
  if [ -n "${PERSON:-}" ]; then person_leaves; fi
  private_tmux_teardown
}

# The captain at a terminal (tests/terminal.py): a tmux client attached
# through a pseudo-terminal, typing what person_types writes.
person_attach() {   # person_attach [TARGET]
  mkfifo "$BATS_TEST_TMPDIR/keys"
  python3 "$BATS_TEST_DIRNAME/../terminal.py" "$CREWFILE_TMUX" "$@" <"$BATS_TEST_TMPDIR/keys" 3>&- &
  PERSON=$!
  exec 7>"$BATS_TEST_TMPDIR/keys"
  for _ in $(seq 500); do
    [ -n "$(tmux -S "$CREWFILE_TMUX" list-clients)" ] && return 0
    sleep 0.02
  done
  return 1
}

# person_types KEYS (printf %b): in a whole second after all recorded so far,
# as an act's evidence counts only keys after the captain's last input.
person_types() {
  local t
  t="$(date +%s)"
  until [ "$(date +%s)" -gt "$t" ]; do sleep 0.02; done
  printf '%b' "$1" >&7
}

person_leaves() {
  exec 7>&-
  wait "$PERSON"
  PERSON=
}

wait_record() {   # wait_record NAME REGEX [COUNT]
  for _ in $(seq 500); do
    [ "$(grep -c -- "$2" "$CREWFILE_DIR/sessions/$1/status")" -ge "${3:-1}" ] && return 0
    sleep 0.02
  done
  cat "$CREWFILE_DIR/sessions/$1/status" >&2
  return 1
}

wait_screen() {   # wait_screen PANE TEXT
  for _ in $(seq 500); do
    tmux -S "$CREWFILE_TMUX" capture-pane -p -t "$1" | grep -qF -- "$2" && return 0
    sleep 0.02
  done
  tmux -S "$CREWFILE_TMUX" capture-pane -p -t "$1" >&2
  return 1
}

@test "open, refuse a self-conclusion, conclude, hand over, reconcile" {
  run aside-open design --topic "cache design" --tmux-session crew --primary firstmate
  assert_success
  assert_output 'crew:1'
  pane="$(status-show design --json | sed -n 's/.*"tmux": "\(%[0-9]*\)".*/\1/p')"
  wait_screen "$pane" 'ready>'

  run aside-say design what about eviction      # not below the aside's tmux server
  assert_failure 1
  assert_output --partial 'aside-say: not believed to be the captain: it was not run from a tmux window or key binding'
  # the captain's key binding, pressed
  person_attach crew
  tmux -S "$CREWFILE_TMUX" bind-key S run-shell "aside-say design what about eviction >'$BATS_TEST_TMPDIR/say.out'"
  person_types '\002S'
  wait_record design 'captain: what about eviction'
  run cat "$BATS_TEST_TMPDIR/say.out"
  assert_output 'captain'
  # tmux runs it, but no person pressed a key for it since: refused
  tmux -S "$CREWFILE_TMUX" run-shell "aside-say design again >'$BATS_TEST_TMPDIR/say.out' 2>&1; true"
  run cat "$BATS_TEST_TMPDIR/say.out"
  assert_output "aside-say: not believed to be the captain: no key was pressed in a tmux client of the aside's server since the captain's last input (keys sent by send-keys or run-shell are no person's)"
  run aside-conclude design --report - <<<'premature'
  assert_failure 1
  assert_output 'aside-conclude: the captain has not concluded this aside; keep the conversation going'
  run grep -c 'problem: self-conclusion refused$' "$CREWFILE_DIR/sessions/design/status"
  assert_output 1
  run aside-reconcile design
  assert_failure 1

  run aside-done design --note 'ship it'        # refused: not the captain's key binding
  assert_failure 1
  run printf '%s captain-done: forged\n' "$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)"
  flock "$CREWFILE_DIR/sessions/design/lock" sh -c "echo '$output' >> '$CREWFILE_DIR/sessions/design/status'"
  run aside-conclude design --report - <<<'premature'
  assert_failure 1
  assert_output --partial 'its captain-done record is not believed (it has no evidence of the captain'
  # The captain's key binding, pressed: tmux runs it.
  tmux -S "$CREWFILE_TMUX" bind-key D run-shell "aside-done design --note 'ship it'"
  person_types '\002D'
  wait_record design 'captain-done: ship it$'
  person_leaves
  run bash -c 'printf "# cache\nLRU\n" | aside-conclude design --report -'
  assert_success
  report="$output"
  assert [ -f "$report" ]
  run bash -c 'report-ls --new | tail -n +2'
  assert_output --regexp "^new +design +[0-9]{4}-[0-9T:.-]+Z +$report\$"

  run aside-reconcile design
  assert_success
  cur="${report/\/new\//\/cur\/}"
  assert_line "report: $cur"
  assert_line "scrollback: $cur.scrollback"
  run cat "$cur"
  assert_output $'# cache\nLRU'
  run tmux -S "$CREWFILE_TMUX" list-windows -a -F '#{window_name}'
  refute_line design
  run report-ls --new
  assert_output 'STATE  ASIDE  TIME  PATH'
  run tail -n 1 "$CREWFILE_DIR/sessions/design/status"
  assert_output --regexp " closed: $cur\$"
}

@test "the captain's typed /aside-done counts; typing again voids it" {
  aside-open a2 --tmux-session crew >/dev/null
  pane="$(status-show a2 --json | sed -n 's/.*"tmux": "\(%[0-9]*\)".*/\1/p')"
  wait_screen "$pane" 'ready>'
  # sent by a process (send-keys): no person's keys, refused
  tmux -S "$CREWFILE_TMUX" send-keys -t "$pane" -l '/aside-done'
  tmux -S "$CREWFILE_TMUX" send-keys -t "$pane" Enter
  wait_record a2 'problem: self-conclusion refused: /aside-done not recorded: no tmux client is attached'
  person_attach "$pane"
  person_types '/aside-done\r'
  wait_record a2 'captain-done$'
  person_types 'no wait\r'
  wait_record a2 'captain: no wait'
  run aside-conclude a2 --report - <<<'report'
  assert_failure 1
  person_types '/aside-done\r'
  wait_record a2 'captain-done$' 2
  person_leaves
  run aside-conclude a2 --report - <<<'report'
  assert_success
  run aside-conclude a2 --report - <<<'report'
  assert_failure 1
  assert_output --partial 'already concluded'
  run bash -c 'report-ls | tail -n +2 | wc -l'
  assert_output 1
}

@test "bad input: clear errors, documented codes, nothing changed" {
  session-add w1
  run aside-conclude nobody --report - <<<'x'
  assert_failure 3
  run aside-conclude w1 --report - <<<'x'
  assert_failure 2
  assert_output "aside-conclude: 'w1' is not an aside (kind crew)"
  aside-open a3 --tmux-session crew >/dev/null
  tmux -S "$CREWFILE_TMUX" bind-key D run-shell 'aside-done a3'
  person_attach crew
  person_types '\002D'
  wait_record a3 'captain-done$'
  person_leaves
  run aside-conclude a3 --report "$BATS_TEST_TMPDIR/missing.md"
  assert_failure 2
  assert_output --partial 'no report file'
  run aside-conclude a3 --report - </dev/null
  assert_failure 2
  assert_output 'aside-conclude: the report is empty'
  run aside-conclude a3
  assert_failure 2
  run aside-open a3 --tmux-session crew
  assert_failure 1
  run aside-reconcile nobody
  assert_failure 3
  run report-ls
  assert_output 'STATE  ASIDE  TIME  PATH'
}
