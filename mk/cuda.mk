# CUDA toolchain for building the GPU programs without a GPU (issue 12): NVIDIA's nvcc 13.0 and CUDA
# runtime from PyPI wheels, pinned with hashes in requirements-cuda.txt, into $(CUDA_TOOLCHAIN)
# (CUDA_HOME = $(CUDA_TOOLCHAIN)/nvidia/cu13). tests/test_gpu_health.py compiles and links
# gpu_health.cu with it for sm_80 and sm_90 and runs the ReFrame check's real build.
#   make cuda-toolchain   ~97 MiB download, 253 MB in build/ (part of make build; time: docs/performance.md)
CUDA_TOOLCHAIN := $(BUILD)/cuda-toolchain

.PHONY: cuda-toolchain
cuda-toolchain: $(CUDA_TOOLCHAIN)/.installed
$(CUDA_TOOLCHAIN)/.installed: requirements-cuda.txt | venv
	@echo "== cuda-toolchain: nvcc and the CUDA runtime (PyPI wheels) in $(CUDA_TOOLCHAIN)"
	@rm -rf $(CUDA_TOOLCHAIN)
	@$(PY) -m pip install -q --disable-pip-version-check --no-deps --require-hashes \
	  --target $(CUDA_TOOLCHAIN) -r requirements-cuda.txt
	@# nvcc.profile links from lib64/, the wheels ship lib/
	@ln -sfn lib $(CUDA_TOOLCHAIN)/nvidia/cu13/lib64
	@$(CUDA_TOOLCHAIN)/nvidia/cu13/bin/nvcc --version | tail -n 2
	@touch $@

BUILD_TARGETS += cuda-toolchain

# gpu-record: ON A GPU NODE, the one command that records the GPU path (docs/gpu.md, "How a site runs
# the GPU path"): node type, mpibind, GPU health and FWQ on `--system local:gpu`, into build/gpu-record.
.PHONY: gpu-record
gpu-record: venv mpibind-build cuda-toolchain fwq
	@$(MAKE) --no-print-directory stacks STACKS=commodity
	@GPU_RECORD=$(BUILD)/gpu-record ./scripts/gpu-record.sh
