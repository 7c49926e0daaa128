# crewfile: `make demo` and `make test` do all set-up on a fresh machine.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(CURDIR)/$(VENV)/bin/python
STAMP  := $(VENV)/.deps-installed
export PATH := $(CURDIR)/$(VENV)/bin:$(CURDIR)/bin:$(PATH)

.PHONY: all deps system-deps claude-code codex gemini sshd systemd viewers test test-oldest test-e2e pytest bats demo bench soak install uninstall clean

all: test

# Debian's tmux and bats (with its assert/support/file libraries), if missing.
system-deps:
	@if ! command -v tmux >/dev/null || ! command -v bats >/dev/null \
	    || [ ! -d /usr/lib/bats/bats-assert ] || ! command -v flock >/dev/null; then \
	  echo "make: installing Debian packages tmux bats util-linux"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    --no-install-recommends tmux bats bats-assert bats-support bats-file util-linux >/dev/null; \
	fi

$(STAMP): setup.cfg
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check 'inotify-simple>=1.3' 'python-dateutil>=2.8' 'pytest>=7' 'hypothesis>=6'
	touch $@

# Byte-compile the package: with PYTHONDONTWRITEBYTECODE=1 (set on this
# machine) nothing else would, and every command would compile its imports.
deps: system-deps $(STAMP)
	@$(PY) -m compileall -q lib >/dev/null

# The real agent CLIs for the end-to-end tests, each at an exact release, each
# in a directory of its own in this checkout (never globally): the newest
# releases, which users run, and the oldest the README supports. `make test
# AGENTS=oldest` runs the whole suite against the oldest; `make test-oldest`
# runs only the end-to-end tests against them. The tests run the release named
# in CREWFILE_{CLAUDE,CODEX,GEMINI}_VERSION (tests/agent_clis.py).
CLAUDE_CODE_NEWEST := 2.1.332
CLAUDE_CODE_OLDEST := 2.1.197
CODEX_NEWEST       := 0.171.0
CODEX_OLDEST       := 0.171.0
GEMINI_NEWEST      := 0.61.0
GEMINI_OLDEST      := 0.61.0
AGENTS ?= newest
ifeq ($(AGENTS),newest)
CLAUDE_CODE_VERSION := $(CLAUDE_CODE_NEWEST)
CODEX_VERSION       := $(CODEX_NEWEST)
GEMINI_VERSION      := $(GEMINI_NEWEST)
else ifeq ($(AGENTS),oldest)
CLAUDE_CODE_VERSION := $(CLAUDE_CODE_OLDEST)
CODEX_VERSION       := $(CODEX_OLDEST)
GEMINI_VERSION      := $(GEMINI_OLDEST)
else
$(error AGENTS must be newest or oldest, not '$(AGENTS)')
endif
export CREWFILE_CLAUDE_VERSION := $(CLAUDE_CODE_VERSION)
export CREWFILE_CODEX_VERSION  := $(CODEX_VERSION)
export CREWFILE_GEMINI_VERSION := $(GEMINI_VERSION)
AGENT_VERSIONS = claude-code $(CLAUDE_CODE_$(1)), codex $(CODEX_$(1)), gemini $(GEMINI_$(1))

# npm installs the newest release whose `engines` match the local Node, which
# is not the release asked for: every Claude Code from 2.1.198 asks for Node 22
# and ships a native binary that runs without Node at all. An exact version
# with --engine-strict=false is installed as asked. If it cannot be installed,
# say so loudly: those tests are then skipped, and `make test` ends by saying so.
# $(call npm_exact,WHAT,DIR,PACKAGE@VERSION,FILE-GLOB-ONCE-INSTALLED)
npm_exact = if ls $(4) >/dev/null 2>&1; then :; \
	elif ! command -v npm >/dev/null; then \
	  echo "make: WARNING: npm not found: the end-to-end tests with the real $(1) will be SKIPPED" >&2; \
	else echo "make: installing $(1) $(3) into $(2)"; \
	  npm install --prefix $(2) --engine-strict=false --no-audit --no-fund --loglevel=error $(3) \
	  || echo "make: WARNING: npm install of $(1) failed: its end-to-end tests will be SKIPPED" >&2; \
	fi

