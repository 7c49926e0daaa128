#!/usr/bin/env bats
# The README's quick start, then its stop and uninstall lines, run literally
# as a shell user runs them (commands extracted by tests/readme_walkthrough.py,
# so the two cannot drift), in a sandbox: HOME a temporary directory with
# ~/src/app a git repository, private tmux servers (TMUX_TMPDIR), and
# stand-ins on PATH for what a test must never touch or may not have:
# `claude` (tests/fake-agent; tests/test_quickstart.py runs the same lines
# with the real Claude Code) and `crontab` (a file in that HOME).

load common

setup() {
  bats_load_library bats-support
  bats_load_library bats-assert
  REPO="$(cd "$BATS_TEST_DIRNAME/../.." && pwd)"
  PY="$(command -v python3)"
  [ -x "$REPO/.venv/bin/python" ] && PY="$REPO/.venv/bin/python"
  export HOME="$BATS_TEST_TMPDIR/home"
  unset TMUX TMUX_PANE CREWFILE_SESSION CREWFILE_DIR CREWFILE_TMUX XDG_STATE_HOME XDG_DATA_HOME \
        CREWFILE_AGENT_CMD CREWFILE_PRIMARY MAKEFLAGS
  SOCKDIR="$(mktemp -d /tmp/cf-XXXX)"
  STUBS="$BATS_TEST_TMPDIR/stubs"
  mkdir -p "$STUBS" "$HOME/src/app" "$HOME/.local/bin" "$HOME/.claude"
  export TMUX_TMPDIR="$SOCKDIR"     # every tmux server is private
  # claude: first what its SessionStart hook does (crew-hook records the
  # agent's process: this one, which then becomes the fake agent), then the agent
  cat > "$STUBS/claude" <<STUB
#!/bin/sh
[ -n "\${CREWFILE_SESSION:-}" ] && printf '{"hook_event_name":"SessionStart","session_id":"fake-%s","source":"startup","cwd":"%s"}' "\$\$" "\$PWD" | crew-hook
exec $PY $REPO/tests/fake-agent "\$@"
STUB
  # crontab: the new one replaces $HOME/.crontab once all of stdin is read
  cat > "$STUBS/crontab" <<'STUB'
#!/bin/sh
case "$1" in
  -l) [ -f "$HOME/.crontab" ] && exec cat "$HOME/.crontab"; echo "no crontab for you" >&2; exit 1 ;;
  -) cat > "$HOME/.crontab.new" && exec mv "$HOME/.crontab.new" "$HOME/.crontab" ;;
esac
exit 2
STUB
  chmod +x "$STUBS"/*
  echo "0 5 * * * /usr/local/bin/backup" > "$HOME/.crontab"       # the captain's own line
  echo '{"includeCoAuthoredBy": false}' > "$HOME/.claude/settings.json"
  # ~/.local/bin first, as the README asks; a python3 that can make a venv
  export PATH="$HOME/.local/bin:$STUBS:$(dirname "$PY"):$PATH"
  export GIT_AUTHOR_NAME=captain GIT_AUTHOR_EMAIL=captain@example.org \
         GIT_COMMITTER_NAME=captain GIT_COMMITTER_EMAIL=captain@example.org
  git -C "$HOME/src/app" init -q -b main
  echo app > "$HOME/src/app/README"
  git -C "$HOME/src/app" add README && git -C "$HOME/src/app" commit -qm "the app"
}

teardown() {
  tmux kill-server 2>/dev/null
  for sock in "$SOCKDIR"/tmux-*/*; do [ -S "$sock" ] && tmux -S "$sock" kill-server 2>/dev/null; done
  rm -rf "$SOCKDIR"
}

@test "the README quick start, followed literally, starts a crew; its stop lines take it all out" {
  "$PY" "$REPO/tests/readme_walkthrough.py" "$REPO/README.md" "## Quick start" > "$BATS_TEST_TMPDIR/start.sh"
  "$PY" "$REPO/tests/readme_walkthrough.py" "$REPO/README.md" "## Stop and uninstall" > "$BATS_TEST_TMPDIR/stop.sh"
  cd "$REPO"
  run timeout 300 bash "$BATS_TEST_TMPDIR/start.sh"
  assert_success
  assert_output --partial "## Quick start ran to its end"
  run session-ls
  assert_success
  assert_output --regexp $'\nfirstmate +primary'
  assert_output --regexp $'\nbuilder +crew'
  assert_output --regexp $'\ntester +crew'
  assert_output --regexp $'\napi-design +aside'
  run git -C "$HOME/src/app" worktree list
  assert_output --partial "$HOME/src/app.crew/builder "
  assert_output --partial "[crew/tester]"
  run nudge-ls
  assert_output --regexp $'\nn[0-9a-f]+ +[^ ]+ +builder +1800s +0/20 +yes '

  cd "$REPO"
  run timeout 300 bash "$BATS_TEST_TMPDIR/stop.sh"
  assert_success
  assert_output --partial "## Stop and uninstall ran to its end"
  run ls -A "$HOME/.local/bin"
  assert_output ""
  [ ! -e "$HOME/.local/share/crewfile" ]
  # the user's settings, as they were (crew-hook writes JSON in its own layout)
  run "$PY" -c 'import json, sys; print(json.load(open(sys.argv[1])))' "$HOME/.claude/settings.json"
  assert_output "{'includeCoAuthoredBy': False}"
  run crontab -l
  assert_output "0 5 * * * /usr/local/bin/backup"
}
