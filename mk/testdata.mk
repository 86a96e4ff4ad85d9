# Test data for `make test` only: the recorded topologies, golden mappings and fixtures the tests
# compare against live in the project's shared/ directory beside the checkout (or $STACKPROOF_SHARED).
# The product never reads it: no build or acceptance target depends on this variable; only the test
# targets below export it (to their prerequisites too, so mpibind's ctest registers the golden tests).
SHARED := $(abspath $(or $(STACKPROOF_SHARED),../shared))

test test-python test-python-fast test-python-slow test-python-live check mpibind-test bench-mpibind vcluster-test laptop-acceptance: export STACKPROOF_SHARED := $(SHARED)
