#!/bin/sh
# A source tree exported from git (`git archive`) has no meaningful timestamps, so automake would try to
# regenerate its files in the middle of `make` (recipes.yaml: osu). Regenerate them once now; without
# autoreconf (autoconf/automake/libtool not installed), order the shipped generated files' mtimes
# after their inputs instead, as a release tarball has them.
set -eu
if ! autoreconf -fi >/dev/null 2>&1; then
  touch aclocal.m4; sleep 1; touch configure; sleep 1
  find . -name Makefile.in -exec touch {} +
  if [ -f config.h.in ]; then touch config.h.in; fi
fi
