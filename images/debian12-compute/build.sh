#!/bin/sh
# Build the Debian 12 compute image on this machine, no registry needed:
#   mmdebstrap (minbase + install-stack.sh packages) -> rootfs tar -> podman import -> podman build
#   (our components from the repo) -> OCI archive + manifest; a SIF too when apptainer is on PATH.
# Packages come from bookworm, bookworm-updates and bookworm-security: the archive's current versions,
# which `make stacks` gives the host's build toolchain too (the laptop image then reuses the host's
# benchmark builds: stacks/buildkey.py).
# usage: build.sh [--out DIR] [--mirror URL] [--security-mirror URL] [--kernel]
set -eu
repo=$(cd "$(dirname "$0")/../.." && pwd)
out=$repo/build/images
mirror=http://deb.debian.org/debian
security=http://deb.debian.org/debian-security
kernel=""
while [ $# -gt 0 ]; do
  case "$1" in
  --out) out=$2; shift 2 ;;
  --mirror) mirror=$2; shift 2 ;;
  --security-mirror) security=$2; shift 2 ;;
  --kernel) kernel=linux-image-amd64; shift ;;     # only for Warewulf provisioning (adds ~400 MB)
  *) echo "usage: $0 [--out DIR] [--mirror URL] [--security-mirror URL] [--kernel]" >&2; exit 2 ;;
  esac
done
die() { echo "debian12-compute: error: $*" >&2; exit 1; }
for tool in mmdebstrap podman runc; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool not found (make images-tools installs podman, mmdebstrap, runc)"
done
[ "$(id -u)" -eq 0 ] || die "run as root (mmdebstrap root mode, podman with vfs storage)"
for f in mpibind/CMakeLists.txt fwq/CMakeLists.txt pyproject.toml src/stackproof/cli.py; do
  [ -f "$repo/$f" ] || die "missing $repo/$f: the image is built from the repository source"
done

name=debian12-compute
image=localhost/stackproof/$name:latest
base=localhost/stackproof/debian12-base:latest
mkdir -p "$out"
export IMAGES_STATE="$out/podman"
# shellcheck source=images/common/podman-env.sh
. "$repo/images/common/podman-env.sh"
t0=$(date +%s)

echo "== $name: mmdebstrap rootfs"
pkgs=$("$repo/images/common/install-stack.sh" packages debian12 | tr '\n' ',')$kernel
rm -f "$out/$name-rootfs.tar"
# --skip=cleanup/apt: mmdebstrap's own clean-up (`apt-get update` with no sources, `apt-get clean`) emptied
# this host's package lists, not only the rootfs's: a build beside it (make test's lanes: `make stacks`'
# `apt-get source`) then found no source package. install-stack.sh scrub clears the rootfs's lists and
# cache inside the chroot instead.
# shellcheck disable=SC2016  # mmdebstrap hooks get the chroot path as "$1"
mmdebstrap --variant=minbase --mode=root --format=tar --include="$pkgs" --skip=cleanup/apt \
  --aptopt='APT::Install-Recommends "false"' \
  --essential-hook="copy-in $repo/images/common/install-stack.sh /tmp" \
  --essential-hook='chroot "$1" sh /tmp/install-stack.sh users' \
  --customize-hook='chroot "$1" sh /tmp/install-stack.sh scrub' \
  --customize-hook='rm -f "$1/tmp/install-stack.sh"' \
  bookworm "$out/$name-rootfs.tar" "deb $mirror bookworm main" "deb $mirror bookworm-updates main" \
  "deb $security bookworm-security main" 2>&1 | grep -E '^I: (running|finish|success)|^E:' || true
[ -s "$out/$name-rootfs.tar" ] || die "mmdebstrap produced no rootfs"
t1=$(date +%s)

echo "== $name: podman import + build"
podman rmi -f "$base" >/dev/null 2>&1 || true
podman import "$out/$name-rootfs.tar" "$base" >/dev/null
ctx=$out/$name-context
rm -rf "$ctx" && mkdir -p "$ctx/images"
cp -r "$repo/images/common" "$ctx/images/"
sh "$repo/images/common/source-tree.sh" "$repo" "$ctx"
podman build --quiet --layers=false -f "$repo/images/$name/Containerfile" --build-arg BASE="$base" -t "$image" "$ctx" >/dev/null
t2=$(date +%s)

echo "== $name: OCI archive + manifest"
rm -f "$out/$name.oci.tar"
podman run --rm "$image" cat /usr/share/stackproof/manifest.txt > "$out/$name.manifest.txt"
podman save --format oci-archive -o "$out/$name.oci.tar" "$image"
if command -v apptainer >/dev/null 2>&1; then
  apptainer build --force "$out/$name.sif" "oci-archive://$out/$name.oci.tar"
else
  echo "$name: apptainer not on PATH: no SIF (docs/images.md: build Apptainer v1.4.5 from source)"
fi
rm -rf "$ctx" "$out/$name-rootfs.tar"
podman image prune -f >/dev/null    # vfs keeps full copies: drop the previous build's image
t3=$(date +%s)
echo "$name: $(du -m "$out/$name.oci.tar" | cut -f1) MB OCI archive, $(grep -vc '^#' "$out/$name.manifest.txt") manifest lines;" \
  "mmdebstrap $((t1 - t0)) s, podman build $((t2 - t1)) s, save $((t3 - t2)) s, total $((t3 - t0)) s"
