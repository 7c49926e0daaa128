#!/usr/bin/env bats
# The README's walkthrough, run literally top to bottom (commands extracted by
# tests/readme_walkthrough.py, so the two cannot drift), in a sandbox: HOME a
# temporary directory with ~/src/app a git repository, private tmux servers
# (TMUX_TMPDIR), and stand-ins on PATH for what a test must never touch or
# cannot have: `claude` (tests/fake-agent), `crontab` and `systemctl` (files
# in that HOME), `tail -f` (without -f).

load common

setup() {
  bats_load_library bats-support
  bats_load_library bats-assert
  REPO="$(cd "$BATS_TEST_DIRNAME/../.." && pwd)"
  PY="$(command -v python3)"
  [ -x "$REPO/.venv/bin/python" ] && PY="$REPO/.venv/bin/python"
  export HOME="$BATS_TEST_TMPDIR/home"
  unset TMUX TMUX_PANE CREWFILE_SESSION CREWFILE_DIR CREWFILE_TMUX XDG_STATE_HOME XDG_DATA_HOME \
        CREWFILE_AGENT_CMD CREWFILE_PRIMARY
  SOCKDIR="$(mktemp -d /tmp/cf-XXXX)"
  STUBS="$BATS_TEST_TMPDIR/stubs"
  mkdir -p "$STUBS" "$HOME/src/app"
  export TMUX_TMPDIR="$SOCKDIR"     # every tmux server, default or -L NAME, is private
  # claude: first what its SessionStart hook does (crew-hook records the
  # agent's process: this one, which then becomes the fake agent), then the agent
  cat > "$STUBS/claude" <<STUB
#!/bin/sh
[ -n "\${CREWFILE_SESSION:-}" ] && printf '{"hook_event_name":"SessionStart","session_id":"fake-%s","source":"startup","cwd":"%s"}' "\$\$" "\$PWD" | crew-hook
exec $PY $REPO/tests/fake-agent "\$@"
STUB
  # crontab: the new one replaces $HOME/.crontab once all of stdin is read,
  # as crontab does (`crontab -l | ... | crontab -` reads it meanwhile)
  cat > "$STUBS/crontab" <<'STUB'
#!/bin/sh
case "$1" in
  -l) [ -f "$HOME/.crontab" ] && exec cat "$HOME/.crontab"; echo "no crontab for you" >&2; exit 1 ;;
  -) cat > "$HOME/.crontab.new" && exec mv "$HOME/.crontab.new" "$HOME/.crontab" ;;
esac
exit 2
STUB
  echo "0 5 * * * /usr/local/bin/backup" > "$HOME/.crontab"       # the captain's own line
  printf '#!/bin/sh\necho "systemctl $*" >> "$HOME/.systemctl"\n' > "$STUBS/systemctl"
  printf '#!/bin/bash\nargs=(); for a; do [ "$a" = -f ] || args+=("$a"); done\nexec %s "${args[@]}"\n' \
    "$(command -v tail)" > "$STUBS/tail"
  chmod +x "$STUBS"/*
  export PATH="$STUBS:$REPO/bin:$(dirname "$PY"):$PATH"
  # tmux windows run login shells, which reset PATH from /etc/profile: the
  # commands reach them the way a user's own profile puts them on PATH
  printf 'export PATH=%q\n' "$PATH" > "$HOME/.profile"
  git config --global user.name captain
  git config --global user.email captain@example.org
  git config --global init.defaultBranch main
  cd "$HOME/src/app"
  git init -q
  printf 'test:\n\t@echo 412 passed\n' > Makefile
  git add Makefile && git commit -qm "the app"
}

teardown() {
  for sock in "$SOCKDIR"/tmux-*/*; do [ -S "$sock" ] && tmux -S "$sock" kill-server 2>/dev/null; done
  rm -rf "$SOCKDIR"
}

@test "the README walkthrough, followed literally, runs to its end" {
  "$PY" "$REPO/tests/readme_walkthrough.py" "$REPO/README.md" > "$BATS_TEST_TMPDIR/walkthrough.sh"
  run timeout 240 bash "$BATS_TEST_TMPDIR/walkthrough.sh"
  assert_success
  assert_output --partial "the walkthrough ran to its end"
  # the scratch crew's cron line was taken out again; the captain's own stays
  run crontab -l
  assert_output "0 5 * * * /usr/local/bin/backup"
  run cat "$HOME/.config/systemd/user/crew-up.service"
  assert_output --partial "crew-up"
}
