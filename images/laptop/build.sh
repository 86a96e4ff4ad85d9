#!/bin/sh
# One command for the laptop image: debian12-compute (when missing), then this layer with the
# commodity and vendor stacks installed and their benchmarks built inside it; writes
# build/images/stackproof-laptop.oci.tar (+ manifest, + each stack's provenance.json) and the SIF
# (sif.sh) when apptainer is on PATH or STACKPROOF_APPTAINER is set (STACKPROOF_NO_SIF=1: never).
#
# Everything that needs the network happens here, on the host, and is checked against its pins:
#   Debian packages  the stacks' install.apt that the base image lacks, resolved against the base
#                    image's own dpkg status and downloaded by the host's apt (signed archive, hashes)
#   wheels           ReFrame + matplotlib (requirements-lock.txt pins), the pip stacks' wheels (the
#                    hash lock beside the stack file, <name>.pip-lock.txt: pip checks every sha256)
#   sources          `stackproof stack fetch` (Debian source archive for NetPIPE/HPCC/hypre, .dsc and
#                    sha256 pinned; OSU/AMG/SW4 from $STACKPROOF_SOURCE_MIRROR or upstream when reachable)
#   builds           the host's own benchmark builds (make stacks), reused in the image where their
#                    inputs' key is the same (`stack build --reuse`), built there where it is not
# The image build itself runs with --network=none.
# usage: build.sh [--out DIR]
set -eu
repo=$(cd "$(dirname "$0")/../.." && pwd)
out=$repo/build/images
[ "${1:-}" = --out ] && out=${2:?--out needs a directory}
# absolute: podman refuses a relative store path (podman-env.sh writes it into its configuration)
mkdir -p "$out" && out=$(cd "$out" && pwd)
die() { echo "stackproof-laptop: error: $*" >&2; exit 1; }
step() { echo "== stackproof-laptop: $*"; }
stacks="commodity vendor"
py=$repo/.venv/bin/python
stackproof=$repo/.venv/bin/stackproof
{ [ -x "$py" ] && [ -x "$stackproof" ]; } || die "no $repo/.venv: run make venv"
command -v apt-get >/dev/null 2>&1 || die "apt-get not found: the image's Debian packages are fetched with the host's apt"
t0=$(date +%s)
[ -f "$out/debian12-compute.oci.tar" ] || "$repo/images/debian12-compute/build.sh" --out "$out"
export IMAGES_STATE="$out/podman"
# shellcheck source=images/common/podman-env.sh
. "$repo/images/common/podman-env.sh"
base=localhost/stackproof/debian12-compute:latest
podman image exists "$base" || podman load -q -i "$out/debian12-compute.oci.tar" >/dev/null
ctx=$out/laptop-context
debs=$out/laptop-debs           # kept between builds: apt re-checks each file's hash before reusing it
rm -rf "$ctx" && mkdir -p "$ctx/wheels" "$ctx/stack-wheels" "$ctx/debs" "$ctx/sources" "$ctx/images/laptop" \
  "$debs/partial"
t_fetch=$(date +%s)

