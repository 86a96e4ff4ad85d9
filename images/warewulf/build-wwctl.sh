#!/bin/bash
# Build and install a private Warewulf (wwctl) from a user-supplied source checkout.
#
#   images/warewulf/build-wwctl.sh SRC PREFIX
#
# SRC    a checkout of github.com/warewulf/warewulf at tag v4.7.0 (checked; any other
#        commit is refused unless WW_ALLOW_OTHER_VERSION=1)
# PREFIX where to install (created); must not be inside this repository
#
# Follows upstream's Makefile: `make` generates the configuration (Defaults.mk,
# internal/pkg/config/buildconfig.go) with every path under PREFIX, vendors the Go modules
# (through the Go module proxy), builds with upstream's gpgme-free tags
# (containers_image_openpgp containers_image_ostree) and `make install`s into PREFIX. The
# host-service paths that upstream's install writes outside PREFIX (systemd unit, bash
# completion, firewalld, logrotate, dracut, tftp) are redirected into PREFIX too, and the
# generated warewulf.conf has dhcp, tftp and nfs disabled: nothing on the host changes.
# Needs: go >= 1.22 (GO=/path/to/go or on PATH), make, git, gzip. Prints PREFIX/bin/wwctl.
# The source and the binaries never enter this repository.
set -euo pipefail
die() { echo "build-wwctl: $*" >&2; exit 1; }
[ $# -eq 2 ] || die "usage: $0 SRC PREFIX (SRC = a warewulf v4.7.0 checkout)"
want=ff7518265dc21e1533eae9b58c411e9a28d3991f   # v4.7.0
src=$(cd "$1" 2>/dev/null && pwd) || die "no such source directory: $1"
[ -f "$src/cmd/wwctl/main.go" ] || die "$src is not a warewulf checkout (no cmd/wwctl/main.go)"
mkdir -p "$2"; prefix=$(cd "$2" && pwd)
repo=$(cd "$(dirname "$0")/../.." && pwd)
case "$prefix/" in "$repo"/*) die "PREFIX $prefix is inside the repository: choose a path outside it";; esac
case "$src/" in "$repo"/*) die "SRC $src is inside the repository: check it out outside";; esac
have=$(git -C "$src" rev-parse HEAD 2>/dev/null || cat "$src/VERSION" 2>/dev/null || echo unknown)
if [ "$have" != "$want" ] && [ "${WW_ALLOW_OTHER_VERSION:-0}" != 1 ]; then
    die "$src is at $have, not v4.7.0 ($want): git -C $src checkout v4.7.0 (or WW_ALLOW_OTHER_VERSION=1)"
fi
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
[ -x "$GO" ] || die "go not found: install Go >= 1.22 or set GO=/path/to/go"
PATH="$(dirname "$GO"):$PATH"
export PATH

vars=(PREFIX="$prefix"
      SYSTEMDDIR="$prefix/lib/systemd/system" BASHCOMPDIR="$prefix/etc/bash_completion.d"
      FIREWALLDDIR="$prefix/lib/firewalld/services" LOGROTATEDIR="$prefix/etc/logrotate.d"
      DRACUTMODDIR="$prefix/lib/dracut/modules.d" TFTPDIR="$prefix/srv/tftpboot"
      IPXESOURCE="$prefix/share/ipxe")
start=$(date +%s)
# Defaults.mk freezes the paths of the first run: regenerate config for this PREFIX
make -C "$src" cleanconfig cleanmake >/dev/null
make -C "$src" "${vars[@]}" defaults config
make -C "$src" "${vars[@]}" build
rm -rf "$prefix/share/warewulf/overlays"     # install cp -a's into it: start clean
make -C "$src" "${vars[@]}" install
conf="$prefix/etc/warewulf/warewulf.conf"
# no host services: dhcp, tftp and nfs off (wwctl configure would otherwise touch them)
"$prefix/bin/wwctl" --warewulfconf "$conf" genconfig warewulfconf print >"$conf.tmp"
python3 - "$conf.tmp" <<'EOF'
import sys, re
p = sys.argv[1]; t = open(p).read()
for sec in ("dhcp", "tftp", "nfs"):
    t, n = re.subn(r"(?m)^(%s:\n(?:[ ]+.*\n)*?[ ]+enabled: )(true|false)" % sec, r"\1false", t)
    if n != 1:
        sys.exit(f"build-wwctl: cannot turn {sec} off in warewulf.conf")
open(p, "w").write(t)
EOF
mv "$conf.tmp" "$conf"
echo "build-wwctl: built and installed in $(( $(date +%s) - start )) s" >&2
"$prefix/bin/wwctl" --emptyconf version >&2
echo "$prefix/bin/wwctl"
