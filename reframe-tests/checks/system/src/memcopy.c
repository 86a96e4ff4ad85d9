/* memcopy: on-node memory-copy bandwidth, the physical limit beside the MPI curves.
 * Every rank copies its own buffer (BYTES, default 64 MiB) ITERS times between two barriers; rank 0
 * prints per node the sum of its ranks' bandwidths:
 *   memcopy host=<h> ranks=<n> bytes=<b> MBps=<x>
 * Usage: memcopy [MiB] [iterations] */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    size_t bytes = (size_t)(argc > 1 ? atol(argv[1]) : 64) << 20;
    int iters = argc > 2 ? atoi(argv[2]) : 10;
    char *a = malloc(bytes), *b = malloc(bytes);
    if (!a || !b) {
        fprintf(stderr, "memcopy: cannot allocate 2 x %zu bytes\n", bytes);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    memset(a, 1, bytes);
    memset(b, 2, bytes);
    memcpy(b, a, bytes);                       /* warm-up: pages touched */
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++) {
        a[i % bytes] = (char)i;
        memcpy(b, a, bytes);
    }
    double t = MPI_Wtime() - t0;
    /* read + write traffic counted as the bytes copied (STREAM's "Copy" counts both: 2x) */
    double mbps = 2.0 * bytes * iters / t / 1e6;
    char host[256];
    gethostname(host, sizeof host);
    host[sizeof host - 1] = '\0';
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    int nrank, nsize;
    MPI_Comm_rank(node, &nrank);
    MPI_Comm_size(node, &nsize);
    double sum = 0;
    MPI_Reduce(&mbps, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, node);
    if (nrank == 0)
        printf("memcopy host=%s ranks=%d bytes=%zu MBps=%.1f check=%d\n", host, nsize, bytes, sum, b[1] == 1);
    free(a);
    free(b);
    MPI_Comm_free(&node);
    MPI_Finalize();
    return 0;
}
