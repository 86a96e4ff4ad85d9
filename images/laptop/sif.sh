#!/bin/sh
# The laptop image as a SIF, with a real Apptainer: build it from stackproof-laptop.def (which wraps
# the OCI archive that build.sh makes), or reuse the one built from the same inputs, then optionally
# run the acceptance smoke inside it.
# usage: sif.sh [--out DIR] build|smoke
#   build   DIR/stackproof-laptop.sif (the OCI archive is built first when missing); rebuilt only
#           when the archive, the def file or the apptainer version changed (DIR/stackproof-laptop.sif.key)
#   smoke   build, then `apptainer exec SIF stackproof-laptop smoke` (the smoke podman runs) and
#           `apptainer test SIF` (the def's %test: same smoke through the runscript's environment)
# Apptainer: $STACKPROOF_APPTAINER, else apptainer on PATH (images/laptop/build-apptainer.sh builds one).
set -eu
repo=$(cd "$(dirname "$0")/../.." && pwd)
out=$repo/build/images
die() { echo "stackproof-laptop-sif: error: $*" >&2; exit 1; }
[ "${1:-}" = --out ] && { out=${2:?--out needs a directory}; shift 2; }
action=${1:-}
case "$action" in build|smoke) ;; *) die "usage: sif.sh [--out DIR] build|smoke" ;; esac
apptainer=${STACKPROOF_APPTAINER:-$(command -v apptainer || true)}
[ -n "$apptainer" ] || die "no apptainer on PATH and STACKPROOF_APPTAINER unset (images/laptop/build-apptainer.sh builds v1.4.5)"
[ -x "$apptainer" ] || die "STACKPROOF_APPTAINER=$apptainer is not executable"
[ "$(id -u)" -eq 0 ] || die "run as root (apptainer build from an OCI archive without --fakeroot)"
mkdir -p "$out"
out=$(cd "$out" && pwd)
def=$repo/images/laptop/stackproof-laptop.def
archive=$out/stackproof-laptop.oci.tar
sif=$out/stackproof-laptop.sif
[ -f "$archive" ] || STACKPROOF_NO_SIF=1 "$repo/images/laptop/build.sh" --out "$out"
[ -f "$archive" ] || die "$archive was not built"

key=$({ "$apptainer" --version; sha256sum < "$def"; sha256sum < "$archive"; } | sha256sum | cut -d' ' -f1)
if [ -f "$sif" ] && [ "$(cat "$sif.key" 2>/dev/null)" = "$key" ]; then
  echo "stackproof-laptop-sif: reusing $sif (inputs unchanged, key ${key%"${key#????????????}"})"
else
  t0=$(date +%s)
  rm -f "$sif" "$sif.key"
  # the def names the archive relative to the build directory; %test runs in `smoke`, not here
  (cd "$out" && "$apptainer" build --notest --force "$sif.tmp" "$def") || die "apptainer build failed"
  mv "$sif.tmp" "$sif"
  echo "$key" > "$sif.key"
  echo "stackproof-laptop-sif: built $sif ($(du -m "$sif" | cut -f1) MB) in $(( $(date +%s) - t0 )) s"
fi
[ "$action" = smoke ] || exit 0

t0=$(date +%s)
echo "== smoke in $sif (apptainer exec)"
"$apptainer" exec "$sif" /usr/local/bin/stackproof-laptop smoke
echo "== %test of $sif (apptainer test)"
"$apptainer" test "$sif"
echo "stackproof-laptop-sif: smoke passed in $(( $(date +%s) - t0 )) s"
