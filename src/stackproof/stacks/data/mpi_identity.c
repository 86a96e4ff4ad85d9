/* mpi_identity: which MPI library does each rank really run on?
 *
 * Prints one line per rank, gathered to rank 0 and printed in rank order:
 *   identity rank=<r> host=<h> library=<absolute path of the loaded MPI library> version=<first line of
 *   MPI_Get_library_version>
 * The library is the object that defines PMPI_Get_library_version in this process (dlsym + dladdr),
 * so a binary that silently picked up another stack's libmpi (same soname, other directory) shows it.
 * Exit status: 0, or 2 when the library cannot be found. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* room for host, path and the first 1000 characters of the version */
#define LINE (64 + 256 + PATH_MAX + 1024)

/* Absolute path of the object defining `sym`, keeping the file name as loaded (its soname). */
static int library_path(const char *sym, char *out, size_t n)
{
    Dl_info info;
    void *addr = dlsym(RTLD_DEFAULT, sym);
    if (addr == NULL || dladdr(addr, &info) == 0 || info.dli_fname == NULL || !info.dli_fname[0])
        return -1;
    const char *base = strrchr(info.dli_fname, '/');
    char dir[PATH_MAX], real[PATH_MAX];
    if (base == NULL) {
        snprintf(out, n, "%s", info.dli_fname);
        return 0;
    }
    snprintf(dir, sizeof dir, "%.*s", (int)(base - info.dli_fname), info.dli_fname);
    if (realpath(dir[0] ? dir : "/", real) == NULL)
        snprintf(real, sizeof real, "%s", dir);
    snprintf(out, n, "%s%s", real, base);
    return 0;
}

int main(int argc, char **argv)
{
    int rank, size, len = 0, rc = 0;
    char version[MPI_MAX_LIBRARY_VERSION_STRING], host[256], lib[PATH_MAX], line[LINE];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_library_version(version, &len);
    version[strcspn(version, "\r\n")] = '\0';           /* first line only */
    for (char *p = version; *p; p++)
        if (*p == '\t')
            *p = ' ';
    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "unknown");
    host[sizeof host - 1] = '\0';
    if (library_path("PMPI_Get_library_version", lib, sizeof lib) != 0 &&
        library_path("MPI_Get_library_version", lib, sizeof lib) != 0) {
        snprintf(lib, sizeof lib, "unknown");
        rc = 2;
    }
    memset(line, 0, sizeof line);
    snprintf(line, sizeof line, "identity rank=%d host=%s library=%s version=%.1000s", rank, host, lib, version);
    char *all = NULL;
    if (rank == 0 && (all = malloc((size_t)size * LINE)) == NULL)
        MPI_Abort(MPI_COMM_WORLD, 3);
    MPI_Gather(line, LINE, MPI_CHAR, all, LINE, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        for (int r = 0; r < size; r++)
            printf("%s\n", all + (size_t)r * LINE);
        fflush(stdout);
        free(all);
    }
    MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return rc;
}
