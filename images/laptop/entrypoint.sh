#!/bin/sh
# Laptop image entry point.
#   acceptance [ARGS]   the acceptance (python -m stackproof.acceptance ARGS; default: commodity vs
#                       vendor, baseline commodity): brings up the local Slurm test cluster (the
#                       munge key is made then, in the container), runs the ReFrame suite on both
#                       stacks, writes report.html/.md/.json to /opt/stackproof/reports (mount it).
#                       Needs `podman run --privileged --network host` (namespaces, cgroups, a
#                       non-loopback address for slurmd); docs/images.md for Apptainer.
#   smoke               the image smoke only (no daemons)
#   shell / any command run it
set -eu
PATH=/opt/stackproof/venv/bin:"$PATH"
# Our components as installed in the image (a source checkout finds them in build/ instead)
STACKPROOF_FWQ=/opt/stackproof/bin/fwq-mpi
STACKPROOF_FWQ_NOISE=/opt/stackproof/bin/fwq-noise
STACKPROOF_FWQ_BUILD=/opt/stackproof/bin
STACKPROOF_MPIBIND=/opt/stackproof/bin/mpibind
STACKPROOF_MPIBIND_PLUGIN=/opt/stackproof/lib/mpibind/mpibind_slurm.so
# The stacks built into the image (a host's STACKPROOF_STACKS_ROOT, passed in by apptainer, is not them)
STACKPROOF_STACKS_ROOT=/opt/stackproof/stacks
# Outputs outside the installed package's data: mount /opt/stackproof/reports to keep the report
STACKPROOF_REPORT_DIR=${STACKPROOF_REPORT_DIR:-/opt/stackproof/reports}
STACKPROOF_RFM_PREFIX=${STACKPROOF_RFM_PREFIX:-/opt/stackproof/build/reframe}
export PATH STACKPROOF_FWQ STACKPROOF_FWQ_NOISE STACKPROOF_FWQ_BUILD STACKPROOF_MPIBIND STACKPROOF_MPIBIND_PLUGIN
export STACKPROOF_STACKS_ROOT STACKPROOF_REPORT_DIR STACKPROOF_RFM_PREFIX
case "${1:-acceptance}" in
smoke) exec /usr/local/share/stackproof-images/smoke.sh ;;
shell) exec /bin/bash ;;
acceptance)
  [ $# -gt 0 ] && shift
  exec python3 -m stackproof.acceptance "$@"     # brings the test cluster up itself
  ;;
*) exec "$@" ;;
esac