# Claude Code's binary comes in a platform package (@anthropic-ai/claude-code-linux-x64)
# pinned to the same release; its --version says which it is.
CLAUDE_CODE := .cache/claude-code-$(CLAUDE_CODE_VERSION)
claude-code:
	@$(call npm_exact,Claude Code CLI,$(CLAUDE_CODE),@anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION),$(CLAUDE_CODE)/node_modules/@anthropic-ai/claude-code-*/claude)
	@for b in $(CLAUDE_CODE)/node_modules/@anthropic-ai/claude-code-*/claude; do [ -x "$$b" ] || continue; \
	  v=$$("$$b" --version 2>/dev/null | cut -d' ' -f1); [ "$$v" = $(CLAUDE_CODE_VERSION) ] \
	  || echo "make: WARNING: $$b is Claude Code '$$v', not $(CLAUDE_CODE_VERSION)" >&2; done

CODEX := .cache/codex-$(CODEX_VERSION)
codex:
	@$(call npm_exact,Codex CLI,$(CODEX),@openai/codex@$(CODEX_VERSION),$(CODEX)/node_modules/@openai/codex-linux-*/vendor/*/bin/codex)

GEMINI := .cache/gemini-$(GEMINI_VERSION)
gemini:
	@$(call npm_exact,Gemini CLI,$(GEMINI),@google/gemini-cli@$(GEMINI_VERSION),$(GEMINI)/node_modules/.bin/gemini)

# Debian's openssh-server for the multi-machine test (a private sshd on
# localhost); where it cannot be installed that test is skipped, loudly.
sshd:
	@[ -x /usr/sbin/sshd ] || { echo "make: installing Debian's openssh-server for the multi-machine test"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openssh-server >/dev/null \
	  || echo "make: WARNING: openssh-server is unavailable: the multi-machine test will be SKIPPED" >&2; }

# Debian's systemd for systemd-analyze (a container may lack it): the test of
# crew-up --systemd verifies its unit with it; where it cannot be installed
# that test is skipped, loudly.
systemd:
	@command -v systemd-analyze >/dev/null || { echo "make: installing Debian's systemd for systemd-analyze"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends systemd >/dev/null \
	  || echo "make: WARNING: systemd is unavailable: the crew-up unit test will be SKIPPED" >&2; }

# Debian's librsvg2-bin (rsvg-convert) and chromium: the crew-timeline tests
# render its SVG and open its HTML page with them; where they cannot be
# installed those tests are skipped, loudly.
viewers:
	@command -v rsvg-convert >/dev/null && command -v chromium >/dev/null || { \
	  echo "make: installing Debian's librsvg2-bin and chromium for the crew-timeline tests"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends librsvg2-bin chromium >/dev/null \
	  || echo "make: WARNING: librsvg2-bin or chromium is unavailable: the timeline rendering tests will be SKIPPED" >&2; }

# pytest and bats both run, even if one fails (the exit code fails if either
# did); then, last of all, every skipped test with its reason (pytest's from
# tests/conftest.py, bats' from its TAP report) and one loud line counting them.
test: deps claude-code codex gemini sshd viewers systemd
	@rc=0; mkdir -p .cache; rm -f .cache/skipped .cache/report.tap; \
	$(PY) -m pytest -q -rf || rc=$$?; \
	bats --report-formatter tap -o .cache tests/bats || rc=$$?; \
	sed -n 's/^ok [0-9]* \(.*\) # skip *\(.*\)/tests\/bats: \1\t\2/p' .cache/report.tap 2>/dev/null >> .cache/skipped; \
	if [ -s .cache/skipped ]; then \
	  sed 's/^/make: SKIPPED /; s/\t/: /' .cache/skipped >&2; \
	  echo "make: WARNING: $$(wc -l < .cache/skipped) TESTS WERE SKIPPED (named above): $$(cut -f2 .cache/skipped | sort | uniq -c | sed 's/^ *\([0-9]*\) \(.*\)/\2 (\1)/' | paste -sd';' | sed 's/;/; /g')" >&2; \
	fi; $(agents_tested); exit $$rc

# The end-to-end tests alone (those that run a real agent CLI), against the
# oldest releases the README supports.
E2E_TESTS := tests/test_claude_harness_smoke.py tests/test_codexconf.py $(wildcard tests/test_*_e2e.py)
test-oldest:
	@$(MAKE) --no-print-directory AGENTS=oldest test-e2e
test-e2e: deps claude-code codex gemini
	@rc=0; $(PY) -m pytest -q -rs $(E2E_TESTS) || rc=$$?; $(agents_tested); exit $$rc

agents_tested = echo "make: agent CLIs tested: $(call AGENT_VERSIONS,VERSION)"; \
	echo "make: agent CLIs supported: newest $(call AGENT_VERSIONS,NEWEST); oldest $(call AGENT_VERSIONS,OLDEST) (make test-oldest)"

demo: deps claude-code
	$(PY) demo/demo.py

# Debian's task-spooler: the jobs bench compares job-wait with `tsp -w`.
bench: deps
	@command -v tsp >/dev/null || { echo "make: installing Debian's task-spooler (tsp) for the jobs bench"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends task-spooler >/dev/null \
	  || echo "make: task-spooler is unavailable: the jobs bench will say so" >&2; }
	$(PY) bench/bench.py

# A day in the life of a crew (docs/soak.md): a primary and WORKERS workers,
# each the real Claude Code against the stand-in model, for DURATION (any
# length: 2m, 20m, 2h), the day drawn from SEED. Its report's path is printed;
# it fails unless every invariant held. `make test` runs a 2-minute one
# (tests/test_soak.py). CODEX=N: N of the workers are Codex (`make codex`
# first); GEMINI=N: N more are Gemini (`make gemini` first). CODEX and
# GEMINI are also where those targets install them: only a value given on
# the command line is the soak's.
DURATION ?= 20m
SEED     ?= 1
WORKERS  ?= 6
SOAK_CODEX = $(if $(filter command line,$(origin CODEX)),--codex $(CODEX))
SOAK_GEMINI = $(if $(filter command line,$(origin GEMINI)),--gemini $(GEMINI))
soak: deps claude-code
	$(PY) tests/soak/soak.py --duration $(DURATION) --seed $(SEED) --workers $(WORKERS) \
	  $(SOAK_CODEX) $(SOAK_GEMINI)

# pipx's convention: the commands get a venv of their own (so they always run
# with the interpreter that has their dependencies), linked into ~/.local/bin.
DATA_HOME   ?= $(or $(XDG_DATA_HOME),$(HOME)/.local/share)
INSTALL_VENV ?= $(DATA_HOME)/crewfile/venv
BINDIR      ?= $(HOME)/.local/bin
install:
	$(PYTHON) -m venv --clear $(INSTALL_VENV)
	$(INSTALL_VENV)/bin/python -m pip install -q --disable-pip-version-check .
	@rm -rf build lib/*.egg-info
	@mkdir -p $(BINDIR)
	@for f in bin/*; do ln -sfn $(INSTALL_VENV)/bin/$${f#bin/} $(BINDIR)/$${f#bin/}; done
	@echo "make: crewfile's commands are in $(BINDIR) (their venv: $(INSTALL_VENV))"
	@case ":$$PATH:" in *":$(BINDIR):"*) ;; *) echo "make: add $(BINDIR) to your PATH";; esac

# Before the venv goes, what still runs its interpreter: each agent's hooks
# (crew-hook --uninstall, only where the hooks file names this venv: a
# checkout's own hooks stay) and nudge-tick's cron line. Left behind, they
# would run a deleted file on every agent event and every minute.
uninstall:
	@for a in claude:.claude/settings.json codex:.codex/hooks.json gemini:.gemini/settings.json; do \
	  f="$(HOME)/$${a#*:}"; \
	  if [ -x $(INSTALL_VENV)/bin/crew-hook ] && grep -qF "$(INSTALL_VENV)/bin/python" "$$f" 2>/dev/null; then \
	    $(INSTALL_VENV)/bin/crew-hook --uninstall "$$(dirname "$$f")" --agent $${a%%:*} || exit 1; \
	  fi; done
	@if crontab -l 2>/dev/null | grep -qF "$(INSTALL_VENV)/bin/python"; then \
	  crontab -l | grep -vF "$(INSTALL_VENV)/bin/python" | crontab - \
	  && echo "make: removed nudge-tick's line from your crontab"; fi
	@for f in bin/*; do n=$${f#bin/}; \
	  [ "$$(readlink $(BINDIR)/$$n)" = "$(INSTALL_VENV)/bin/$$n" ] && rm -f $(BINDIR)/$$n; done; true
	rm -rf $(INSTALL_VENV)
	@rmdir $(DATA_HOME)/crewfile 2>/dev/null || true

clean:
	rm -rf $(VENV) .cache build lib/*.egg-info
