# Node and laptop images (images/), Warewulf configuration and site overlays. See docs/images.md.
#   make images-test     render/lint/structure tests always; the Debian image build + smoke + secret
#                        scan, then the laptop image on top of it and its acceptance inside podman
#                        (tests/test_images_laptop_live.py: commodity vs vendor, the report checked),
#                        when STACKPROOF_IMAGES=1, or (STACKPROOF_IMAGES unset) when podman and
#                        mmdebstrap are installed. STACKPROOF_IMAGES=0 never builds.
#                        make test runs the same steps in its lanes: images-lint with the tests,
#                        images-node beside the host build, images-laptop-build beside the tests,
#                        laptop-acceptance alone (it brings up the test cluster in the container).
#   make images-debian   build the Debian 12 node image (OCI archive + manifest, SIF with apptainer)
#   make images-laptop   the laptop image: commodity + vendor stacks built inside (OCI archive, and SIF
#                        when apptainer is on PATH); network only on the host, the image build is offline;
#                        each benchmark the host built with the same inputs is reused, not built again
#   make laptop-acceptance   its acceptance in podman, the report checked (LAPTOP_ACCEPTANCE_ARGS)
#   make laptop-sif      the laptop image's SIF with a real apptainer (PATH or STACKPROOF_APPTAINER),
#                        rebuilt only when its inputs change, and the smoke inside it (apptainer exec/test)
#   make images-lint     shellcheck + hadolint on every recipe and script
#   make images-regen    regenerate images/warewulf/nodes.conf and the overlays' test inputs/expected
IMAGES_OUT ?= $(BUILD)/images
IMAGES_BUILD_WANTED = $(shell if [ "$${STACKPROOF_IMAGES:-}" = 1 ]; then echo yes; \
  elif [ -z "$${STACKPROOF_IMAGES:-}" ] && command -v podman >/dev/null && command -v mmdebstrap >/dev/null; then echo yes; fi)

.PHONY: images-test images-lint images-debian images-laptop images-smoke images-regen images-tools laptop-sif
.PHONY: laptop-acceptance images-node images-laptop-build
TOOL_TARGETS += images-tools
TEST_TARGETS += images-lint
ifeq ($(IMAGES_BUILD_WANTED),yes)
BUILD_LANES  += images-node
TEST_LANES   += images-laptop-build
LIVE_TARGETS += laptop-acceptance
# laptop-acceptance runs it, alone (its test cluster takes the host's network and ports)
PYTEST_ARGS  += --ignore=tests/test_images_laptop_live.py
endif
# the acceptance's short configuration for CI (both stacks measured); empty: the test's own default
LAPTOP_ACCEPTANCE_ARGS ?=

images-tools:
	@./images/common/host-tools.sh images podman buildah mmdebstrap runc uidmap shellcheck cpio

images-lint: venv images-tools
	@PATH="$(VENV)/bin:$$PATH" ./images/common/lint.sh

images-debian: venv images-tools
	@./images/debian12-compute/build.sh --out $(IMAGES_OUT)

images-laptop: venv images-tools
	@./images/laptop/build.sh --out $(IMAGES_OUT)

laptop-acceptance: venv images-tools
	@start=$$(date +%s); STACKPROOF_LAPTOP_ACCEPTANCE_ARGS="$(LAPTOP_ACCEPTANCE_ARGS)" \
	  $(PY) -m pytest -ra -s -p no:cacheprovider $(PYTEST_DURATIONS) tests/test_images_laptop_live.py; rc=$$?; \
	  echo "laptop-acceptance took $$(( $$(date +%s) - start )) s"; exit $$rc

laptop-sif: venv images-tools
	@./images/laptop/sif.sh --out $(IMAGES_OUT) smoke

images-smoke: images-debian
	@./images/common/run-smoke.sh $(IMAGES_OUT)/debian12-compute.oci.tar
	@$(STACKPROOF) images scan $(IMAGES_OUT)/debian12-compute.oci.tar

# the Debian node image built, smoke-tested and scanned (make test: beside the host build)
images-node: venv images-tools
	@echo "== images: Debian image build + smoke + secret scan"
	@start=$$(date +%s); $(MAKE) --no-print-directory images-smoke; rc=$$?; \
	  echo "images-node: Debian image build + smoke + scan took $$(( $$(date +%s) - start )) s"; exit $$rc

# the laptop image on the node image, the host's benchmark builds reused where their key matches (make
# test: beside the tests, after the host build and the node image)
images-laptop-build: venv images-tools
	@echo "== images: laptop image (on the Debian image, both stacks inside, the host's builds reused)"
	@start=$$(date +%s); STACKPROOF_NO_SIF=1 ./images/laptop/build.sh --out $(IMAGES_OUT); rc=$$?; \
	  echo "images-laptop-build: laptop image build took $$(( $$(date +%s) - start )) s"; exit $$rc

images-test: venv images-tools
	@echo "== images: lint"
	@$(MAKE) --no-print-directory images-lint
ifeq ($(IMAGES_BUILD_WANTED),yes)
	@$(MAKE) --no-print-directory images-node images-laptop-build laptop-acceptance
else
	@echo "images-test: skipping the Debian image build (set STACKPROOF_IMAGES=1, or install podman and mmdebstrap)"
endif

images-regen: venv
	@$(STACKPROOF) images warewulf-nodes -o images/warewulf/nodes.conf
	@for o in slurm corespec munge; do d=images/warewulf/overlays/$$o/internal; \
	  $(STACKPROOF) images warewulf-nodes --no-default-profile --spec $$d/cluster.yaml -o $$d/nodes.conf; done
	@for o in slurm corespec; do d=images/warewulf/overlays/$$o/internal; rm -rf $$d/expected; \
	  $(STACKPROOF) images warewulf-expected --overlay $$o --spec $$d/cluster.yaml -o $$d/expected; done
