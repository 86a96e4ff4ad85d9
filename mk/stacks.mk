# Software stacks under test (reframe-tests/stacks/<name>.yaml), installed and built outside the repo
# in $STACKPROOF_STACKS_ROOT (default /opt/stackproof/stacks):
#   make stacks   install the default stacks (pip stacks: pinned wheels into a venv at the prefix, ~1.2 GB
#                 for Intel MPI + MKL on a fresh machine; system stacks: check their Debian packages) and
#                 build their benchmarks from the recipes in src/stackproof/stacks/data/recipes.yaml:
#                 mpi_identity, mpi_hello, fwq-mpi and NetPIPE for every stack; HPCC 1.5.0 and hypre's
#                 ij (Debian's source archive, a few minutes per stack on 2 cores) and OSU, AMG and SW4
#                 (when $STACKPROOF_SOURCE_MIRROR or upstream has them) for APP_STACKS.
#                 Idempotent: a second run takes seconds. Sources are cached under the stacks root.
#                 Each build is keyed by the hash of its inputs (stacks/buildkey.py); first the build
#                 toolchain (compilers, binutils, headers, MPI, BLAS: `stackproof stack toolchain`) is
#                 brought to the archive's current versions, the ones a node image built now has, so
#                 the laptop image reuses these builds (images/laptop/build.sh) instead of compiling again.
# Part of `make build`, so `make acceptance` and `make test` (CI) have the stacks.
STACKS ?= commodity vendor commodity-next
# the stacks the acceptance compares on applications (the others get the small benchmarks only)
APP_STACKS ?= commodity vendor
BASE_TARGETS := probe,hello,fwq,netpipe

.PHONY: stacks
stacks: deps
	@echo "== stacks: $(STACKS) (root $${STACKPROOF_STACKS_ROOT:-/opt/stackproof/stacks})"
	@./scripts/install-deps.sh --upgrade $$($(STACKPROOF) stack toolchain --outdated $(STACKS))
	@$(STACKPROOF) stack install $(STACKS)
	@apps="$(filter $(APP_STACKS),$(STACKS))"; [ -z "$$apps" ] || nice -n 10 $(STACKPROOF) stack build $$apps
	@rest="$(filter-out $(APP_STACKS),$(STACKS))"; \
	  [ -z "$$rest" ] || nice -n 10 $(STACKPROOF) stack build --only $(BASE_TARGETS) $$rest

BUILD_TARGETS += stacks
