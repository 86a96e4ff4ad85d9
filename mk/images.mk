# Node and laptop images (images/), Warewulf configuration and site overlays. See docs/images.md.
#   make images-test     render/lint/structure tests always; the Debian image build + smoke + secret
#                        scan, then the laptop image on top of it and its acceptance inside podman
#                        (tests/test_images_laptop_live.py: commodity vs vendor, the report checked),
#                        when STACKPROOF_IMAGES=1, or (STACKPROOF_IMAGES unset) when podman and
#                        mmdebstrap are installed. STACKPROOF_IMAGES=0 never builds.
#   make images-debian   build the Debian 12 node image (OCI archive + manifest, SIF with apptainer)
#   make images-laptop   the laptop image: commodity + vendor stacks built inside (OCI archive, and SIF
#                        when apptainer is on PATH); network only on the host, the image build is offline
#   make laptop-acceptance   its acceptance in podman, the report checked (LAPTOP_ACCEPTANCE_ARGS)
#   make laptop-sif      the laptop image's SIF with a real apptainer (PATH or STACKPROOF_APPTAINER),
#                        rebuilt only when its inputs change, and the smoke inside it (apptainer exec/test)
#   make images-lint     shellcheck + hadolint on every recipe and script
#   make images-regen    regenerate images/warewulf/nodes.conf and the overlays' test inputs/expected
IMAGES_OUT ?= $(BUILD)/images
IMAGES_BUILD_WANTED = $(shell if [ "$${STACKPROOF_IMAGES:-}" = 1 ]; then echo yes; \
  elif [ -z "$${STACKPROOF_IMAGES:-}" ] && command -v podman >/dev/null && command -v mmdebstrap >/dev/null; then echo yes; fi)

.PHONY: images-test images-lint images-debian images-laptop images-smoke images-regen images-tools laptop-sif
.PHONY: laptop-acceptance
TEST_TARGETS += images-test
ifeq ($(IMAGES_BUILD_WANTED),yes)
# images-test runs it (before pytest's own run: its test cluster takes the host's network and ports)
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
	  $(PY) -m pytest -ra -s tests/test_images_laptop_live.py; rc=$$?; \
	  echo "laptop-acceptance took $$(( $$(date +%s) - start )) s"; exit $$rc

laptop-sif: venv images-tools
	@./images/laptop/sif.sh --out $(IMAGES_OUT) smoke

images-smoke: images-debian
	@./images/common/run-smoke.sh $(IMAGES_OUT)/debian12-compute.oci.tar
	@$(STACKPROOF) images scan $(IMAGES_OUT)/debian12-compute.oci.tar

images-test: venv images-tools
	@echo "== images: lint"
	@$(MAKE) --no-print-directory images-lint
ifeq ($(IMAGES_BUILD_WANTED),yes)
	@echo "== images: Debian image build + smoke + secret scan"
	@start=$$(date +%s); $(MAKE) --no-print-directory images-smoke; rc=$$?; \
	  echo "images-test: Debian image build + smoke + scan took $$(( $$(date +%s) - start )) s"; exit $$rc
	@echo "== images: laptop image (on the Debian image, both stacks built inside) + its acceptance in podman"
	@start=$$(date +%s); STACKPROOF_NO_SIF=1 ./images/laptop/build.sh --out $(IMAGES_OUT); rc=$$?; \
	  echo "images-test: laptop image build took $$(( $$(date +%s) - start )) s"; exit $$rc
	@$(MAKE) --no-print-directory laptop-acceptance
else
	@echo "images-test: skipping the Debian image build (set STACKPROOF_IMAGES=1, or install podman and mmdebstrap)"
endif

images-regen: venv
	@$(STACKPROOF) images warewulf-nodes -o images/warewulf/nodes.conf
	@for o in slurm corespec munge; do d=images/warewulf/overlays/$$o/internal; \
	  $(STACKPROOF) images warewulf-nodes --no-default-profile --spec $$d/cluster.yaml -o $$d/nodes.conf; done
	@for o in slurm corespec; do d=images/warewulf/overlays/$$o/internal; rm -rf $$d/expected; \
	  $(STACKPROOF) images warewulf-expected --overlay $$o --spec $$d/cluster.yaml -o $$d/expected; done
