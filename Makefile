# stackproof: two entry points for people (README), `make acceptance` and `make test`.
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

.PHONY: help deps venv lock-hashes build test test-python lint-python acceptance clean
help:
	@echo "make acceptance   install what is missing, bring up the test cluster, run the acceptance suite, write the report"
	@echo "make test         install what is missing, build, run every test (unit, golden, live cluster)"

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

test-python: build
	@echo "== pytest"
	@$(PY) -m pytest -ra $(PYTEST_ARGS)

## lint-python: unused names, undefined names and the like in every Python file we own
lint-python: venv
	@echo "== pyflakes"
	@$(PY) -m pyflakes src reframe-tests tests mpibind/python

test: build lint-python $(TEST_TARGETS) test-python

# ACCEPTANCE_ARGS: e.g. --stack commodity --stack commodity-next --baseline commodity
#   --min-pairs 8 --max-pairs 16 --looks 2 --block-launches 4 [--paired|--unpaired] [--rule bh|holm] --margin 0.05
#   --budget 7m --target-s 2 [--full-sweep] (docs/acceptance.md "Blocks of launches and looks").
# UNTIL_DECIDED=30m: add blocks until every headline metric is decided or 30 minutes are spent
# (--until-decided --budget 30m). Ctrl-C stops the ReFrame session and the test cluster.
UNTIL_DECIDED ?=
acceptance: build
	@$(PY) -m stackproof.acceptance $(ACCEPTANCE_ARGS) $(if $(UNTIL_DECIDED),--until-decided --budget $(UNTIL_DECIDED))

clean:
	rm -rf $(BUILD) $(VENV) .pytest_cache
