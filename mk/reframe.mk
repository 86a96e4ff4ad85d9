# ReFrame acceptance suite (reframe-tests/). Tested by pytest (tests/test_reframe_*.py, part of
# `make test`); these targets run the suite by hand. STACK=commodity|vendor|laptop, SYSTEM=local|
# testcluster|<site>; extra ReFrame options in RFM_ARGS (e.g. RFM_ARGS="-n OSUBenchmark").
RFM_SYSTEM ?= local
RFM_STACK  ?= laptop
RFM_ARGS   ?=
RFM_RUN    := $(PY) $(REPO)/reframe-tests/run.py

.PHONY: reframe-run reframe-dry-run reframe-list reframe-compare

## reframe-run: run the suite for one system and stack (results go to the results database)
reframe-run: venv
	@$(RFM_RUN) --system $(RFM_SYSTEM) --stack $(RFM_STACK) -- $(RFM_ARGS)

## reframe-dry-run: generate every job script of the test cluster for both stacks, run nothing
reframe-dry-run: venv
	@$(RFM_RUN) --system testcluster --stack commodity --stack vendor --dry-run -- $(RFM_ARGS)

reframe-list: venv
	@$(VENV)/bin/reframe -C $(REPO)/reframe-tests/config/site.py --system $(RFM_SYSTEM) -l $(RFM_ARGS)

## reframe-compare: vendor vs commodity over the last 7 days (median per test, partition, variable)
reframe-compare: venv
	@$(VENV)/bin/reframe -C $(REPO)/reframe-tests/config/site.py --system $(RFM_SYSTEM) --table-format=csv \
	  --performance-compare='now-7d:now?stack=="vendor"/now-7d:now?stack=="commodity"/median:name,partition,pvar,punit/+environ' \
	  --term-lhs=vendor --term-rhs=commodity
