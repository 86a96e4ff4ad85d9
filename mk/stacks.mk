# Software stacks under test (reframe-tests/stacks/<name>.yaml), installed and built outside the repo
# in $STACKPROOF_STACKS_ROOT (default /opt/stackproof/stacks):
#   make stacks   install the default stacks (pip stacks: pinned wheels into a venv at the prefix, ~1.2 GB
#                 for Intel MPI + MKL on a fresh machine; system stacks: check their Debian packages) and
#                 build their benchmarks (mpi_identity, mpi_hello, fwq-mpi, NetPIPE; OSU/AMG/SW4 when
#                 STACKPROOF_BENCH_SOURCES has their mirrors). Idempotent: a second run takes seconds.
# Part of `make build`, so `make acceptance` and `make test` (CI) have the stacks.
STACKS ?= commodity vendor commodity-next

.PHONY: stacks
stacks: deps
	@echo "== stacks: $(STACKS) (root $${STACKPROOF_STACKS_ROOT:-/opt/stackproof/stacks})"
	@$(STACKPROOF) stack install $(STACKS)
	@nice -n 10 $(STACKPROOF) stack build $(STACKS)

BUILD_TARGETS += stacks
