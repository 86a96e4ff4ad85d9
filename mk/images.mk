# Node and laptop images (images/), Warewulf configuration and site overlays. See docs/images.md.
#   make images-test     render/lint/structure tests always; the Debian image build + smoke + secret
#                        scan when STACKPROOF_IMAGES=1, or (STACKPROOF_IMAGES unset) when podman and
#                        mmdebstrap are installed. STACKPROOF_IMAGES=0 never builds.
#   make images-debian   build the Debian 12 node image (OCI archive + manifest, SIF with apptainer)
#   make images-laptop   the laptop image (OCI archive, and SIF when apptainer is on PATH)
#   make laptop-sif      the laptop image's SIF with a real apptainer (PATH or STACKPROOF_APPTAINER),
#                        rebuilt only when its inputs change, and the smoke inside it (apptainer exec/test)
#   make images-lint     shellcheck + hadolint on every recipe and script
#   make images-regen    regenerate images/warewulf/nodes.conf and the overlays' test inputs/expected
IMAGES_OUT ?= $(BUILD)/images
IMAGES_BUILD_WANTED = $(shell if [ "$${STACKPROOF_IMAGES:-}" = 1 ]; then echo yes; \
  elif [ -z "$${STACKPROOF_IMAGES:-}" ] && command -v podman >/dev/null && command -v mmdebstrap >/dev/null; then echo yes; fi)

.PHONY: images-test images-lint images-debian images-laptop images-smoke images-regen images-tools laptop-sif
TEST_TARGETS += images-test

images-tools:
	@./images/common/host-tools.sh images podman buildah mmdebstrap runc uidmap shellcheck cpio

images-lint: venv images-tools
	@PATH="$(VENV)/bin:$$PATH" ./images/common/lint.sh

images-debian: venv images-tools
	@./images/debian12-compute/build.sh --out $(IMAGES_OUT)

images-laptop: venv images-tools
	@./images/laptop/build.sh --out $(IMAGES_OUT)

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
	@start=$$(date +%s); $(MAKE) --no-print-directory images-smoke; \
	  echo "images-test: Debian image build + smoke + scan took $$(( $$(date +%s) - start )) s"
else
	@echo "images-test: skipping the Debian image build (set STACKPROOF_IMAGES=1, or install podman and mmdebstrap)"
endif

images-regen: venv
	@$(STACKPROOF) images warewulf-nodes -o images/warewulf/nodes.conf
	@for o in slurm corespec munge; do d=images/warewulf/overlays/$$o/internal; \
	  $(STACKPROOF) images warewulf-nodes --no-default-profile --spec $$d/cluster.yaml -o $$d/nodes.conf; done
	@for o in slurm corespec; do d=images/warewulf/overlays/$$o/internal; rm -rf $$d/expected; \
	  $(STACKPROOF) images warewulf-expected --overlay $$o --spec $$d/cluster.yaml -o $$d/expected; done
