#!/bin/sh
# Run by `wwctl image build` after every image change (warewulf-node-images convention): drop
# caches and per-host identity, and make sure no secret was added since the image was built.
set -x
LANG=C LC_CTYPE=C
export LANG LC_CTYPE
/usr/local/share/stackproof-images/install-stack.sh scrub
