/* fwq-th: Fixed Work Quantum without MPI: one pthread per CPU, same trace format as fwq-mpi
 * (each thread is reported as a "rank"). For machines or containers without an MPI launcher. */
#define _GNU_SOURCE
#include "fwq_common.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct worker {
    pthread_t thread;
    int cpu;
    uint64_t iterations;
    long nsamples;
    enum fwq_timer timer;
    uint32_t *samples;
    struct fwq_rank_meta meta;
    pthread_barrier_t *start;
    int pin_failed;
};

/* While thread 0's CPU calibrates, the other worker CPUs run the same loop, so the calibration
 * sees the load (shared caches, turbo, SMT siblings) of the real run. */
struct load { pthread_t thread; int cpu; volatile int *stop; };

static void *load_main(void *arg)
{
    struct load *l = arg;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(l->cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    while (!*l->stop) fwq_work(10000);
    return NULL;
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(w->cpu, &set);
    w->pin_failed = pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0;
    int rank = w->meta.rank;
    fwq_fill_rank_meta(&w->meta, rank);
    w->meta.pid = (int32_t)gettid(); /* the thread id: what taskset/ps show for this worker */
    for (int i = 0; i < 1000; i++) fwq_work(w->iterations); /* warm-up */
    pthread_barrier_wait(w->start);
    fwq_sample(w->timer, w->iterations, w->nsamples, w->samples, &w->meta);
    return NULL;
}

int main(int argc, char **argv)
{
    struct fwq_options opt;
    int parsed = fwq_parse_options(argc, argv, &opt, 1);
    if (parsed != 0) return parsed > 0 ? 0 : FWQ_EXIT_USAGE;

    /* CPUs: --cpus, else the process affinity; -t picks the first N of them */
    int cpus[CPU_SETSIZE], ncpus = 0;
    if (opt.cpu_list) {
        ncpus = fwq_parse_cpu_list(opt.cpu_list, cpus, CPU_SETSIZE);
        if (ncpus <= 0) { fprintf(stderr, "fwq-th: bad --cpus list '%s'\n", opt.cpu_list); return FWQ_EXIT_USAGE; }
        long online = sysconf(_SC_NPROCESSORS_CONF);
        for (int i = 0; i < ncpus; i++)
            if (cpus[i] >= online) { fprintf(stderr, "fwq-th: CPU %d does not exist (%ld CPUs)\n", cpus[i], online); return FWQ_EXIT_USAGE; }
    } else {
        cpu_set_t set;
        sched_getaffinity(0, sizeof set, &set);
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &set)) cpus[ncpus++] = c;
    }
    int nthreads = opt.nthreads ? opt.nthreads : ncpus;
    if (nthreads > ncpus && !opt.oversubscribe) {
        fprintf(stderr, "fwq-th: %d threads but only %d CPUs: FWQ needs one thread per core "
                        "(pass --oversubscribe to run anyway)\n", nthreads, ncpus);
        return FWQ_EXIT_USAGE;
    }

    struct fwq_timer_info timer;
    char err[256];
    if (fwq_timer_setup(opt.timer, &timer, err, sizeof err) != 0 ||
        (opt.quantum_ns && fwq_check_quantum(&timer, opt.quantum_ns, err, sizeof err) != 0)) {
        fprintf(stderr, "fwq-th: %s\n", err);
        return FWQ_EXIT_USAGE;
    }
    /* calibrate on the first worker CPU so the quantum matches where the work runs */
    cpu_set_t first;
    CPU_ZERO(&first);
    CPU_SET(cpus[0], &first);
    sched_setaffinity(0, sizeof first, &first);
    uint64_t iterations = opt.work_iterations;
    double calibration_error = 0;
    volatile int stop_load = 0;
    int nload = nthreads - 1 < ncpus - 1 ? nthreads - 1 : ncpus - 1;
    struct load *loads = calloc((size_t)(nload > 0 ? nload : 1), sizeof *loads);
    for (int i = 0; i < nload; i++) {
        loads[i] = (struct load){.cpu = cpus[i + 1], .stop = &stop_load};
        pthread_create(&loads[i].thread, NULL, load_main, &loads[i]);
    }
    if (opt.quantum_ns) iterations = fwq_calibrate(opt.quantum_ns, &calibration_error, NULL, NULL);
    double ns_per_iteration = fwq_ns_per_iteration();
    stop_load = 1;
    for (int i = 0; i < nload; i++) pthread_join(loads[i].thread, NULL);
    free(loads);

    struct worker *workers = calloc((size_t)nthreads, sizeof *workers);
    uint32_t *samples = malloc((size_t)nthreads * (size_t)opt.nsamples * sizeof *samples);
    if (!workers || !samples) { fprintf(stderr, "fwq-th: cannot allocate %ld samples\n", opt.nsamples * nthreads); return FWQ_EXIT_RUNTIME; }
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)nthreads);
    for (int t = 0; t < nthreads; t++) {
        struct worker *w = &workers[t];
        *w = (struct worker){.cpu = cpus[t % ncpus], .iterations = iterations, .nsamples = opt.nsamples,
                             .timer = opt.timer, .samples = samples + (size_t)t * opt.nsamples, .start = &start};
        w->meta.rank = t;
        if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
            fprintf(stderr, "fwq-th: cannot start thread %d\n", t);
            return FWQ_EXIT_RUNTIME;
        }
    }
    struct fwq_rank_meta *metas = calloc((size_t)nthreads, sizeof *metas);
    for (int t = 0; t < nthreads; t++) {
        pthread_join(workers[t].thread, NULL);
        if (workers[t].pin_failed) fprintf(stderr, "fwq-th: warning: could not pin thread %d to CPU %d\n", t, workers[t].cpu);
        metas[t] = workers[t].meta;
    }

    struct fwq_run_meta run = {
        .program = "fwq-th", .mode = "threads", .nranks = nthreads, .nsamples = opt.nsamples,
        .work_iterations = iterations, .quantum_target_ns = opt.quantum_ns,
        .calibration_error = calibration_error, .ns_per_iteration = ns_per_iteration,
        .timer = timer, .command = fwq_join_command(argc, argv)};
    struct fwq_writer writer;
    int bad = fwq_writer_open(&writer, opt.output, &run, metas) != 0;
    for (int t = 0; t < nthreads && !bad; t++)
        bad = fwq_writer_block(&writer, workers[t].samples, opt.nsamples) != 0;
    if (writer.file && fwq_writer_close(&writer) != 0) bad = 1;
    if (bad) { fprintf(stderr, "fwq-th: failed writing %s\n", opt.output); return FWQ_EXIT_RUNTIME; }
    if (!opt.quiet)
        fprintf(stderr, "fwq-th: %d threads x %ld samples, work %llu iterations, calibration error %+.3f%%, "
                        "timer %s overhead %.1f ns, wrote %s\n",
                nthreads, opt.nsamples, (unsigned long long)iterations, calibration_error * 100,
                opt.timer == FWQ_TIMER_TSC ? "tsc" : "monotonic_raw", timer.overhead_ns, opt.output);
    free(samples);
    free(workers);
    free(metas);
    return 0;
}