# ---- Debian packages: what the stacks' install.apt needs beyond the base image
apt_pkgs=$(for s in $stacks; do "$stackproof" stack show "$s"; done |
  "$py" -c 'import json,sys
dec, text, pkgs = json.JSONDecoder(), sys.stdin.read(), []
while text.strip():
    doc, end = dec.raw_decode(text.lstrip()); text = text.lstrip()[end:]
    pkgs += [p for p in doc["install_apt"] if p not in pkgs]
print(" ".join(pkgs))')
step "fetch: Debian packages for $apt_pkgs (against the base image's dpkg status)"
podman run --rm --entrypoint cat "$base" /var/lib/dpkg/status > "$ctx/dpkg-status"
apt_image() {   # apt-get as if on the base image: its dpkg status, no recommends; $1: archive directory
  dir=$1
  shift
  # shellcheck disable=SC2086  # the package list is meant to split into words
  apt-get -q -o Dir::State::status="$ctx/dpkg-status" -o Dir::Cache::archives="$dir" \
    -o APT::Install-Recommends=false -o Debug::NoLocking=1 "$@" $apt_pkgs
}
# the files this image needs ('URI' FILE SIZE SHA256:...), listed against an empty archive directory
# (apt leaves out what it already holds)
mkdir -p "$ctx/no-debs/partial"
if ! apt_image "$ctx/no-debs" install --print-uris -qq -y > "$ctx/debs.list" 2>"$ctx/apt.log"; then
  apt-get -q update >>"$ctx/apt.log" 2>&1 || true      # stale package lists: the archive moved on
  apt_image "$ctx/no-debs" install --print-uris -qq -y > "$ctx/debs.list" 2>>"$ctx/apt.log" ||
    die "apt cannot resolve $apt_pkgs for the image: $(tail -n 2 "$ctx/apt.log" | tr '\n' ' ')"
fi
# downloaded (or reused) with their hashes checked against the signed archive's lists
apt_image "$debs" install --download-only -y >>"$ctx/apt.log" 2>&1 ||
  die "apt could not download $apt_pkgs for the image: $(tail -n 2 "$ctx/apt.log" | tr '\n' ' ')"
awk '{print $2}' "$ctx/debs.list" | while read -r f; do
  [ -f "$debs/$f" ] || die "apt listed $f for the image but did not download it (see $ctx/apt.log)"
  cp "$debs/$f" "$ctx/debs/"
done

# ---- wheels: the harness (ReFrame, matplotlib for the report's plots) and the pip stacks
# the pins without their --hash lines: a constraints file with hashes turns on pip's hash mode for
# every requirement (make venv installs the lock itself with --require-hashes)
pins=$ctx/requirements-lock.txt
sed -e 's/ *\\$//' -e '/^ *--hash=/d' -e '/^ *#/d' "$repo/requirements-lock.txt" > "$pins"
reframe=$(grep '^reframe-hpc==' "$pins") || die "requirements-lock.txt pins no reframe-hpc"
matplotlib=$(grep '^matplotlib==' "$pins") || die "requirements-lock.txt pins no matplotlib"
step "fetch: wheels $reframe $matplotlib"
"$py" -m pip download -q --disable-pip-version-check --only-binary=:all: -c "$pins" -d "$ctx/wheels" \
  "$reframe" "$matplotlib"
# every wheel must be one requirements-lock.txt pins, with one of its sha256 (make venv's own check)
"$py" - "$repo/requirements-lock.txt" "$ctx/wheels" <<'PY' || die "a downloaded wheel is not in requirements-lock.txt with its sha256"
import hashlib, pathlib, re, sys
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
hashes, pin = {}, None
for line in open(sys.argv[1]):
    m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^ ;\\]+)", line)
    pin = (norm(m.group(1)), m.group(2)) if m else pin
    for h in re.findall(r"--hash=sha256:([0-9a-f]{64})", line):
        hashes.setdefault(pin, set()).add(h)
bad = [w.name for w in sorted(pathlib.Path(sys.argv[2]).glob("*"))
       if hashlib.sha256(w.read_bytes()).hexdigest() not in hashes.get((norm(w.name.split("-")[0]), w.name.split("-")[1]), ())]
for b in bad:
    print(f"stackproof-laptop: error: {b}: not pinned with this sha256 in requirements-lock.txt", file=sys.stderr)
sys.exit(1 if bad else 0)
PY
for s in $stacks; do
  show=$("$stackproof" stack show "$s")
  reqs=$(printf "%s\n" "$show" | "$py" -c 'import json,sys; print(" ".join(json.load(sys.stdin)["install_pip"]))')
  [ -n "$reqs" ] || continue
  # <name>.pip-lock.txt beside the stack file
  lock=$(printf "%s\n" "$show" | "$py" -c 'import json,pathlib,sys; d=json.load(sys.stdin); print(pathlib.Path(d["file"]).with_name(d["name"] + ".pip-lock.txt"))')
  step "fetch: stack $s wheels $reqs (hash lock $(basename "$lock"))"
  [ -f "$lock" ] || die "stack $s has install.pip but no hash lock $lock (stackproof stack lock $s writes it)"
  # exactly the files `stack install --wheels` will take, each checked against the lock's sha256 here
  "$py" -m pip download -q --disable-pip-version-check --only-binary=:all: --require-hashes --no-deps \
    -r "$lock" -d "$ctx/stack-wheels"
done

