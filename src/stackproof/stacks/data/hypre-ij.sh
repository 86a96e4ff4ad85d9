#!/bin/sh
# hypre's ij driver (BoomerAMG on a generated Laplacian) built from only the library directories it
# links, after hypre's own `configure` (recipes.yaml: hypre). Run in hypre's src/.
# Arguments: JOBS CC "BLAS/LAPACK link flags" (one word; split here on purpose, never globbed).
set -euf
jobs=$1 cc=$2 blas=$3
mkdir -p hypre/include hypre/lib
cp -f HYPRE_config.h HYPRE.h hypre/include/
# the order matters: each directory installs headers the next ones include
dirs="utilities multivector krylov seq_mv parcsr_mv parcsr_block_mv distributed_matrix IJ_mv matrix_matrix parcsr_ls distributed_ls"
for d in $dirs; do
  echo "hypre: compiling $d"
  make -C "$d" -j"$jobs" all
done
# objects: *.o, and *.obj for the sources hypre can also compile for GPUs (utilities/memory.c, ...)
objs=$(find $dirs \( -name '*.o' -o -name '*.obj' \) -type f | sort)
rm -f hypre/lib/libHYPRE_ij.a
ar rcs hypre/lib/libHYPRE_ij.a $objs
echo "hypre: linking ij"
make -C test ij.o
# shellcheck disable=SC2086   # $blas: several link flags on purpose
"$cc" -o test/ij test/ij.o hypre/lib/libHYPRE_ij.a $blas -lm
