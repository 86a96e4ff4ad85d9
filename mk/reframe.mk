# ReFrame acceptance suite (reframe-tests/). Tested by pytest (tests/test_reframe_*.py, part of
# `make test`); these targets run the suite by hand. RFM_STACK=<a reframe-tests/stacks/ file name>,
# RFM_SYSTEM=local|testcluster|<site>; extra ReFrame options in RFM_ARGS (e.g. RFM_ARGS="-n NetPIPE").
# RFM_PROFILES (test cluster): `--profile` values for run.py, one cluster configuration and session
# each (e.g. RFM_PROFILES=all); empty: the profile the running cluster has.
# reframe-compare: RFM_TARGET against RFM_BASELINE (stack names; environ of the stored test cases),
# works within one two-stack session and across sessions (RFM_PERIOD).
RFM_SYSTEM ?= local
RFM_STACK  ?= commodity
RFM_BASELINE ?= commodity
RFM_TARGET ?= vendor
RFM_PERIOD ?= now-7d:now
RFM_ARGS   ?=
RFM_PROFILES ?=
RFM_RUN    := $(PY) $(REPO)/reframe-tests/run.py

.PHONY: reframe-run reframe-dry-run reframe-list reframe-compare

## reframe-run: run the suite for one system and stack (results go to the results database)
reframe-run: venv
	@$(RFM_RUN) --system $(RFM_SYSTEM) --stack $(RFM_STACK) $(foreach p,$(RFM_PROFILES),--profile $(p)) -- $(RFM_ARGS)

## reframe-dry-run: generate every job script of the test cluster for both stacks, run nothing
reframe-dry-run: venv
	@$(RFM_RUN) --system testcluster --stack commodity --stack vendor --dry-run -- $(RFM_ARGS)

reframe-list: venv
	@$(VENV)/bin/reframe -C $(REPO)/reframe-tests/config/site.py --system $(RFM_SYSTEM) -l $(RFM_ARGS)

## reframe-compare: RFM_TARGET vs RFM_BASELINE in RFM_PERIOD: per check tagged `compare` (the checks
## that run in blocks) or `fwq`, the median over its blocks of each performance variable, grouped by basename and
## that check's own parameters (run.py --compare-groups reads them from `reframe --describe`; ReFrame
## cannot join a parameter column that one side lacks, so each check is compared on its own; `name`
## carries the block index, `sysenv` the stack: neither may be a group-by column). Sessions where each
## stack ran its own blocks (reframe-run per stack): a block of two stacks holds both in one test case.
RFM_COMPARE_GROUPS = $(shell $(RFM_RUN) --system $(RFM_SYSTEM) --compare-groups)
RFM_CMP = $(VENV)/bin/reframe -C $(REPO)/reframe-tests/config/site.py --system $(RFM_SYSTEM) --table-format=csv \
  -E 'environ=="$(RFM_TARGET)"' -E 'environ=="$(RFM_BASELINE)"' --term-lhs=$(RFM_TARGET) --term-rhs=$(RFM_BASELINE)
reframe-compare: venv
	@for g in $(RFM_COMPARE_GROUPS); do check=$${g%%:*}; cols=$${g#*:}; \
	  out=$$($(RFM_CMP) -n "^$$check" \
	    --performance-compare="$(RFM_PERIOD)/$(RFM_PERIOD)/median:$$cols,partition,pvar,punit/+psamples" 2>/dev/null); \
	  if [ $$? -eq 0 ] && [ "$$(printf '%s\n' "$$out" | wc -l)" -gt 1 ]; then printf '%s\n\n' "$$out"; \
	  else printf '# %s: not measured for both %s and %s\n\n' $$check $(RFM_TARGET) $(RFM_BASELINE); fi; \
	done
