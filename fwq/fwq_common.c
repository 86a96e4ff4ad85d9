/* fwq_common.c: timer, work quantum, calibration, options and trace writer for fwq-mpi / fwq-th. */
#define _GNU_SOURCE
#include "fwq_common.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------------- durations and lists */

int fwq_parse_duration_ns(const char *text, uint64_t *ns)
{
    char *end = NULL;
    errno = 0;
    double value = strtod(text, &end);
    if (errno || end == text || !(value > 0) || !isfinite(value))
        return -1;
    double scale;
    if (strcmp(end, "ns") == 0) scale = 1;
    else if (strcmp(end, "us") == 0) scale = 1e3;
    else if (strcmp(end, "ms") == 0) scale = 1e6;
    else if (strcmp(end, "s") == 0) scale = 1e9;
    else return -1; /* a unit is required: "1.4" alone is ambiguous */
    double total = value * scale;
    if (total > 1e15)
        return -1;
    *ns = (uint64_t)llround(total);
    return 0;
}

/* "0,2-4" -> {0,2,3,4}; returns the count, or -1 on a malformed list. */
int fwq_parse_cpu_list(const char *text, int *cpus, int maxcpus)
{
    int count = 0;
    const char *p = text;
    while (*p) {
        char *end;
        long lo = strtol(p, &end, 10);
        if (end == p || lo < 0 || lo >= CPU_SETSIZE) return -1;
        long hi = lo;
        p = end;
        if (*p == '-') {
            hi = strtol(p + 1, &end, 10);
            if (end == p + 1 || hi < lo || hi >= CPU_SETSIZE) return -1;
            p = end;
        }
        for (long c = lo; c <= hi; c++) {
            if (count >= maxcpus) return -1;
            cpus[count++] = (int)c;
        }
        if (*p == ',') p++;
        else if (*p) return -1;
    }
    return count;
}

int fwq_format_affinity(char *out, size_t outlen)
{
    cpu_set_t set;
    out[0] = '\0';
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return -1;
    size_t used = 0;
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &set)) continue;
        int last = c;
        while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, &set)) last++;
        int n = last > c ? snprintf(out + used, outlen - used, "%s%d-%d", used ? "," : "", c, last)
                         : snprintf(out + used, outlen - used, "%s%d", used ? "," : "", c);
        if (n < 0 || (size_t)n >= outlen - used) { strcpy(out + outlen - 4, "..."); return 0; }
        used += (size_t)n;
        c = last;
    }
    return 0;
}

