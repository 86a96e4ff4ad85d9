#!/bin/sh
# One command for the laptop image: debian12-compute (if missing), then this layer; writes
# build/images/stackproof-laptop.oci.tar (+ manifest) and the SIF (sif.sh) when apptainer is on PATH
# or STACKPROOF_APPTAINER is set (STACKPROOF_NO_SIF=1: never).
# usage: build.sh [--out DIR]
set -eu
repo=$(cd "$(dirname "$0")/../.." && pwd)
out=$repo/build/images
[ "${1:-}" = --out ] && out=$2
die() { echo "stackproof-laptop: error: $*" >&2; exit 1; }
[ -f "$out/debian12-compute.oci.tar" ] || "$repo/images/debian12-compute/build.sh" --out "$out"
export IMAGES_STATE="$out/podman"
# shellcheck source=images/common/podman-env.sh
. "$repo/images/common/podman-env.sh"
base=localhost/stackproof/debian12-compute:latest
podman image exists "$base" || podman load -q -i "$out/debian12-compute.oci.tar" >/dev/null
ctx=$out/laptop-context
rm -rf "$ctx" && mkdir -p "$ctx/wheels" "$ctx/images/laptop"
# the pins without their --hash lines: a constraints file with hashes turns on pip's hash mode for
# every requirement (make venv installs the lock itself with --require-hashes)
pins=$ctx/requirements-lock.txt
sed -e 's/ *\\$//' -e '/^ *--hash=/d' -e '/^ *#/d' "$repo/requirements-lock.txt" > "$pins"
reframe=$(grep '^reframe-hpc==' "$pins") || die "requirements-lock.txt pins no reframe-hpc"
matplotlib=$(grep '^matplotlib==' "$pins") || die "requirements-lock.txt pins no matplotlib"
pip=$repo/.venv/bin/pip
[ -x "$pip" ] || die "no $pip: run make venv"
# ReFrame and its dependencies as wheels; versions pinned by requirements-lock.txt where it has them
# (matplotlib: the report's plots; the compute image has no plotting stack)
"$pip" download -q --only-binary=:all: -c "$pins" -d "$ctx/wheels" "$reframe" "$matplotlib"
cp "$repo/images/laptop/entrypoint.sh" "$ctx/images/laptop/"
# (the stackproof package and its data, reframe-tests/ included, are in the base image)
image=localhost/stackproof/stackproof-laptop:latest
podman build --layers=false -f "$repo/images/laptop/Containerfile" --build-arg BASE="$base" -t "$image" "$ctx" >/dev/null
rm -f "$out/stackproof-laptop.oci.tar"
podman save --format oci-archive -o "$out/stackproof-laptop.oci.tar" "$image"
podman run --rm --entrypoint cat "$image" /usr/share/stackproof/manifest.txt > "$out/stackproof-laptop.manifest.txt"
echo "reframe-component $reframe" >> "$out/stackproof-laptop.manifest.txt"
rm -rf "$ctx"
echo "stackproof-laptop: $out/stackproof-laptop.oci.tar ($(du -m "$out/stackproof-laptop.oci.tar" | cut -f1) MB)"
if [ -n "${STACKPROOF_NO_SIF:-}" ]; then :
elif [ -n "${STACKPROOF_APPTAINER:-}" ] || command -v apptainer >/dev/null 2>&1; then
  "$repo/images/laptop/sif.sh" --out "$out" build
else
  echo "stackproof-laptop: apptainer not on PATH: OCI archive only (podman run --rm $image)"
fi
