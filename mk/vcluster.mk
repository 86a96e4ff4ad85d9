# Virtual cluster: QEMU TCG nodes network-booted (DHCP/TFTP/iPXE/HTTP) from the Debian 12 node image,
# Warewulf-style overlays, Slurm across them. See docs/warewulf.md.
#   make vcluster-test   boot 2 nodes, srun -N2 hostname, MPI hello across them, ReFrame (MPI hello,
#                        FWQ) on the vcluster system, up twice, down (tests/test_vcluster_live.py);
#                        part of `make test` only when STACKPROOF_VCLUSTER=1 (.ci/run sets it). Needs
#                        root, /dev/net/tun, ~3.5 GB RAM. The boot is a long step of CI: `make test`
#                        runs the module once, here, in a lane of its own beside the tests that start no
#                        daemon (its VMs wait on their jobs most of the time; their own namespace, ports
#                        and Slurm), and the pytest runs leave it out.
#   make vcluster-up / vcluster-down
.PHONY: vcluster-tools vcluster-test vcluster-up vcluster-down
ifeq ($(STACKPROOF_VCLUSTER),1)
TOOL_TARGETS += vcluster-tools
TEST_LANES   += vcluster-test
PYTEST_ARGS  += --ignore=tests/test_vcluster_live.py
endif

vcluster-tools:
	@./images/common/host-tools.sh vcluster qemu-system-x86 ipxe-qemu dnsmasq-base zstd cpio munge slurmctld slurm-client libopenmpi-dev

$(IMAGES_OUT)/debian12-compute.oci.tar:
	@$(MAKE) --no-print-directory images-debian

vcluster-up: venv vcluster-tools $(IMAGES_OUT)/debian12-compute.oci.tar
	@$(STACKPROOF) vcluster up --nodes $${VCLUSTER_NODES:-2}

vcluster-down: venv
	@$(STACKPROOF) vcluster down

vcluster-test: venv vcluster-tools $(IMAGES_OUT)/debian12-compute.oci.tar
	@echo "== vcluster: boot 2 QEMU nodes from the node image, Slurm + MPI across them"
	@start=$$(date +%s); STACKPROOF_VCLUSTER=1 $(PY) -m pytest -ra -s -p no:cacheprovider $(PYTEST_DURATIONS) \
	  tests/test_vcluster_live.py; rc=$$?; \
	  echo "vcluster-test took $$(( $$(date +%s) - start )) s"; exit $$rc