char *fwq_join_command(int argc, char **argv)
{
    size_t len = 1;
    for (int i = 0; i < argc; i++) len += strlen(argv[i]) + 1;
    char *cmd = calloc(len, 1);
    if (!cmd) return NULL;
    for (int i = 0; i < argc; i++) {
        if (i) strcat(cmd, " ");
        strcat(cmd, argv[i]);
    }
    for (char *p = cmd; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' '; /* the header is line based */
    return cmd;
}

/* ---------------------------------------------------------------- options */

static void usage(FILE *out, int threads_mode)
{
    fprintf(out,
        "usage: %s -n SAMPLES (-w ITERATIONS | --quantum DURATION) [-o FILE] [options]\n"
        "  -n, --samples N        samples per %s (> 0)\n"
        "  -w, --work N           loop iterations per work quantum\n"
        "      --quantum DUR      calibrate the work to a quantum, e.g. 1.4ms, 250us (unit required)\n"
        "  -o, --output FILE      trace file (default fwq.dat; format in fwq/README.md)\n"
        "      --timer T          monotonic_raw (default) or tsc (rdtscp+lfence, x86-64)\n"
        "      --oversubscribe    allow more %s than CPUs\n"
        "%s"
        "  -q, --quiet            no summary on stderr\n"
        "  -h, --help / --version\n",
        threads_mode ? "fwq-th" : "fwq-mpi", threads_mode ? "thread" : "rank",
        threads_mode ? "threads" : "ranks on a node",
        threads_mode ? "  -t, --threads N        worker threads, one per CPU (default: CPUs in --cpus or affinity)\n"
                       "      --cpus LIST        CPUs to pin the threads to, e.g. 0,2-3\n" : "");
}

int fwq_parse_options(int argc, char **argv, struct fwq_options *opt, int threads_mode)
{
    enum { OPT_QUANTUM = 256, OPT_TIMER, OPT_OVERSUB, OPT_CPUS, OPT_VERSION };
    static const struct option longopts[] = {
        {"samples", required_argument, 0, 'n'}, {"work", required_argument, 0, 'w'},
        {"quantum", required_argument, 0, OPT_QUANTUM}, {"output", required_argument, 0, 'o'},
        {"timer", required_argument, 0, OPT_TIMER}, {"oversubscribe", no_argument, 0, OPT_OVERSUB},
        {"threads", required_argument, 0, 't'}, {"cpus", required_argument, 0, OPT_CPUS},
        {"quiet", no_argument, 0, 'q'}, {"help", no_argument, 0, 'h'},
        {"version", no_argument, 0, OPT_VERSION}, {0, 0, 0, 0}};
    memset(opt, 0, sizeof *opt);
    opt->nsamples = -1;
    opt->output = "fwq.dat";
    opt->timer = FWQ_TIMER_MONOTONIC_RAW;
    int c;
    char *end;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "n:w:o:t:qh", longopts, NULL)) != -1) {
        switch (c) {
        case 'n':
            errno = 0;
            opt->nsamples = strtol(optarg, &end, 10);
            if (errno || *end || opt->nsamples <= 0) {
                fprintf(stderr, "fwq: -n must be a positive sample count, got '%s'\n", optarg);
                return -1;
            }
            break;
        case 'w': {
            errno = 0;
            long long w = strtoll(optarg, &end, 10);
            if (errno || *end || w <= 0) {
                fprintf(stderr, "fwq: -w must be a positive iteration count, got '%s'\n", optarg);
                return -1;
            }
            opt->work_iterations = (uint64_t)w;
            break;
        }
        case OPT_QUANTUM:
            if (fwq_parse_duration_ns(optarg, &opt->quantum_ns) != 0 || opt->quantum_ns == 0) {
                if (fwq_parse_duration_ns(optarg, &opt->quantum_ns) == 0)
                    fprintf(stderr, "fwq: --quantum %s is below the timer resolution (1 ns)\n", optarg);
                else
                    fprintf(stderr, "fwq: --quantum needs a positive duration with a unit (ns, us, ms, s), got '%s'\n", optarg);
                return -1;
            }
            break;
        case 'o': opt->output = optarg; break;
        case OPT_TIMER:
            if (strcmp(optarg, "monotonic_raw") == 0) opt->timer = FWQ_TIMER_MONOTONIC_RAW;
            else if (strcmp(optarg, "tsc") == 0) opt->timer = FWQ_TIMER_TSC;
            else { fprintf(stderr, "fwq: --timer must be monotonic_raw or tsc, got '%s'\n", optarg); return -1; }
            break;
        case OPT_OVERSUB: opt->oversubscribe = 1; break;
        case 't':
            if (!threads_mode) { fprintf(stderr, "fwq: -t is for fwq-th; fwq-mpi uses one rank per core\n"); return -1; }
            opt->nthreads = (int)strtol(optarg, &end, 10);
            if (*end || opt->nthreads <= 0) { fprintf(stderr, "fwq: -t must be a positive thread count, got '%s'\n", optarg); return -1; }
            break;
        case OPT_CPUS:
            if (!threads_mode) { fprintf(stderr, "fwq: --cpus is for fwq-th; bind MPI ranks with the launcher\n"); return -1; }
            opt->cpu_list = optarg;
            break;
        case 'q': opt->quiet = 1; break;
        case 'h': usage(stdout, threads_mode); return 1;
        case OPT_VERSION: printf("fwq %s\n", FWQ_VERSION); return 1;
        default:
            fprintf(stderr, "fwq: unknown or incomplete option '%s'\n", argv[optind - 1]);
            usage(stderr, threads_mode);
            return -1;
        }
    }
    if (optind < argc) { fprintf(stderr, "fwq: unexpected argument '%s'\n", argv[optind]); return -1; }
    if (opt->nsamples < 0) { fprintf(stderr, "fwq: -n SAMPLES is required\n"); return -1; }
    if (opt->nsamples > (1L << 31)) { fprintf(stderr, "fwq: -n %ld is too large\n", opt->nsamples); return -1; }
    if (!opt->work_iterations == !opt->quantum_ns) {
        fprintf(stderr, "fwq: give exactly one of -w ITERATIONS or --quantum DURATION\n");
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- timer */

static inline uint64_t read_monotonic_raw(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#if defined(__x86_64__)
/* rdtscp waits for earlier instructions to finish; the lfence keeps later ones from starting
 * before the read. Together they bracket the work loop like a serialized read. */
static inline uint64_t read_tsc(void)
{
    uint32_t lo, hi, aux;
    __asm__ volatile("rdtscp\n\tlfence" : "=a"(lo), "=d"(hi), "=c"(aux)::"memory");
    return ((uint64_t)hi << 32) | lo;
}
#define FWQ_HAVE_TSC 1
#else
static inline uint64_t read_tsc(void) { return 0; }
#define FWQ_HAVE_TSC 0
#endif

uint64_t fwq_timer_read(enum fwq_timer kind)
{
    return kind == FWQ_TIMER_TSC ? read_tsc() : read_monotonic_raw();
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, compare_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int fwq_timer_setup(enum fwq_timer kind, struct fwq_timer_info *info, char *err, size_t errlen)
{
    memset(info, 0, sizeof *info);
    info->kind = kind;
#if FWQ_HAVE_TSC
    {   /* measure the TSC rate against CLOCK_MONOTONIC_RAW over ~50 ms */
        uint64_t n0 = read_monotonic_raw(), t0 = read_tsc();
        struct timespec pause = {0, 50 * 1000 * 1000};
        nanosleep(&pause, NULL);
        uint64_t n1 = read_monotonic_raw(), t1 = read_tsc();
        info->tsc_hz = (double)(t1 - t0) * 1e9 / (double)(n1 - n0);
    }
#endif
    if (kind == FWQ_TIMER_TSC) {
        if (!FWQ_HAVE_TSC) { snprintf(err, errlen, "--timer tsc needs x86-64"); return -1; }
        info->ticks_per_second = info->tsc_hz;
        info->resolution_ns = 1e9 / info->tsc_hz;
    } else {
        struct timespec res;
        clock_getres(CLOCK_MONOTONIC_RAW, &res);
        info->ticks_per_second = 1e9;
        info->resolution_ns = (double)res.tv_sec * 1e9 + (double)res.tv_nsec;
    }
    /* cost of one read: median over batches of back-to-back reads */
    enum { BATCHES = 51, READS = 200 };
    double per_read[BATCHES];
    for (int b = 0; b < BATCHES; b++) {
        uint64_t start = fwq_timer_read(kind), last = start;
        for (int i = 0; i < READS; i++) last = fwq_timer_read(kind);
        per_read[b] = (double)(last - start) / READS * 1e9 / info->ticks_per_second;
    }
    info->overhead_ns = median(per_read, BATCHES);
    return 0;
}

/* ---------------------------------------------------------------- work and sampling */

/* The fixed work: a counted loop the compiler must keep (the empty asm claims to change i).
 * The nops make one iteration a few cycles so -w counts stay in a familiar range. */
void fwq_work(uint64_t iterations)
{
    for (uint64_t i = iterations; i > 0; i--)
        __asm__ volatile("nop\n\tnop\n\tnop\n\tnop\n\tnop\n\tnop\n\tnop\n\tnop" : "+r"(i));
}

#define SAMPLE_LOOP(READ)                                                    \
    do {                                                                     \
        uint64_t prev = READ();                                              \
        meta->t0_ticks = prev;                                               \
        for (long s = 0; s < nsamples; s++) {                                \
            fwq_work(iterations);                                            \
            uint64_t now = READ();                                           \
            uint64_t d = now - prev;                                         \
            if (d > UINT32_MAX) { d = UINT32_MAX; saturated++; }             \
            samples[s] = (uint32_t)d;                                        \
            prev = now;                                                      \
        }                                                                    \
        meta->end_ticks = prev;                                              \
    } while (0)

void fwq_sample(enum fwq_timer kind, uint64_t iterations, long nsamples, uint32_t *samples,
                struct fwq_rank_meta *meta)
{
    uint32_t saturated = 0;
    /* touch every page of the sample buffer now: a first-touch page fault inside the loop would be
     * FWQ's own noise (tens of us on a VM whose host backs guest memory lazily) */
    memset(samples, 0, (size_t)nsamples * sizeof *samples);
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    meta->t0_realtime_ns = (int64_t)rt.tv_sec * 1000000000LL + rt.tv_nsec;
    meta->cpu_start = sched_getcpu();
    if (kind == FWQ_TIMER_TSC) SAMPLE_LOOP(read_tsc);
    else SAMPLE_LOOP(read_monotonic_raw);
    meta->cpu_end = sched_getcpu();
    meta->saturated = saturated;
}

static double time_work_ns(uint64_t iterations)
{
    uint64_t a = read_monotonic_raw();
    fwq_work(iterations);
    return (double)(read_monotonic_raw() - a);
}

double fwq_ns_per_iteration(void)
{
    double best = 1e300;
    for (int i = 0; i < 20; i++) {
        double t = time_work_ns(1 << 16) / (1 << 16);
        if (t < best) best = t;
    }
    return best;
}

/* The noise-free duration of a quantum: the 10th percentile of a batch. A co-tenant or a daemon
 * lengthens some samples (often half of them on a shared core), never shortens one, so a low
 * percentile tracks the undisturbed work where a median would jump with the load. */
static double clean_quantum_ns(uint64_t iterations, int count)
{
    double v[201];
    if (count > 201) count = 201;
    for (int i = 0; i < count; i++) v[i] = time_work_ns(iterations);
    qsort(v, (size_t)count, sizeof *v, compare_double);
    return v[count / 10];
}

int fwq_check_quantum(const struct fwq_timer_info *timer, uint64_t quantum_ns, char *err, size_t errlen)
{
    if ((double)quantum_ns < timer->resolution_ns) {
        snprintf(err, errlen, "quantum %llu ns is below the timer resolution %.1f ns",
                 (unsigned long long)quantum_ns, timer->resolution_ns);
        return -1;
    }
    /* A quantum shorter than ~20 timer reads is dominated by the timer itself. */
    double floor_ns = 20 * timer->overhead_ns > 1000 ? 20 * timer->overhead_ns : 1000;
    if ((double)quantum_ns < floor_ns) {
        snprintf(err, errlen, "quantum %llu ns is below the measurable minimum %.0f ns "
                 "(timer resolution %.1f ns, read overhead %.1f ns)",
                 (unsigned long long)quantum_ns, floor_ns, timer->resolution_ns, timer->overhead_ns);
        return -1;
    }
    return 0;
}

static double combine_or_keep(fwq_combine_fn combine, void *ctx, double v)
{
    return combine ? combine(v, ctx) : v;
}

uint64_t fwq_calibrate(uint64_t quantum_ns, double *error, fwq_combine_fn combine, void *ctx)
{
    double target = (double)quantum_ns;
    double w = target / combine_or_keep(combine, ctx, fwq_ns_per_iteration());
    /* batch size: enough quanta for ~30 ms per round, between 21 and 201 */
    int count = (int)(30e6 / target);
    if (count < 21) count = 21;
    if (count > 201) count = 201;
    for (int round = 0; round < 6; round++) {
        if (w < 1) w = 1;
        double m = combine_or_keep(combine, ctx, clean_quantum_ns((uint64_t)llround(w), count));
        if (fabs(m / target - 1) < 0.002) break;
        w *= target / m;
    }
    uint64_t iterations = w < 1 ? 1 : (uint64_t)llround(w);
    *error = combine_or_keep(combine, ctx, clean_quantum_ns(iterations, count)) / target - 1;
    return iterations;
}

void fwq_fill_rank_meta(struct fwq_rank_meta *meta, int rank)
{
    memset(meta, 0, sizeof *meta);
    meta->rank = rank;
    meta->pid = (int32_t)getpid();
    if (gethostname(meta->host, sizeof meta->host - 1) != 0) strcpy(meta->host, "unknown");
    for (char *p = meta->host; *p; p++)
        if (isspace((unsigned char)*p)) *p = '_';
    fwq_format_affinity(meta->cpus, sizeof meta->cpus);
    meta->cpu_start = meta->cpu_end = sched_getcpu();
}

/* ---------------------------------------------------------------- CRC-32 (IEEE, as zlib.crc32) */

uint32_t fwq_crc32(uint32_t crc, const void *data, size_t len)
{
    static uint32_t table[256];
    static int ready;
    if (!ready) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            table[i] = c;
        }
        ready = 1;
    }
    const unsigned char *p = data;
    crc = ~crc;
    while (len--) crc = table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}

/* ---------------------------------------------------------------- trace writer */

int fwq_writer_open(struct fwq_writer *w, const char *path, const struct fwq_run_meta *run,
                    const struct fwq_rank_meta *ranks)
{
    const uint32_t one = 1;
    if (*(const unsigned char *)&one != 1) {
        fprintf(stderr, "fwq: big-endian hosts are not supported by the trace format\n");
        return -1;
    }
    w->file = fopen(path, "wb");
    w->crc = 0;
    w->words = 0;
    if (!w->file) { fprintf(stderr, "fwq: cannot write %s: %s\n", path, strerror(errno)); return -1; }
    time_t now = time(NULL);
    char created[32];
    strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    FILE *f = w->file;
    fprintf(f, "FWQ-TRACE 1\n");
    fprintf(f, "version=%s\nprogram=%s\nmode=%s\ncreated=%s\n", FWQ_VERSION, run->program, run->mode, created);
    fprintf(f, "nranks=%d\nnsamples=%ld\n", run->nranks, run->nsamples);
    fprintf(f, "work_iterations=%llu\nquantum_target_ns=%llu\ncalibration_error=%.6f\nns_per_iteration=%.4f\n",
            (unsigned long long)run->work_iterations, (unsigned long long)run->quantum_target_ns,
            run->calibration_error, run->ns_per_iteration);
    fprintf(f, "timer=%s\nticks_per_second=%.3f\ntimer_resolution_ns=%.3f\ntimer_overhead_ns=%.3f\ntsc_hz=%.0f\n",
            run->timer.kind == FWQ_TIMER_TSC ? "tsc" : "monotonic_raw", run->timer.ticks_per_second,
            run->timer.resolution_ns, run->timer.overhead_ns, run->timer.tsc_hz);
    fprintf(f, "payload=uint32le ticks per sample, rank-major\n");
    fprintf(f, "command=%s\n", run->command ? run->command : "");
    for (int r = 0; r < run->nranks; r++) {
        const struct fwq_rank_meta *m = &ranks[r];
        fprintf(f, "rank=%d host=%s pid=%d cpu=%d cpu_end=%d cpus=%s t0_ticks=%llu end_ticks=%llu "
                   "t0_realtime_ns=%lld saturated=%u\n",
                m->rank, m->host, m->pid, m->cpu_start, m->cpu_end, m->cpus[0] ? m->cpus : "?",
                (unsigned long long)m->t0_ticks, (unsigned long long)m->end_ticks,
                (long long)m->t0_realtime_ns, m->saturated);
    }
    fprintf(f, "header_end\n");
    return ferror(f) ? -1 : 0;
}

int fwq_writer_block(struct fwq_writer *w, const uint32_t *samples, long n)
{
    w->crc = fwq_crc32(w->crc, samples, (size_t)n * sizeof *samples);
    w->words += (uint64_t)n;
    return fwrite(samples, sizeof *samples, (size_t)n, w->file) == (size_t)n ? 0 : -1;
}

int fwq_writer_close(struct fwq_writer *w)
{
    unsigned char trailer[16] = "FWQ-END\n";
    uint32_t words = (uint32_t)w->words;
    memcpy(trailer + 8, &w->crc, 4);
    memcpy(trailer + 12, &words, 4);
    int bad = fwrite(trailer, 1, sizeof trailer, w->file) != sizeof trailer;
    bad |= ferror(w->file);
    bad |= fclose(w->file) != 0;
    w->file = NULL;
    return bad ? -1 : 0;
}
