# trajpub: `make demo` runs a governed release end to end; `make test` runs the test suite.
# Both set everything up on a fresh machine (uv venv, PostgreSQL 15 + PostGIS 3, Prefect server) and are idempotent.
SHELL := /bin/bash
VENV := .venv
TRAJPUB := $(VENV)/bin/trajpub
UV := $(shell command -v uv 2>/dev/null || echo "python3 -m uv")
# Bytecode is compiled once (uv sync --compile-bytecode) and Python may cache the project's own: with
# PYTHONDONTWRITEBYTECODE set, as on these machines, every `trajpub` process recompiled Prefect, pandas and the
# rest from source, about 10 s of CPU each.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: setup services browser demo test test-unit bench lint stop
setup: $(VENV)/.synced

$(VENV)/.synced: pyproject.toml uv.lock
	@command -v uv >/dev/null 2>&1 || python3 -m uv --version >/dev/null 2>&1 || python3 -m pip install -q uv
	$(UV) sync --frozen --compile-bytecode --python 3.11
	@touch $@

services: setup
	$(TRAJPUB) db up
	$(TRAJPUB) db migrate
	$(TRAJPUB) server up
	$(TRAJPUB) console up

# Debian's Chromium for the browser tests (the review report, the Prefect UI approval).
browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium; } || \
	  { echo "the browser tests need Debian's chromium: sudo apt-get install chromium"; exit 1; }

demo: services
	$(VENV)/bin/python -m flows.demo

# Two pytest-xdist workers (each test module on one worker), then the tests that stop a shared service, alone.
PYTEST := TRAJPUB_TEST_MODE=1 $(VENV)/bin/pytest -q -p no:cacheprovider
test: services browser
	$(PYTEST) -n 2 --dist loadfile -m "not serial" --durations=25
	$(PYTEST) -m serial --durations=5

# The unit tests alone: no database, no Prefect server, no browser.
test-unit: setup
	$(PYTEST) tests/unit

bench: services
	$(VENV)/bin/python -m bench.run_stages

lint: setup
	$(VENV)/bin/ruff check .

stop:
	-$(TRAJPUB) console down
	-$(TRAJPUB) server down
	-$(TRAJPUB) db down
