#!/bin/sh
# OSU 7.2 lists osu_ireduce_scatter twice among the non-blocking collectives, and coreutils' install
# refuses the second copy during `make install` ("will not overwrite just-created"). Drop the repeat
# from Makefile.am and, for builds without autoreconf, from the shipped Makefile.in (recipes.yaml: osu).
set -eu
d=c/mpi/collective/non_blocking
if [ -f "$d/Makefile.am" ]; then
  perl -0pi -e 's/(osu_ireduce_scatter)[ \t]*\\\n[ \t]*osu_ireduce_scatter\n/$1\n/' "$d/Makefile.am"
fi
if [ -f "$d/Makefile.in" ]; then
  perl -0pi -e 's/(osu_ireduce_scatter\$\(EXEEXT\))[ \t]*\\\n[ \t]*osu_ireduce_scatter\$\(EXEEXT\)\n/$1\n/' "$d/Makefile.in"
fi
