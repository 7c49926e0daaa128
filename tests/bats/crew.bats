#!/usr/bin/env bats
# crew-spawn, crew-retire, crew-respawn as a shell user runs them: a real git
# repository, a private tmux server, fake agents.

setup() {
  load common
  crew_setup
  private_tmux
  export CREWFILE_AGENT_CMD="$BATS_TEST_DIRNAME/../fake-agent --conversation"
  export GIT_AUTHOR_NAME=T GIT_AUTHOR_EMAIL=t@example.org GIT_COMMITTER_NAME=T GIT_COMMITTER_EMAIL=t@example.org
  REPO="$BATS_TEST_TMPDIR/src/app"
  mkdir -p "$REPO" && cd "$REPO"
  git init -q -b main && echo app > README && git add README && git commit -q -m init
}

teardown() {
  private_tmux_teardown
}

wait_for() {   # wait_for COMMAND...: until it succeeds
  for _ in $(seq 500); do "$@" >/dev/null 2>&1 && return 0; sleep 0.02; done
  return 1
}

screen_has() { tmux -S "$CREWFILE_TMUX" capture-pane -p -t "$1" | grep -qF -- "$2"; }
pane_of() { status-show "$1" --json | sed -n 's/.*"tmux": "\(%[0-9]*\)".*/\1/p'; }

@test "spawn two workers, retire one after its commit, reboot, respawn the other" {
  run crew-spawn builder --tmux-session crew --prompt "build it"
  assert_success
  assert_line "tree: $BATS_TEST_TMPDIR/src/app.crew/builder"
  assert_line "branch: crew/builder"
  run crew-spawn tester --tmux-session crew
  assert_success
  wait_for screen_has "$(pane_of tester)" 'ready>'
  run git worktree list
  assert_output --partial "app.crew/builder"
  assert_output --partial "app.crew/tester"

  echo done > "$BATS_TEST_TMPDIR/src/app.crew/builder/work.txt"
  run crew-retire builder
  assert_failure 1
  assert_output --partial "has uncommitted changes (work.txt)"
  git -C "$BATS_TEST_TMPDIR/src/app.crew/builder" add work.txt
  git -C "$BATS_TEST_TMPDIR/src/app.crew/builder" commit -q -m work
  run crew-retire builder
  assert_success
  assert_line "worktree: removed $BATS_TEST_TMPDIR/src/app.crew/builder"
  run git show crew/builder:work.txt
  assert_output "done"

  tmux -S "$CREWFILE_TMUX" kill-server
  run crew-respawn
  assert_success
  assert_line --regexp '^builder +ended +it ended on purpose'
  assert_line --regexp '^tester +respawned +window crew:[0-9]+ in '
  wait_for screen_has "$(pane_of tester)" 'resumed '
  run tmux -S "$CREWFILE_TMUX" list-windows -a -F '#{window_name}'
  assert_output "tester"
}

@test "a refusal leaves nothing behind" {
  run crew-spawn tester --from no-such-ref
  assert_failure 3
  assert_output "crew-spawn: no commit 'no-such-ref' in $REPO"
  run git branch --list 'crew/*'
  assert_output ""
  [ ! -e "$BATS_TEST_TMPDIR/src/app.crew" ]
  [ ! -e "$CREWFILE_DIR/sessions" ]
}
