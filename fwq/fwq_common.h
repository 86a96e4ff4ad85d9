/* fwq_common: pieces shared by fwq-mpi (MPI ranks) and fwq-th (pthreads):
 * option parsing, the timer, the fixed work quantum, calibration and the trace file writer.
 * The trace format is documented in fwq/README.md ("Trace file format"). */
#ifndef FWQ_COMMON_H
#define FWQ_COMMON_H

#include <stdint.h>
#include <stdio.h>

#define FWQ_VERSION "0.1.0"
#define FWQ_EXIT_USAGE 2   /* bad options or impossible configuration */
#define FWQ_EXIT_RUNTIME 3 /* I/O or system failure */

enum fwq_timer { FWQ_TIMER_MONOTONIC_RAW, FWQ_TIMER_TSC };

struct fwq_options {
    long nsamples;             /* -n */
    uint64_t work_iterations;  /* -w; 0 = calibrate from quantum_ns */
    uint64_t quantum_ns;       /* --quantum; 0 = use -w */
    const char *output;        /* -o */
    enum fwq_timer timer;      /* --timer */
    int oversubscribe;         /* --oversubscribe */
    int nthreads;              /* -t (fwq-th only) */
    const char *cpu_list;      /* --cpus (fwq-th only) */
    int quiet;                 /* -q */
};

/* Timer facts measured at start and written to the header. */
struct fwq_timer_info {
    enum fwq_timer kind;
    double ticks_per_second;   /* 1e9 for CLOCK_MONOTONIC_RAW, measured TSC rate for TSC */
    double resolution_ns;      /* clock_getres, or one TSC tick */
    double overhead_ns;        /* median cost of one timer read (back-to-back reads) */
    double tsc_hz;             /* measured TSC frequency (0 when not x86-64) */
};

/* Per-rank facts (fixed size so MPI can gather it as bytes; all nodes are the same architecture). */
struct fwq_rank_meta {
    char host[64];
    char cpus[128];            /* affinity list at start, e.g. "0" or "0-3,8" */
    int32_t rank;
    int32_t cpu_start;         /* sched_getcpu() before the first sample */
    int32_t cpu_end;           /* sched_getcpu() after the last sample */
    int32_t pid;
    uint64_t t0_ticks;         /* timer value at the start of sample 0 */
    uint64_t end_ticks;        /* timer value at the end of the last sample */
    int64_t t0_realtime_ns;    /* CLOCK_REALTIME at sample 0, to line up nodes roughly */
    uint32_t saturated;        /* samples longer than 2^32-1 ticks (stored clipped) */
    uint32_t pad;
};

struct fwq_run_meta {
    const char *program;
    const char *mode;          /* "mpi" or "threads" */
    int nranks;
    long nsamples;
    uint64_t work_iterations;
    uint64_t quantum_target_ns;
    double calibration_error;  /* (10th percentile of a fresh batch - target) / target; 0 without --quantum */
    double ns_per_iteration;
    struct fwq_timer_info timer;
    const char *command;
};

/* 0: run; 1: help or version printed, exit 0; -1: bad options (message printed), exit 2 */
int fwq_parse_options(int argc, char **argv, struct fwq_options *opt, int threads_mode);
int fwq_parse_duration_ns(const char *text, uint64_t *ns);
char *fwq_join_command(int argc, char **argv);

int fwq_timer_setup(enum fwq_timer kind, struct fwq_timer_info *info, char *err, size_t errlen);
uint64_t fwq_timer_read(enum fwq_timer kind);

void fwq_work(uint64_t iterations);
/* Run nsamples quanta back to back; sample i = ticks from the end of sample i-1 to the end of i,
 * so sample start times are exactly t0 + the sum of the previous samples. */
void fwq_sample(enum fwq_timer kind, uint64_t iterations, long nsamples, uint32_t *samples,
                struct fwq_rank_meta *meta);
double fwq_ns_per_iteration(void);
/* Choose the loop count that makes an undisturbed sample (10th percentile) last quantum_ns;
 * *error = relative error of a fresh batch.
 * combine (may be NULL) merges a per-rank measurement into one value all ranks agree on (an MPI
 * average), so every rank calibrates at the same time, under the same load, to the same count. */
typedef double (*fwq_combine_fn)(double local, void *ctx);
uint64_t fwq_calibrate(uint64_t quantum_ns, double *error, fwq_combine_fn combine, void *ctx);
int fwq_check_quantum(const struct fwq_timer_info *timer, uint64_t quantum_ns, char *err, size_t errlen);

void fwq_fill_rank_meta(struct fwq_rank_meta *meta, int rank);
int fwq_format_affinity(char *out, size_t outlen);
int fwq_parse_cpu_list(const char *text, int *cpus, int maxcpus);

uint32_t fwq_crc32(uint32_t crc, const void *data, size_t len);

/* Trace writer: header, then each rank's block of nsamples uint32 in rank order, then trailer. */
struct fwq_writer {
    FILE *file;
    uint32_t crc;
    uint64_t words;
};
int fwq_writer_open(struct fwq_writer *w, const char *path, const struct fwq_run_meta *run,
                    const struct fwq_rank_meta *ranks);
int fwq_writer_block(struct fwq_writer *w, const uint32_t *samples, long n);
int fwq_writer_close(struct fwq_writer *w);

#endif
