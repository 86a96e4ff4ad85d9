#!/bin/sh
# Build Apptainer from a checkout you supply (it is not packaged for Debian 12) and install it
# under PREFIX, configured for root on hosts whose root lacks CAP_SYS_RESOURCE.
# The source and the binaries stay outside this repository.
# usage: build-apptainer.sh SRC_DIR PREFIX
#   SRC_DIR  an Apptainer source tree at tag v1.4.5, e.g.
#            git clone --depth 1 --branch v1.4.5 https://github.com/apptainer/apptainer SRC_DIR
#   PREFIX   install prefix; PREFIX/bin/apptainer afterwards (put it on PATH, or
#            export STACKPROOF_APPTAINER=PREFIX/bin/apptainer)
# Needs Go >= 1.23.6 (GO=/path/to/go or go on PATH; Debian 12's golang is too old) and the
# Debian packages build-essential libseccomp-dev libsubid-dev uidmap fakeroot cryptsetup
# squashfs-tools (see docs/images.md). v1.5.x needs Go modules the proxy refuses: use v1.4.5.
set -eu
want=1.4.5
die() { echo "build-apptainer: error: $*" >&2; exit 1; }
[ $# -eq 2 ] || die "usage: build-apptainer.sh SRC_DIR PREFIX"
src=$(cd "$1" 2>/dev/null && pwd) || die "$1: no such directory"
prefix=$2
[ -x "$src/mconfig" ] || die "$src is not an Apptainer source tree (no mconfig)"
case "$prefix" in /*) ;; *) prefix=$(pwd)/$prefix ;; esac
repo=$(cd "$(dirname "$0")/../.." && pwd)
case "$src/" in "$repo"/*) die "$src is inside this repository: keep Apptainer's source outside it" ;; esac
case "$prefix/" in "$repo"/*) die "$prefix is inside this repository: install Apptainer outside it" ;; esac
version=$(cat "$src/VERSION" 2>/dev/null || git -C "$src" describe --tags --match 'v[0-9]*' 2>/dev/null || true)
[ "${version#v}" = "$want" ] || die "$src is Apptainer '${version:-unknown}', want v$want (git checkout v$want)"
go=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
[ -x "$go" ] || die "no Go toolchain (set GO=/path/to/go; Go >= 1.23.6)"
PATH=$(dirname "$go"):$PATH
export PATH
for tool in gcc make pkg-config mksquashfs; do
  command -v "$tool" >/dev/null || die "$tool not found (apt-get install build-essential pkg-config squashfs-tools)"
done
pkg-config --exists libseccomp || die "libseccomp-dev not installed"
builddir=$src/builddir
cd "$src"
[ -f "$builddir/Makefile" ] || ./mconfig -b "$builddir" --prefix="$prefix"
make -C "$builddir" -j"$(nproc)"
make -C "$builddir" install
conf=$prefix/etc/apptainer/apptainer.conf
# `apptainer exec/build` as root request every capability; this host's root lacks CAP_SYS_RESOURCE.
# With "file", root gets the capabilities listed in capability.json (none by default) instead.
sed -i 's/^root default capabilities = .*/root default capabilities = file/' "$conf"
grep -q '^root default capabilities = file$' "$conf" || die "could not set 'root default capabilities = file' in $conf"
"$prefix/bin/apptainer" --version
