#!/bin/sh
# Copy the stackproof source tree, as `install-stack.sh components` (pip install, the mpibind and FWQ
# cmake builds) needs it, into DEST: the build context of an image that installs our components.
# usage: source-tree.sh REPO DEST
set -eu
die() { echo "source-tree: error: $*" >&2; exit 1; }
[ $# -eq 2 ] || die "usage: source-tree.sh REPO DEST"
repo=$1 dest=$2
{ [ -f "$repo/pyproject.toml" ] && [ -f "$repo/src/stackproof/cli.py" ]; } || die "$repo is not a stackproof source tree"
mkdir -p "$dest"
# setup.py names the data directories it installs (slurm-conf/, reframe-tests/, images/, spack-envs/)
for d in mpibind fwq src slurm-conf reframe-tests images spack-envs; do
  (cd "$repo" && tar --exclude=build --exclude=__pycache__ --exclude='*.egg-info' -cf - "$d") | tar -C "$dest" -xf -
done
cp "$repo/pyproject.toml" "$repo/setup.py" "$dest/"
