#!/bin/sh
# Debian packages the image builds need on the build host (pinned by the Debian 12 release).
# Only installs when something is missing; never touches running services.
set -eu
need="podman buildah mmdebstrap runc uidmap shellcheck cpio"
missing=""
for p in $need; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "images: missing Debian packages:$missing (run as root or apt-get install them)" >&2
  exit 1
fi
echo "images: apt-get install$missing"
apt-get -o DPkg::Lock::Timeout=900 update -qq
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends $missing >/dev/null
