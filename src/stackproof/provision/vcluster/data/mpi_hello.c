/* MPI hello for the virtual cluster: one line per rank with its host, so `srun -N2` across the VMs
 * shows both nodes (compiled on the head with mpicc; shipped to the nodes in the vctools overlay). */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
  int rank, size, len;
  char host[MPI_MAX_PROCESSOR_NAME];
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Get_processor_name(host, &len);
  int sum = 0;
  MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  printf("mpi-hello rank %d of %d on %s (allreduce %d)\n", rank, size, host, sum);
  MPI_Finalize();
  return 0;
}
