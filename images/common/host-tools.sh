#!/bin/sh
# host-tools.sh LABEL PACKAGE...: install the Debian packages (pinned by the Debian 12 release) that
# a part of stackproof needs on the build host, when any is missing; LABEL prefixes the messages.
# Starts and touches no service. Callers (mk/*.mk) name their packages:
#   images    podman buildah mmdebstrap runc uidmap shellcheck cpio
#   vcluster  QEMU and its iPXE ROMs, dnsmasq (DHCP/TFTP), zstd, the Slurm controller and munge for
#             the head, mpicc for the MPI hello
set -eu
if [ "$#" -lt 2 ]; then
  echo "usage: $0 LABEL PACKAGE..." >&2
  exit 2
fi
label=$1
shift
missing=""
for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "$label: missing Debian packages:$missing (run as root or apt-get install them)" >&2
  exit 1
fi
echo "$label: apt-get install$missing"
apt-get -o DPkg::Lock::Timeout=900 update -qq
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends $missing >/dev/null