# ---- benchmark sources, verified (and kept in the host's stacks-root cache: never fetched twice)
step "fetch: benchmark sources (stackproof stack fetch $stacks)"
# shellcheck disable=SC2086
"$stackproof" stack fetch $stacks --into "$ctx/sources" > "$out/stackproof-laptop.fetch.log"
sed 's/^/  /' "$out/stackproof-laptop.fetch.log"
# the image builds what was fetched (`fetch NAME VERSION: origin`), never tries the network for the rest
targets=probe,hello,$(sed -n 's/^fetch \([a-z0-9_]*\) [^ :]*: .*/\1/p' "$out/stackproof-laptop.fetch.log" | paste -sd, -)

# ---- the host's benchmark builds (make stacks): the image's `stack build --reuse` takes each one
# whose key, computed in the image from the image's own files (recipe, source digest, stack file,
# toolchain package versions, MPI library bytes: stacks/buildkey.py), is the key the host recorded;
# whatever differs is built in the image, and the build log says what differed
mkdir -p "$ctx/prebuilt"
for s in $stacks; do
  bench=$("$stackproof" stack show "$s" | "$py" -c 'import json,sys; print(json.load(sys.stdin)["prefix"] or "")')/bench
  [ -d "$bench/.stamps" ] || continue
  mkdir -p "$ctx/prebuilt/$s"
  tar -C "$bench" --exclude=./.build --exclude='./.reuse-*' -cf - . | tar -C "$ctx/prebuilt/$s" -xf -
done
step "host builds offered for reuse: $(find "$ctx/prebuilt" -path '*/.stamps/*.json' | wc -l) targets ($(du -sm "$ctx/prebuilt" | cut -f1) MB)"
t_build=$(date +%s)

cp "$repo/images/laptop/entrypoint.sh" "$repo/images/laptop/install-stacks.sh" "$ctx/images/laptop/"
# this tree's stackproof, mpibind and FWQ: a debian12-compute archive kept from an earlier build carries
# the code of its day (install-stacks.sh installs these over it)
sh "$repo/images/common/source-tree.sh" "$repo" "$ctx/stackproof-src"
mkdir -p "$ctx/images/common" && cp "$repo/images/common/install-stack.sh" "$ctx/images/common/"
rm -rf "$ctx/dpkg-status" "$ctx/apt.log" "$ctx/debs.list" "$ctx/no-debs"
image=localhost/stackproof/stackproof-laptop:latest
step "podman build --network=none ($(du -sm "$ctx" | cut -f1) MB context; $stacks built inside: $targets)"
podman build --network=none --layers=false -f "$repo/images/laptop/Containerfile" --build-arg BASE="$base" \
  --build-arg STACKS="$stacks" --build-arg BENCHMARKS="$targets" -t "$image" "$ctx" > "$out/stackproof-laptop.build.log" 2>&1 ||
  die "podman build failed: $(tail -n 5 "$out/stackproof-laptop.build.log" | tr '\n' ' ') (log: $out/stackproof-laptop.build.log)"
grep -E '^\[install-stacks|^stack |^\[stack ' "$out/stackproof-laptop.build.log" | sed 's/^/  /' || true
t_save=$(date +%s)
rm -f "$out/stackproof-laptop.oci.tar"
podman save --format oci-archive -o "$out/stackproof-laptop.oci.tar" "$image"
podman run --rm --entrypoint cat "$image" /usr/share/stackproof/manifest.txt > "$out/stackproof-laptop.manifest.txt"
for s in $stacks; do
  podman run --rm --entrypoint cat "$image" "/opt/stackproof/stacks/$s/bench/provenance.json" \
    > "$out/stackproof-laptop.$s.provenance.json"
done
podman image prune -f >/dev/null    # drop the previous build's image
rm -rf "$ctx"
t_end=$(date +%s)
echo "stackproof-laptop: $out/stackproof-laptop.oci.tar ($(du -m "$out/stackproof-laptop.oci.tar" | cut -f1) MB);" \
  "host fetch $((t_build - t_fetch)) s, podman build $((t_save - t_build)) s, save $((t_end - t_save)) s," \
  "total $((t_end - t0)) s (with the node image's build when it was missing)"
if [ -n "${STACKPROOF_NO_SIF:-}" ]; then :
elif [ -n "${STACKPROOF_APPTAINER:-}" ] || command -v apptainer >/dev/null 2>&1; then
  "$repo/images/laptop/sif.sh" --out "$out" build
else
  echo "stackproof-laptop: apptainer not on PATH: OCI archive only (podman run --rm $image)"
fi
