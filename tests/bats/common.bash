# Shared set-up for the bats suites: load with `load common`.

# crew_setup: assertion libraries, the checkout's commands first on PATH, a
# fresh crew directory, and never the tmux server of the person running us.
crew_setup() {
  bats_load_library bats-support
  bats_load_library bats-assert
  export PATH="$BATS_TEST_DIRNAME/../../bin:$PATH"
  export CREWFILE_DIR="$BATS_TEST_TMPDIR/crew"
  unset TMUX TMUX_PANE CREWFILE_SESSION
}

# private_tmux: a private tmux server for this test (a short socket path:
# sockets must stay under ~107 bytes). Pair with private_tmux_teardown.
private_tmux() {
  SOCKDIR="$(mktemp -d /tmp/cf-XXXX)"
  export CREWFILE_TMUX="$SOCKDIR/s"
}

private_tmux_teardown() {
  tmux -S "$CREWFILE_TMUX" kill-server 2>/dev/null || true
  rm -rf "$SOCKDIR"
}
