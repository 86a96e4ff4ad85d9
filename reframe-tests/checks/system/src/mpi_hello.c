/* Every rank reports its rank, the world size, its host and the CPUs it may run on. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

static void allowed_cpus(char *buf, size_t len)
{
    FILE *fh = fopen("/proc/self/status", "r");
    char line[4096];
    snprintf(buf, len, "?");
    if (!fh)
        return;
    while (fgets(line, sizeof line, fh))
        if (sscanf(line, "Cpus_allowed_list: %1023s", buf) == 1)
            break;
    fclose(fh);
}

int main(int argc, char **argv)
{
    int rank, size, namelen;
    char host[MPI_MAX_PROCESSOR_NAME], cpus[1024];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_processor_name(host, &namelen);
    allowed_cpus(cpus, sizeof cpus);
    printf("hello rank %d of %d on %s cpus %s\n", rank, size, host, cpus);
    MPI_Finalize();
    return 0;
}
