# make bench-acceptance   the time to verdict and the verdict's own checks (docs/performance.md
#                         "Time to verdict"): three `make acceptance` runs, commodity vs vendor, vs a
#                         copy of itself (A/A) and vs itself made worse on purpose
#                         (reframe-tests/stacks/experiments/), then build/bench-acceptance/summary.md.
#                         Its duration: docs/performance.md. ACCEPTANCE_ARGS apply to every run.
.PHONY: bench-acceptance
bench-acceptance: build
	@$(PY) -m stackproof.acceptance.bench -o $(BUILD)/bench-acceptance -- $(ACCEPTANCE_ARGS)
