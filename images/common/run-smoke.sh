#!/bin/sh
# Run the acceptance smoke in an image given as an OCI archive: podman (vfs/runc settings of
# podman-env.sh), and the SIF next to it with apptainer when both exist.
# usage: run-smoke.sh IMAGE.oci.tar
set -eu
archive=${1:?usage: run-smoke.sh IMAGE.oci.tar}
[ -f "$archive" ] || { echo "run-smoke: error: $archive not found (build it first: make images-debian)" >&2; exit 1; }
IMAGES_STATE=$(cd "$(dirname "$archive")" && pwd)/podman
export IMAGES_STATE
# shellcheck source=images/common/podman-env.sh
. "$(dirname "$0")/podman-env.sh"
image=$(podman load -q -i "$archive" | sed -n 's/^Loaded image[^:]*: *//p' | head -n1)
[ -n "$image" ] || { echo "run-smoke: error: podman could not load $archive" >&2; exit 1; }
echo "== smoke in $image (podman run)"
podman run --rm "$image"
sif=${archive%.oci.tar}.sif
if [ -f "$sif" ] && command -v apptainer >/dev/null 2>&1; then
  echo "== smoke in $sif (apptainer run)"
  # this host's root lacks CAP_SYS_RESOURCE (notes/containers.md): drop it
  apptainer run --drop-caps CAP_SYS_RESOURCE "$sif"
fi
