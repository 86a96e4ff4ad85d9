# stackproof: entry points for people (README): `make acceptance`, `make test` (everything, CI) and
# `make check` (the fast tier for everyday development).
# Component makefiles in mk/*.mk add their build steps to BUILD_TARGETS and their test
# steps to TEST_TARGETS; this file only wires them together.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

REPO      := $(abspath .)
VENV      := $(REPO)/.venv
PY        := $(VENV)/bin/python
STACKPROOF := $(VENV)/bin/stackproof
BUILD     := $(REPO)/build

BUILD_TARGETS :=
TEST_TARGETS  :=

-include mk/*.mk

.PHONY: help deps venv lock-hashes build test test-python lint-python check acceptance clean
help:
	@echo "make acceptance   install what is missing, bring up the test cluster, run the acceptance suite, write the report"
	@echo "make test         install what is missing, build, run every test (unit, golden, live cluster)"
	@echo "make check        the fast tier: pyflakes, unit, golden and render tests (no daemons, minutes)"

## deps: Debian packages (idempotent) and the Python virtual environment
deps: venv
	@./scripts/install-deps.sh

venv: $(VENV)/.installed
$(VENV)/.installed: pyproject.toml requirements-lock.txt
	@echo "== python venv $(VENV)"
	@test -x $(PY) || ./scripts/install-deps.sh  # python3-venv first, on a fresh machine
	@test -x $(PY) || python3 -m venv $(VENV)
	@$(PY) -m pip install -q --disable-pip-version-check --require-hashes -r requirements-lock.txt
	@$(PY) -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
	@touch $@

## lock-hashes: re-resolve requirements-lock.txt's pins with the sha256 of every PyPI file (review the diff)
lock-hashes:
	@./scripts/lock-hashes.sh

build: deps $(BUILD_TARGETS)

# Tiers are pytest markers (pyproject.toml): `live` (starts daemons: every *_live.py file and every test
# using the live_cluster fixture, tests/conftest.py), `slow` (ReFrame sessions and long simulations).
PYTEST_DURATIONS := --durations=25

test-python: build
	@echo "== pytest (every tier)"
	@$(PY) -m pytest -ra $(PYTEST_DURATIONS) $(PYTEST_ARGS)

## check: the fast tier for everyday development, no root daemons, no image or stack builds:
## pyflakes, then the tests marked neither live nor slow (unit, golden, render, bad input)
check: venv fwq mpibind-build lint-python
	@echo "== pytest (fast tier: -m 'not live and not slow')"
	@$(PY) -m pytest -q -ra -m "not live and not slow" $(PYTEST_DURATIONS) $(CHECK_ARGS)

## lint-python: unused names, undefined names and the like in every Python file we own
lint-python: venv
	@echo "== pyflakes"
	@$(PY) -m pyflakes src reframe-tests tests mpibind/python

test: build lint-python $(TEST_TARGETS) test-python

# ACCEPTANCE_ARGS: e.g. --stack commodity --stack commodity-next --baseline commodity
#   --min-pairs 5 --max-pairs 10 --looks 3 [--paired|--unpaired] [--rule bh|holm] --margin 0.05 --budget-min 7 --target-s 2 [--full-sweep]
# (docs/performance.md "The verdict in looks"). Ctrl-C stops the ReFrame session and the test cluster.
acceptance: build
	@$(PY) -m stackproof.acceptance $(ACCEPTANCE_ARGS)

clean:
	rm -rf $(BUILD) $(VENV) .pytest_cache
