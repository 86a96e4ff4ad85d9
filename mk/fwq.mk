# FWQ noise benchmark (fwq/): fwq-mpi, fwq-th, the fwq-noise injector and libfwq-selfish.so.
#   make fwq         configure + build with CMake into $(BUILD)/fwq
#   make fwq-ctest   the binaries' own smoke and bad-input tests (part of make test)
#   make bench-fwq   benchmark (not a test): calibration error, timer overhead, gather time and memory
#                    for 4.4 M samples, analysis time -> $(BUILD)/fwq/bench.json (see docs/performance.md)
FWQ_BUILD := $(BUILD)/fwq

.PHONY: fwq fwq-ctest bench-fwq
fwq: | deps
	@echo "== fwq: cmake build in $(FWQ_BUILD)"
	@mkdir -p $(FWQ_BUILD)
	@cmake -S $(REPO)/fwq -B $(FWQ_BUILD) -DCMAKE_BUILD_TYPE=Release > $(FWQ_BUILD)/configure.log 2>&1 \
	  || { cat $(FWQ_BUILD)/configure.log; exit 1; }
	@cmake --build $(FWQ_BUILD) -j2 > $(FWQ_BUILD)/build.log 2>&1 || { cat $(FWQ_BUILD)/build.log; exit 1; }
	@grep -i -A3 'warning' $(FWQ_BUILD)/build.log || true

fwq-ctest: fwq
	@echo "== fwq: ctest"
	@cd $(FWQ_BUILD) && ctest --output-on-failure -j2 | tail -n 3

bench-fwq: fwq venv
	@$(PY) -m stackproof.noise.bench --out $(FWQ_BUILD)/bench.json

BUILD_TARGETS += fwq
TEST_TARGETS  += fwq-ctest
