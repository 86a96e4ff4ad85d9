#!/bin/sh
# Install the stackproof site overlays into a Warewulf 4.6+ server and set what git cannot carry:
# the munge key template 0400 owned by munge (uid/gid fixed by install-stack.sh), /etc/munge 0700
# owned by munge.
# Checks the server's munge key first: Warewulf's Include() drops one trailing newline, so a key
# whose last byte is 0x0a would reach the nodes one byte short (regenerate it with mungekey -f).
# usage: install-overlays.sh [--wwctl PATH] [--key /etc/munge/munge.key]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
wwctl=${WWCTL:-wwctl}
key=/etc/munge/munge.key
while [ $# -gt 0 ]; do
  case "$1" in
  --wwctl) wwctl=$2; shift 2 ;;
  --key) key=$2; shift 2 ;;
  *) echo "usage: $0 [--wwctl PATH] [--key FILE]" >&2; exit 2 ;;
  esac
done
die() { echo "install-overlays: error: $*" >&2; exit 1; }
MUNGE_ID=$(sed -n 's/^MUNGE_ID=//p' "$here/../common/install-stack.sh")
[ -n "$MUNGE_ID" ] || die "cannot read MUNGE_ID from images/common/install-stack.sh"
[ -s "$key" ] || die "no munge key at $key: create it on the Warewulf server (mungekey -c) first"
[ "$(tail -c 1 "$key" | od -An -tx1 | tr -d ' ')" != 0a ] \
  || die "$key ends with a newline byte, which Warewulf's Include() drops: regenerate it (mungekey -f -c)"
overlaydir=$("$wwctl" genconfig warewulfconf print 2>/dev/null | sed -n 's/^ *wwoverlaydir: *//p')
[ -n "$overlaydir" ] || overlaydir=/var/lib/warewulf/overlays
for o in slurm munge corespec; do
  rm -rf "${overlaydir:?}/$o"
  mkdir -p "$overlaydir/$o"
  cp -r "$here/overlays/$o/rootfs" "$overlaydir/$o/"
done
"$wwctl" overlay chmod munge etc/munge 0700
# the kernel applies an overlay directory's owner to the image's /etc/munge: root-owned, munged
# (running as munge) could not read its key
"$wwctl" overlay chown munge etc/munge "$MUNGE_ID:$MUNGE_ID"
"$wwctl" overlay chmod munge etc/munge/munge.key.ww 0400
"$wwctl" overlay chown munge etc/munge/munge.key.ww "$MUNGE_ID:$MUNGE_ID"
echo "install-overlays: slurm, munge, corespec installed in $overlaydir; next: wwctl overlay build"
