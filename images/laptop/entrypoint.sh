#!/bin/sh
# Laptop image entry point.
#   acceptance [ARGS]   the acceptance suite (it brings up the local Slurm test cluster; the munge
#                       key is made then, in the container). Needs `podman run --privileged --network host`
#                       (network namespaces for the test cluster).
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
# Outputs outside the installed package's data (mount /opt/stackproof/reports to keep the report)
STACKPROOF_REPORT_DIR=${STACKPROOF_REPORT_DIR:-/opt/stackproof/reports/acceptance}
STACKPROOF_RFM_PREFIX=${STACKPROOF_RFM_PREFIX:-/opt/stackproof/build/reframe}
export PATH STACKPROOF_FWQ STACKPROOF_FWQ_NOISE STACKPROOF_FWQ_BUILD STACKPROOF_MPIBIND STACKPROOF_MPIBIND_PLUGIN
export STACKPROOF_REPORT_DIR STACKPROOF_RFM_PREFIX
case "${1:-acceptance}" in
smoke) exec /usr/local/share/stackproof-images/smoke.sh ;;
shell) exec /bin/bash ;;
acceptance)
  [ $# -gt 0 ] && shift
  python3 -c 'import stackproof.acceptance' 2>/dev/null || {
    echo "stackproof-laptop: this image's stackproof has no acceptance module; running the smoke" >&2
    exec /usr/local/share/stackproof-images/smoke.sh
  }
  exec python3 -m stackproof.acceptance "$@"     # brings the test cluster up itself
  ;;
*) exec "$@" ;;
esac
