#!/usr/bin/env bash
# Regenerate the golden Slurm renders after an intended change; review the diff before committing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
stackproof=${STACKPROOF:-$here/../../../.venv/bin/stackproof}
grep -v '^#' "$here/cases.txt" | while IFS='|' read -r name args; do
  name=$(echo "$name" | xargs)
  rm -rf "${here:?}/$name"
  # shellcheck disable=SC2086
  "$stackproof" slurm render $args -o "$here/$name"
done
