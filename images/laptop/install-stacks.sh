#!/bin/sh
# Runs inside the laptop image build (podman build --network=none): installs what build.sh fetched
# and verified on the host, then the product's own stack install/build, offline.
# usage: install-stacks.sh [--only T,...] CTX STACK...
#   --only T,...              stack build's targets (build.sh: probe, hello and what it fetched)
#   CTX/stackproof-src/       this tree's stackproof, mpibind and FWQ sources (installed over the base's)
#   CTX/debs/*.deb            the stacks' Debian packages (install.apt) the base image lacks
#   CTX/wheels/               ReFrame and matplotlib (the harness), pinned by requirements-lock.txt
#   CTX/requirements-lock.txt those pins, without hashes
#   CTX/stack-wheels/         the pip stacks' wheels (the hash lock beside each stack file)
#   CTX/sources/<benchmark>/  the benchmarks' verified sources (stackproof stack fetch --into)
#   CTX/prebuilt/<stack>/     the host's bench dirs: `stack build --reuse` takes a target's build from
#                             there when its key (computed here) is the host's, else builds it
# Leaves /opt/stackproof/stacks/<stack>/ (bench/ with provenance.json) and nothing the acceptance
# does not use: no source cache, no build trees (bench/.build keeps only the build logs), no wheels.
set -eu
die() { echo "install-stacks: error: $*" >&2; exit 1; }
only=""
[ "${1:-}" = --only ] && { only=${2:?--only needs a list}; shift 2; }
[ $# -ge 2 ] || die "usage: install-stacks.sh [--only T,...] CTX STACK..."
ctx=$1
shift
{ [ -d "$ctx/wheels" ] && [ -d "$ctx/sources" ]; } || die "$ctx is not a laptop build context (no wheels/ or sources/)"
venv=/opt/stackproof/venv
root=${STACKPROOF_STACKS_ROOT:-/opt/stackproof/stacks}
step() { echo "[install-stacks $(date +%H:%M:%S)] $*"; }

step "stackproof, mpibind and FWQ from this tree (the base image may hold an older build of them)"
[ -f "$ctx/stackproof-src/pyproject.toml" ] || die "$ctx has no stackproof-src/ (build.sh copies the source tree there)"
sh "$ctx/images/common/install-stack.sh" components "$ctx/stackproof-src" /opt/stackproof >/dev/null
rm -rf "$ctx/stackproof-src"

step "Debian packages of the stacks: $(find "$ctx/debs" -name '*.deb' 2>/dev/null | wc -l) .deb files"
if ls "$ctx"/debs/*.deb >/dev/null 2>&1; then
  # one dpkg call: it unpacks all, then configures in dependency order; apt checked the hashes on the host
  DEBIAN_FRONTEND=noninteractive dpkg -i "$ctx"/debs/*.deb >/dev/null
fi

step "ReFrame and matplotlib into $venv (wheels, pinned)"
"$venv/bin/pip" install -q --no-index --no-cache-dir --disable-pip-version-check --find-links "$ctx/wheels" \
  "$(grep '^reframe-hpc==' "$ctx/requirements-lock.txt")" "$(grep '^matplotlib==' "$ctx/requirements-lock.txt")"
ln -sf "$venv/bin/reframe" /usr/local/bin/reframe

step "stackproof stack install --wheels $ctx/stack-wheels $* (the hash locks, no index)"
PIP_NO_CACHE_DIR=1 stackproof stack install --wheels "$ctx/stack-wheels" "$@"

step "stackproof stack build${only:+ --only $only} $* (sources verified again from the seeded cache)"
mkdir -p "$root/sources"
cp -r "$ctx/sources/." "$root/sources/"
reuse=""
[ -d "$ctx/prebuilt" ] && reuse=$ctx/prebuilt
stackproof stack build ${only:+--only "$only"} ${reuse:+--reuse "$reuse"} "$@"
for s in "$@"; do
  bench=$(stackproof stack show "$s" | python3 -c 'import json,sys; print(json.load(sys.stdin)["prefix"] or "")')/bench
  [ -f "$bench/provenance.json" ] || die "stack $s: no $bench/provenance.json after the build"
done
rm -rf "$root/sources" "$ctx/prebuilt"

step "trim what the acceptance does not use: $(du -sm "$root" | cut -f1) MB of stacks"
# Intel's GPU offload runtime, brought by the intel-openmp and intel-cmplr-lib-ur wheels (OpenMP target
# offload, the Level Zero / OpenCL unified runtime and its memory framework: ~240 MB), static
# libraries and debug info: nothing links them (stack check below runs ldd on every benchmark again)
# and no launch on a CPU node loads them (the acceptance runs every benchmark of both stacks).
find "$root" \( -name 'libomptarget*' -o -name 'libur_*' -o -name 'libumf*' -o -name '*.a' -o -name '*.dbg' \) \
  \( -type f -o -type l \) -delete
# pip installs a wheel's symlinked libraries as copies (libmpi.so, .so.12, .so.12.0, ...): one inode each
hardlink -q -t "$root" >/dev/null 2>&1 || true
stackproof stack check --kind slurm "$@"
step "stacks now $(du -sm "$root" | cut -f1) MB"
