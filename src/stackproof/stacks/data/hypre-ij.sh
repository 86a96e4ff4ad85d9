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
set +f
objs=$(ls utilities/*.o multivector/*.o krylov/*.o seq_mv/*.o parcsr_mv/*.o parcsr_block_mv/*.o \
  distributed_matrix/*.o IJ_mv/*.o matrix_matrix/*.o parcsr_ls/*.o distributed_ls/*/*.o)
set -f
rm -f hypre/lib/libHYPRE_ij.a
ar rcs hypre/lib/libHYPRE_ij.a $objs
echo "hypre: linking ij"
make -C test ij.o
# shellcheck disable=SC2086   # $blas: several link flags on purpose
"$cc" -o test/ij test/ij.o hypre/lib/libHYPRE_ij.a $blas -lm
