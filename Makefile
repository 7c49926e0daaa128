# crewfile: `make demo` and `make test` do all set-up on a fresh machine.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(CURDIR)/$(VENV)/bin/python
STAMP  := $(VENV)/.deps-installed
export PATH := $(CURDIR)/$(VENV)/bin:$(CURDIR)/bin:$(PATH)

.PHONY: all deps system-deps test pytest bats demo bench install clean

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
	$(PY) -m pip install -q --disable-pip-version-check 'inotify-simple>=1.3' 'pytest>=7' 'hypothesis>=6'
	touch $@

deps: system-deps $(STAMP)

test: deps
	$(PY) -m pytest -q
	bats tests/bats

demo: deps
	$(PY) demo/demo.py

bench: deps
	$(PY) bench/bench.py

install:
	$(PYTHON) -m pip install .

clean:
	rm -rf $(VENV) .cache build lib/*.egg-info
