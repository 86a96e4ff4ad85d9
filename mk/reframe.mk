# ReFrame acceptance suite (reframe-tests/). Tested by pytest (tests/test_reframe_*.py, part of
# `make test`); these targets run the suite by hand. RFM_STACK=<a reframe-tests/stacks/ file name>,
# RFM_SYSTEM=local|testcluster|<site>; extra ReFrame options in RFM_ARGS (e.g. RFM_ARGS="-n NetPIPE").
# reframe-compare: RFM_TARGET against RFM_BASELINE (stack names; environ of the stored test cases),
# works within one two-stack session and across sessions (RFM_PERIOD).
RFM_SYSTEM ?= local
RFM_STACK  ?= commodity
RFM_BASELINE ?= commodity
RFM_TARGET ?= vendor
RFM_PERIOD ?= now-7d:now
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

## reframe-compare: RFM_TARGET vs RFM_BASELINE in RFM_PERIOD (median over repeats per check, variable)
reframe-compare: venv
	@$(VENV)/bin/reframe -C $(REPO)/reframe-tests/config/site.py --system $(RFM_SYSTEM) --table-format=csv \
	  --performance-compare='$(RFM_PERIOD)/$(RFM_PERIOD)/median:basename,benchmark,buffers,code,size,deck,profile,signature,partition,pvar,punit/+psamples' \
	  -E 'environ=="$(RFM_TARGET)"' -E 'environ=="$(RFM_BASELINE)"' --term-lhs=$(RFM_TARGET) --term-rhs=$(RFM_BASELINE)
