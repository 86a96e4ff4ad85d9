# stackproof: entry points for people (README): `make acceptance`, `make test` (everything, CI) and
# `make check` (the fast tier for everyday development).
# Component makefiles in mk/*.mk add their build steps to BUILD_TARGETS, the Debian tools those need
# to TOOL_TARGETS, steps of their own that run beside the host build to BUILD_LANES, test steps that
# start no daemon to TEST_TARGETS, test steps of their own beside those to TEST_LANES, and test steps
# that must run alone (they start the shared test cluster or measure) to LIVE_TARGETS; this file only
# wires them together (make test, "Lanes" below).
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

REPO      := $(abspath .)
VENV      := $(REPO)/.venv
PY        := $(VENV)/bin/python
STACKPROOF := $(VENV)/bin/stackproof
BUILD     := $(REPO)/build

BUILD_TARGETS :=
TOOL_TARGETS  :=
BUILD_LANES   :=
TEST_TARGETS  :=
TEST_LANES    :=
LIVE_TARGETS  :=

-include mk/*.mk

.PHONY: help deps venv lock-hashes build test test-python test-python-fast test-python-slow test-python-live lint-python check
.PHONY: acceptance clean
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

# make test's tiers, run apart (lanes, below): the tests that start no daemon in two lanes (the fast tier,
# the slow one), then the live ones alone. Inside make test (TEST_BUILT=1) they take the build as made.
PYTEST_NEEDS = $(if $(TEST_BUILT),venv,build)

test-python-fast: $(PYTEST_NEEDS)
	@echo "== pytest (fast tier: -m 'not live and not slow')"
	@$(PY) -m pytest -ra -p no:cacheprovider -m "not live and not slow" $(PYTEST_DURATIONS) $(PYTEST_ARGS)

test-python-slow: $(PYTEST_NEEDS)
	@echo "== pytest (slow tier, no daemons: -m 'slow and not live')"
	@$(PY) -m pytest -ra -p no:cacheprovider -m "slow and not live" $(PYTEST_DURATIONS) $(PYTEST_ARGS)

test-python-live: $(PYTEST_NEEDS)
	@echo "== pytest (live: -m live, one at a time)"
	@$(PY) -m pytest -ra -m live $(PYTEST_DURATIONS) $(PYTEST_ARGS)

## check: the fast tier for everyday development, no root daemons, no image or stack builds:
## pyflakes, then the tests marked neither live nor slow (unit, golden, render, bad input)
check: venv fwq mpibind-build lint-python
	@echo "== pytest (fast tier: -m 'not live and not slow')"
	@$(PY) -m pytest -q -ra -m "not live and not slow" $(PYTEST_DURATIONS) $(CHECK_ARGS)

## lint-python: unused names, undefined names and the like in every Python file we own
lint-python: venv
	@echo "== pyflakes"
	@$(PY) -m pyflakes src reframe-tests tests mpibind/python

## test: every tier, in three steps. Lanes (scripts/together.sh) run side by side, each output line
## tagged with its lane: a build that waits on the network or the disk, or a VM that waits on its jobs,
## leaves the other core to the next lane. Lanes start no shared daemon and measure nothing, and none
## writes what another reads (the CMake builds and their ctests run before step 2's lanes); what
## starts the test cluster or measures (LIVE_TARGETS, the live tests) runs alone, one at a time.
##   1. the host build (deps, BUILD_TARGETS: stacks, mpibind, FWQ)  | each of BUILD_LANES (the node image)
##   2. pyflakes and TEST_TARGETS, then the fast tier | the slow tier | each of TEST_LANES (laptop image, vcluster)
##   3. LIVE_TARGETS (the laptop image's acceptance), then the live tests
TOGETHER = MAKE="$(MAKE) TEST_BUILT=1" ./scripts/together.sh
space := $(subst ,, )
lanes = $(subst $(space), | ,$(strip $(1)))

test: deps $(TOOL_TARGETS)
	@echo "== test 1/3: $(call lanes,build $(BUILD_LANES))"
	@start=$$(date +%s); MAKE="$(MAKE)" ./scripts/together.sh build $(BUILD_LANES); rc=$$?; \
	  echo "== test 1/3 took $$(( $$(date +%s) - start )) s"; exit $$rc
	@echo "== test 2/3: lint-python $(TEST_TARGETS); then $(call lanes,test-python-fast test-python-slow $(TEST_LANES))"
	@start=$$(date +%s); $(MAKE) --no-print-directory TEST_BUILT=1 lint-python $(TEST_TARGETS) && \
	  $(TOGETHER) test-python-fast test-python-slow $(TEST_LANES); rc=$$?; \
	  echo "== test 2/3 took $$(( $$(date +%s) - start )) s"; exit $$rc
	@echo "== test 3/3: $(LIVE_TARGETS) test-python-live (one at a time)"
	@start=$$(date +%s); $(MAKE) --no-print-directory TEST_BUILT=1 $(LIVE_TARGETS) test-python-live; rc=$$?; \
	  echo "== test 3/3 took $$(( $$(date +%s) - start )) s"; exit $$rc

# ACCEPTANCE_ARGS: e.g. --stack commodity --stack commodity-next --baseline commodity
#   --min-pairs 8 --max-pairs 16 --looks 2 --block-launches 4 [--paired|--unpaired] [--rule bh|holm] --margin 0.05
#   --budget 9m --target-s 2 [--full-sweep] (docs/acceptance.md "Blocks of launches and looks").
# UNTIL_DECIDED=30m: add blocks until every headline metric is decided or 30 minutes are spent
# (--until-decided --budget 30m). Ctrl-C stops the ReFrame session and the test cluster.
UNTIL_DECIDED ?=
acceptance: build
	@$(PY) -m stackproof.acceptance $(ACCEPTANCE_ARGS) $(if $(UNTIL_DECIDED),--until-decided --budget $(UNTIL_DECIDED))

clean:
	rm -rf $(BUILD) $(VENV) .pytest_cache
