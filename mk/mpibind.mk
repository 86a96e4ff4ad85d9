# mpibind (issue 4): C library, CLI, Slurm SPANK plugin, Python binding; CMake + ctest.
# Outputs under $(BUILD)/mpibind: lib/libmpibind.so, bin/mpibind, plugin/mpibind_slurm.so.
MPIBIND_SRC   := $(REPO)/mpibind
MPIBIND_BUILD := $(BUILD)/mpibind
MPIBIND_JOBS  ?= 2

BUILD_TARGETS += mpibind-build
TEST_TARGETS  += mpibind-test

.PHONY: mpibind-build mpibind-test bench-mpibind mpibind-install

# deps (order-only): cmake, hwloc and the venv's Python must exist before configuring, from a fresh clone too.
$(MPIBIND_BUILD)/CMakeCache.txt: $(MPIBIND_SRC)/CMakeLists.txt | deps
	@echo "== mpibind: configure"
	@mkdir -p $(MPIBIND_BUILD)
	@cmake -S $(MPIBIND_SRC) -B $(MPIBIND_BUILD) -DPython3_EXECUTABLE=$(PY) \
	  >$(MPIBIND_BUILD)/configure.log 2>&1 \
	  || { cat $(MPIBIND_BUILD)/configure.log; exit 1; }

# The Python binding is installed into the venv from the build tree, where CMake
# recorded the library path (mpibind/_libpath.py); reinstalled when it changes.
$(MPIBIND_BUILD)/.pip-installed: $(MPIBIND_BUILD)/lib/libmpibind.so $(MPIBIND_BUILD)/python/mpibind/__init__.py $(MPIBIND_BUILD)/python/pyproject.toml $(MPIBIND_BUILD)/python/mpibind/_libpath.py | venv
	@echo "== mpibind: pip install the Python binding into $(VENV)"
	@$(PY) -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation \
	  --force-reinstall $(MPIBIND_BUILD)/python >$(MPIBIND_BUILD)/pip.log 2>&1 \
	  || { cat $(MPIBIND_BUILD)/pip.log; exit 1; }
	@touch $@

mpibind-build: $(MPIBIND_BUILD)/CMakeCache.txt
	@echo "== mpibind: build"
	@cmake --build $(MPIBIND_BUILD) -j $(MPIBIND_JOBS) -- --no-print-directory \
	  | grep -E "error|warning|Error" || true
	@test -f $(MPIBIND_BUILD)/lib/libmpibind.so
	@$(MAKE) --no-print-directory $(MPIBIND_BUILD)/.pip-installed

mpibind-test: mpibind-build
	@echo "== mpibind: ctest (unit, golden replay, robustness, cli, plugin)"
	@cmake -S $(MPIBIND_SRC) -B $(MPIBIND_BUILD) -DSTACKPROOF_SHARED=$(SHARED) >>$(MPIBIND_BUILD)/configure.log 2>&1 \
	  || { tail -20 $(MPIBIND_BUILD)/configure.log; exit 1; }
	@cd $(MPIBIND_BUILD) && ctest --output-on-failure -j $(MPIBIND_JOBS)

# Mapping time on every shared topology and on a synthetic 384-PU, 8-NUMA, 8-GPU node.
bench-mpibind: mpibind-build
	@$(PY) $(MPIBIND_SRC)/bench/make_synthetic_xml.py $(MPIBIND_BUILD)/synthetic-384pu-8numa-8gpu.xml
	@$(MPIBIND_BUILD)/bin/mpibind_bench -n 200 $(MPIBIND_BUILD)/synthetic-384pu-8numa-8gpu.xml \
	  $(wildcard $(SHARED)/topologies/*.xml) $(wildcard $(SHARED)/topologies/robustness/*.xml)

# make mpibind-install PREFIX=/usr/local (library, header, pkg-config, CLI, plugin, Python module)
PREFIX ?= /usr/local
mpibind-install: mpibind-build
	@cmake --install $(MPIBIND_BUILD) --prefix $(PREFIX)
