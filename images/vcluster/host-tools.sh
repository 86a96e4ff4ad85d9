#!/bin/sh
# Debian packages the virtual cluster needs on the host (pinned by the Debian 12 release): QEMU and
# its iPXE option ROMs, dnsmasq for DHCP/TFTP, zstd for the image, the Slurm controller and munge
# for the head, mpicc for the MPI hello. Only installs what is missing; starts no service.
set -eu
need="qemu-system-x86 ipxe-qemu dnsmasq-base zstd cpio munge slurmctld slurm-client libopenmpi-dev"
missing=""
for p in $need; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "vcluster: missing Debian packages:$missing (run as root or apt-get install them)" >&2
  exit 1
fi
echo "vcluster: apt-get install$missing"
apt-get -o DPkg::Lock::Timeout=900 update -qq
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends $missing >/dev/null
