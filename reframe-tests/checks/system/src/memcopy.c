/* memcopy: on-node memory-copy bandwidth, the bound beside the MPI bandwidths. Every rank copies its
 * own buffer between two barriers, at two sizes: BYTES (default 64 MiB, far beyond the caches: the
 * DRAM copy) ITERS times, then SMALL (default 1 MiB, the size of the verdict's bandwidth messages,
 * cache-resident) as many times as moves the same number of bytes. Rank 0 of each node prints per
 * size the sum of its ranks' bandwidths:
 *   memcopy host=<h> ranks=<n> bytes=<b> MBps=<x> check=<0|1>
 * Usage: memcopy [MiB] [iterations] [small KiB (0: none)] */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Copy `bytes` from a to b `iters` times (all ranks at once) and print the node's summed bandwidth. */
static void measure(MPI_Comm node, int nrank, const char *host, char *a, char *b, size_t bytes, long iters)
{
    memcpy(b, a, bytes);                       /* warm-up: pages touched, a small buffer in cache */
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long i = 0; i < iters; i++) {
        a[i % bytes] = (char)i;
        memcpy(b, a, bytes);
    }
    double t = MPI_Wtime() - t0;
    /* read + write traffic counted as the bytes copied (STREAM's "Copy" counts both: 2x) */
    double mbps = 2.0 * bytes * iters / t / 1e6, sum = 0;
    int nsize;
    MPI_Comm_size(node, &nsize);
    MPI_Reduce(&mbps, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, node);
    if (nrank == 0)
        printf("memcopy host=%s ranks=%d bytes=%zu MBps=%.1f check=%d\n", host, nsize, bytes, sum, b[1] == 1);
}

int main(int argc, char **argv)
{
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    size_t bytes = (size_t)(argc > 1 ? atol(argv[1]) : 64) << 20;
    long iters = argc > 2 ? atol(argv[2]) : 10;
    size_t small = (size_t)(argc > 3 ? atol(argv[3]) : 1024) << 10;
    char *a = malloc(bytes), *b = malloc(bytes);
    if (!a || !b || iters < 1 || small > bytes) {
        fprintf(stderr, "memcopy: need 2 x %zu bytes, iterations >= 1 and small <= MiB\n", bytes);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    memset(a, 1, bytes);
    memset(b, 2, bytes);
    char host[256];
    gethostname(host, sizeof host);
    host[sizeof host - 1] = '\0';
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    int nrank;
    MPI_Comm_rank(node, &nrank);
    measure(node, nrank, host, a, b, bytes, iters);
    if (small > 0)
        measure(node, nrank, host, a, b, small, (long)(iters * (bytes / small)));
    free(a);
    free(b);
    MPI_Comm_free(&node);
    MPI_Finalize();
    return 0;
}
