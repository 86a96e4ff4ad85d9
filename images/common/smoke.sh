#!/bin/sh
# Acceptance smoke inside a stackproof image (podman run / apptainer run / a booted node):
# node type from the live host, Slurm render, MPI hello on 2 ranks, mpibind and a short fwq-mpi
# when present. Prints a summary; exits 1 when any check fails.
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0 fail=0 skip=0 summary=""

check() {   # check NAME COMMAND...
  name=$1; shift
  if "$@" > "$work/$name.log" 2>&1; then
    pass=$((pass + 1)); summary="$summary\nPASS $name"
  else
    fail=$((fail + 1)); summary="$summary\nFAIL $name (rc=$?)"
    sed 's/^/    /' "$work/$name.log" | tail -n 15
  fi
}
skip() { skip=$((skip + 1)); summary="$summary\nSKIP $1: $2"; }

check nodetype-from-host stackproof nodetype from-host -o "$work/local.yaml"
check slurm-render stackproof slurm render --nodetype "$work/local.yaml" --profile corespec --k 1 -o "$work/render"
check slurm-render-files test -s "$work/render/etc/slurm/slurm.conf" -a -s "$work/render/etc/stackproof/profile.env"

cat > "$work/hello.c" <<'C'
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
  int rank, size;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  printf("hello from rank %d of %d\n", rank, size);
  MPI_Finalize();
  return 0;
}
C
mpi_hello() {
  mpicc -o "$work/hello" "$work/hello.c" || return 1
  mpirun -np 2 "$work/hello" > "$work/hello.out" || return 1
  cat "$work/hello.out"
  [ "$(grep -c 'of 2$' "$work/hello.out")" -eq 2 ]
}
check mpi-hello-2-ranks mpi_hello

if command -v mpibind >/dev/null 2>&1; then
  check mpibind-ntasks-2 mpibind --ntasks 2
else
  skip mpibind "not in this image"
fi
if command -v fwq-mpi >/dev/null 2>&1; then
  check fwq-mpi-short mpirun -np 2 fwq-mpi -n 200 -w 1000 --oversubscribe -q -o "$work/fwq.dat"
else
  skip fwq-mpi "not in this image"
fi

printf "stackproof image smoke:%b\n" "$summary"
echo "smoke summary: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
