#!/bin/sh
# The laptop image's acceptance as docs/images.md shows it, with this host's podman settings
# (images/common/podman-env.sh: vfs storage under DIR/podman, runc, cgroupfs):
#   podman run --rm --privileged --network host -v REPORTS:/opt/stackproof/reports IMAGE acceptance ARGS
# The image is loaded from DIR/stackproof-laptop.oci.tar when podman's store does not hold it.
# --network host shares this host's ports: never beside another stackproof test cluster here.
# usage: run-acceptance.sh [--out DIR] REPORTS_DIR [ACCEPTANCE ARGS...]
set -eu
repo=$(cd "$(dirname "$0")/../.." && pwd)
out=$repo/build/images
die() { echo "stackproof-laptop-run: error: $*" >&2; exit 1; }
[ "${1:-}" = --out ] && { out=${2:?--out needs a directory}; shift 2; }
[ $# -ge 1 ] || die "usage: run-acceptance.sh [--out DIR] REPORTS_DIR [ACCEPTANCE ARGS...]"
[ -d "$out" ] || die "$out: no such directory (make images-laptop writes build/images)"
out=$(cd "$out" && pwd)     # podman refuses a relative store path
reports=$1
shift
[ "$(id -u)" -eq 0 ] || die "run as root (podman --privileged, the test cluster's namespaces and cgroups)"
archive=$out/stackproof-laptop.oci.tar
image=localhost/stackproof/stackproof-laptop:latest
export IMAGES_STATE="$out/podman"
# shellcheck source=images/common/podman-env.sh
. "$repo/images/common/podman-env.sh"
if ! podman image exists "$image"; then
  [ -f "$archive" ] || die "$archive not found: build it first (make images-laptop)"
  podman load -q -i "$archive" >/dev/null || die "podman could not load $archive"
fi
mkdir -p "$reports"
reports=$(cd "$reports" && pwd)
echo "== podman run --rm --privileged --network host -v $reports:/opt/stackproof/reports $image acceptance $*"
exec podman run --rm --privileged --network host -v "$reports:/opt/stackproof/reports" "$image" acceptance "$@"
