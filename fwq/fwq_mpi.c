/* fwq-mpi: Fixed Work Quantum, one MPI rank per core.
 * Rank 0 calibrates the work (with --quantum) and broadcasts it; all ranks start after a barrier,
 * sample independently, then rank 0 streams every rank's samples into one trace file (one rank's
 * block in memory at a time, so rank 0 needs about two blocks however many ranks there are). */
#define _GNU_SOURCE
#include "fwq_common.h"

#include <fcntl.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static double wall(void) { return MPI_Wtime(); }

/* calibration runs on all ranks at once and agrees on the mean of their measurements */
static double average_over_ranks(double local, void *ctx)
{
    (void)ctx;
    double sum = 0;
    int n;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Allreduce(&local, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return sum / n;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    /* every rank parses the same arguments, so they all agree on failing; only rank 0 talks */
    struct fwq_options opt;
    int saved_stderr = -1;
    if (rank != 0) {
        fflush(stderr);
        saved_stderr = dup(2);
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) { dup2(devnull, 2); close(devnull); }
    }
    if (rank != 0) { fflush(stdout); (void)!freopen("/dev/null", "w", stdout); } /* -h/--version once */
    int parsed = fwq_parse_options(argc, argv, &opt, 0);
    if (saved_stderr >= 0) { fflush(stderr); dup2(saved_stderr, 2); close(saved_stderr); }
    if (parsed != 0) { MPI_Finalize(); return parsed > 0 ? 0 : FWQ_EXIT_USAGE; }

    /* one rank per core: refuse to pile more ranks on a node than it has CPUs */
    MPI_Comm node;
    int local_size;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &local_size);
    long ncpus = sysconf(_SC_NPROCESSORS_ONLN);
    int local_over = local_size > ncpus && !opt.oversubscribe, any_over = 0;
    MPI_Allreduce(&local_over, &any_over, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any_over) {
        if (local_over) {
            int local_rank;
            MPI_Comm_rank(node, &local_rank);
            if (local_rank == 0)
                fprintf(stderr, "fwq-mpi: %d ranks on a node with %ld CPUs: FWQ needs one rank per core "
                                "(pass --oversubscribe to run anyway)\n", local_size, ncpus);
        }
        MPI_Finalize();
        return FWQ_EXIT_USAGE;
    }

    struct fwq_timer_info timer;
    char err[256];
    int timer_bad = fwq_timer_setup(opt.timer, &timer, err, sizeof err) != 0;
    if (!timer_bad && opt.quantum_ns && fwq_check_quantum(&timer, opt.quantum_ns, err, sizeof err) != 0)
        timer_bad = 1;
    MPI_Bcast(&timer_bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (timer_bad) {
        if (rank == 0) fprintf(stderr, "fwq-mpi: %s\n", err);
        MPI_Finalize();
        return FWQ_EXIT_USAGE;
    }

    /* fixed work: the same loop count on every rank (rank 0's value is authoritative) */
    uint64_t iterations = opt.work_iterations;
    double calibration_error = 0;
    if (opt.quantum_ns) iterations = fwq_calibrate(opt.quantum_ns, &calibration_error, average_over_ranks, NULL);
    double ns_per_iteration = average_over_ranks(fwq_ns_per_iteration(), NULL);
    MPI_Bcast(&iterations, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);

    uint32_t *samples = malloc((size_t)opt.nsamples * sizeof *samples);
    struct fwq_rank_meta meta;
    fwq_fill_rank_meta(&meta, rank);
    int alloc_bad = samples == NULL, any_alloc_bad = 0;
    MPI_Allreduce(&alloc_bad, &any_alloc_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any_alloc_bad) {
        if (rank == 0) fprintf(stderr, "fwq-mpi: cannot allocate %ld samples\n", opt.nsamples);
        MPI_Finalize();
        return FWQ_EXIT_RUNTIME;
    }

    /* warm-up: about 1000 quanta or 0.2 s, whichever is shorter, so caches and clocks settle */
    double warm_end = wall() + 0.2;
    for (int i = 0; i < 1000 && wall() < warm_end; i++) fwq_work(iterations);

    MPI_Barrier(MPI_COMM_WORLD);
    fwq_sample(opt.timer, iterations, opt.nsamples, samples, &meta);
    MPI_Barrier(MPI_COMM_WORLD);

    /* gather: metadata in one collective, samples streamed rank by rank to rank 0 */
    double gather_start = wall();
    struct fwq_rank_meta *all = rank == 0 ? malloc((size_t)nranks * sizeof *all) : NULL;
    MPI_Gather(&meta, (int)sizeof meta, MPI_BYTE, all, (int)sizeof meta, MPI_BYTE, 0, MPI_COMM_WORLD);
    int rc = 0;
    if (rank == 0) {
        struct fwq_run_meta run = {
            .program = "fwq-mpi", .mode = "mpi", .nranks = nranks, .nsamples = opt.nsamples,
            .work_iterations = iterations, .quantum_target_ns = opt.quantum_ns,
            .calibration_error = calibration_error, .ns_per_iteration = ns_per_iteration,
            .timer = timer, .command = fwq_join_command(argc, argv)};
        struct fwq_writer writer;
        int io_bad = fwq_writer_open(&writer, opt.output, &run, all) != 0;
        uint32_t *block = malloc((size_t)opt.nsamples * sizeof *block);
        for (int r = 0; r < nranks; r++) {
            const uint32_t *src = samples;
            if (r > 0) {
                int go = 1; /* ask rank r for its block only now: one block in flight at a time */
                MPI_Send(&go, 1, MPI_INT, r, 1, MPI_COMM_WORLD);
                MPI_Recv(block, (int)opt.nsamples, MPI_UINT32_T, r, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                src = block;
            }
            if (!io_bad && fwq_writer_block(&writer, src, opt.nsamples) != 0) io_bad = 1;
        }
        if (writer.file && fwq_writer_close(&writer) != 0) io_bad = 1;
        if (io_bad) { fprintf(stderr, "fwq-mpi: failed writing %s\n", opt.output); rc = FWQ_EXIT_RUNTIME; }
        double gather_s = wall() - gather_start;
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        if (!opt.quiet && !io_bad) {
            double q = 0;
            for (long s = 0; s < opt.nsamples; s++) q += samples[s];
            fprintf(stderr, "fwq-mpi: %d ranks x %ld samples, work %llu iterations, rank 0 mean %.3f us, "
                            "calibration error %+.3f%%, timer %s overhead %.1f ns\n",
                    nranks, opt.nsamples, (unsigned long long)iterations,
                    q / (double)opt.nsamples * 1e6 / timer.ticks_per_second, calibration_error * 100,
                    timer.kind == FWQ_TIMER_TSC ? "tsc" : "monotonic_raw", timer.overhead_ns);
            fprintf(stderr, "fwq-mpi: gathered %ld samples in %.3f s, rank 0 max RSS %.1f MB, wrote %s\n",
                    (long)nranks * opt.nsamples, gather_s, ru.ru_maxrss / 1024.0, opt.output);
        }
        free(block);
        free(all);
    } else {
        int go;
        MPI_Recv(&go, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(samples, (int)opt.nsamples, MPI_UINT32_T, 0, 2, MPI_COMM_WORLD);
    }
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    free(samples);
    MPI_Comm_free(&node);
    MPI_Finalize();
    return rc;
}
