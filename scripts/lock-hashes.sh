#!/usr/bin/env bash
# Regenerate a lock file (default requirements-lock.txt; also spack-envs/requirements-clingo.txt) with the same pins and the sha256 of every file PyPI publishes
# for each (pip-compile --generate-hashes; pip-tools pinned below, in a throw-away venv).
# To bump a package: edit its pin in requirements-lock.txt (the hash lines may stay), run this,
# review the diff. `make venv` installs with --require-hashes.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
lock=$(realpath "${1:-$here/requirements-lock.txt}")
PIP_TOOLS=pip-tools==7.6.2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q --disable-pip-version-check "$PIP_TOOLS"
grep -E '^[A-Za-z0-9]' "$lock" | sed 's/ *\\$//' > "$work/pins.in"      # NAME==VERSION lines
grep -E '^# ' "$lock" | grep -v '^#   ' > "$work/head.txt" || true
(cd "$work" && PIP_FIND_LINKS='' "$work/venv/bin/pip-compile" -q --generate-hashes --allow-unsafe \
   --no-strip-extras --no-header --annotation-style=line -o out.txt pins.in)
{ cat "$work/head.txt"
  grep -v '^--find-links' "$work/out.txt" | sed '/^$/d; /^    # via -r pins.in$/d; s/# via -r pins.in, /# via /'
} > "$lock.new"
mv "$lock.new" "$lock"
echo "lock-hashes: $(grep -c '==' "$lock") pins, $(grep -c -- '--hash=sha256:' "$lock") hashes in $lock"
