/* fwq-noise: a daemon-like noise injector. One thread per target CPU wakes up periodically and
 * keeps that CPU busy for a fixed time (the noise signature: frequency + duration), then reports
 * the duty cycle it actually achieved as JSON.
 *
 * Signature distribution over the k target CPUs of a node (seed 000, section 5.1):
 *   unscaled: the node as a whole sees one copy: each CPU fires at freq/k
 *   scaled:   one copy per core of the node:    each CPU fires at freq*cores/k
 * Target j is offset by j*duration inside the period (a wave front across the CPUs).
 * Start: uncoordinated (random phase per node) or --sync (phase 0 at multiples of the period on
 * CLOCK_REALTIME, i.e. gang-scheduled across nodes whose clocks are synchronized; seed 002).
 * --roam: one thread, each burst on a CPU of the list drawn at random: a daemon the OS may place on
 * any CPU it is allowed. Left unpinned, a SCHED_FIFO thread never leaves the CPU it started on
 * (it can always preempt the application there), so where it started would decide which core suffers. */
#define _GNU_SOURCE
#include "fwq_common.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static atomic_int stop_requested;

static void on_signal(int sig) { (void)sig; atomic_store(&stop_requested, 1); }

static uint64_t now_ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct injector {
    pthread_t thread;
    int cpu;               /* -1: not pinned, the OS places the thread (a "floating" daemon) */
    const int *roam;       /* --roam: each burst on one of these CPUs, drawn at random (NULL: no roaming) */
    int nroam;
    unsigned roam_seed;
    uint64_t *roam_bursts; /* bursts per roam CPU */
    int fifo;              /* run the bursts at SCHED_FIFO (preempts the application like a kernel thread) */
    uint64_t period_ns, duration_ns, first_ns, deadline_ns; /* CLOCK_MONOTONIC */
    /* results */
    uint64_t events, missed, busy_ns, overrun_ns, cpu_ns, start_ns, stop_ns;
    double wake_late_sum_ns, wake_late_max_ns;
    int pinned, policy_ok, policy_errno;
};

/* Every thread pins itself and switches to SCHED_FIFO, then the schedule (first event, deadline) is
 * set: on a loaded machine a freshly created (not yet FIFO) thread can wait half a second for a CPU,
 * and a schedule fixed before that would start in the past, its slots all counted as missed. */
static pthread_barrier_t ready, scheduled;

static void sleep_until(uint64_t t)
{
    struct timespec ts = {(time_t)(t / 1000000000ull), (long)(t % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR && !atomic_load(&stop_requested)) {}
}

static void *injector_main(void *arg)
{
    struct injector *in = arg;
    in->pinned = in->roam != NULL;
    if (in->cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(in->cpu, &set);
        in->pinned = pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
    }
    in->policy_ok = 1;
    if (in->fifo) {
        struct sched_param sp = {.sched_priority = 10};
        in->policy_errno = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
        in->policy_ok = in->policy_errno == 0;
    }
    pthread_barrier_wait(&ready);
    pthread_barrier_wait(&scheduled);    /* main has set first_ns and deadline_ns */
    in->start_ns = now_ns(CLOCK_MONOTONIC);
    uint64_t cpu_start = now_ns(CLOCK_THREAD_CPUTIME_ID);
    uint64_t next = in->first_ns;
    while (!atomic_load(&stop_requested) && (!in->deadline_ns || next < in->deadline_ns)) {
        int roamed = -1;
        if (in->roam) {
            /* move while asleep: the wake-up happens on the drawn CPU (moving after it costs ~150 us) */
            int j = (int)(rand_r(&in->roam_seed) % (unsigned)in->nroam);
            cpu_set_t set;
            CPU_ZERO(&set);
            CPU_SET(in->roam[j], &set);
            if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0) roamed = j;
            else in->pinned = 0;
        }
        sleep_until(next);
        if (atomic_load(&stop_requested)) break;
        if (roamed >= 0) in->roam_bursts[roamed]++;
        uint64_t wake = now_ns(CLOCK_MONOTONIC);
        double late = (double)(wake - next);
        in->wake_late_sum_ns += late;
        if (late > in->wake_late_max_ns) in->wake_late_max_ns = late;
        uint64_t end = wake + in->duration_ns, t = wake;
        volatile uint64_t spin = 0;
        while ((t = now_ns(CLOCK_MONOTONIC)) < end) spin++;
        /* A burst held the CPU until its scheduled end. Time past it means the (v)CPU was taken away
         * inside the burst (a hypervisor's co-tenant, measured here at up to tens of ms): the
         * application lost it too, but not to this injector, so it is reported apart. */
        in->busy_ns += end - wake;
        in->overrun_ns += t - end;
        in->events++;
        next += in->period_ns;
        if (next <= t) { /* the burst overran its period: skip the slots we cannot honour */
            uint64_t behind = (t - next) / in->period_ns + 1;
            in->missed += behind;
            next += behind * in->period_ns;
        }
    }
    in->stop_ns = now_ns(CLOCK_MONOTONIC);
    in->cpu_ns = now_ns(CLOCK_THREAD_CPUTIME_ID) - cpu_start;
    return NULL;
}

static void usage(FILE *out)
{
    fprintf(out,
        "usage: fwq-noise --freq HZ --duration DUR --cpus LIST [options]\n"
        "  --freq HZ            signature frequency (per node, see --scaled)\n"
        "  --duration DUR       busy time per event, e.g. 2500us, 25us (unit required)\n"
        "  --cpus LIST          target CPUs, e.g. 0 or 0,2-3\n"
        "  --float              do not pin: one thread per listed CPU, placed by the OS scheduler\n"
        "  --roam               one thread; each burst on a CPU of LIST drawn at random (--seed)\n"
        "  --seconds S          stop after S seconds (default: run until SIGTERM/SIGINT)\n"
        "  --scaled             one copy of the signature per core of the node (default: unscaled)\n"
        "  --cores N            cores per node for --scaled (default: online CPUs)\n"
        "  --sync               start at multiples of the period on CLOCK_REALTIME (gang, across nodes)\n"
        "  --seed N             phase seed for the default uncoordinated start\n"
        "  --policy fifo|other  scheduling of the bursts (default fifo: preempts like a kernel thread)\n"
        "  -o, --report FILE    JSON report (default: stdout)\n");
}

int main(int argc, char **argv)
{
    double freq = 0, seconds = 0;
    uint64_t duration_ns = 0;
    const char *cpu_text = NULL, *report_path = NULL;
    int scaled = 0, sync_start = 0, fifo = 1, floating = 0, roam = 0, cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
    unsigned seed = (unsigned)getpid() ^ (unsigned)now_ns(CLOCK_REALTIME);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end;
#define NEED_VALUE() do { if (!v) { fprintf(stderr, "fwq-noise: %s needs a value\n", a); return FWQ_EXIT_USAGE; } i++; } while (0)
        if (!strcmp(a, "--freq")) { NEED_VALUE(); freq = strtod(v, &end);
            if (*end || !(freq > 0) || !isfinite(freq)) { fprintf(stderr, "fwq-noise: --freq must be a positive number of Hz, got '%s'\n", v); return FWQ_EXIT_USAGE; } }
        else if (!strcmp(a, "--duration")) { NEED_VALUE();
            if (fwq_parse_duration_ns(v, &duration_ns) || !duration_ns) { fprintf(stderr, "fwq-noise: --duration needs a duration with a unit (ns, us, ms, s), got '%s'\n", v); return FWQ_EXIT_USAGE; } }
        else if (!strcmp(a, "--cpus")) { NEED_VALUE(); cpu_text = v; }
        else if (!strcmp(a, "--seconds")) { NEED_VALUE(); seconds = strtod(v, &end);
            if (*end || seconds < 0 || !isfinite(seconds)) { fprintf(stderr, "fwq-noise: bad --seconds '%s'\n", v); return FWQ_EXIT_USAGE; } }
        else if (!strcmp(a, "--cores")) { NEED_VALUE(); cores = (int)strtol(v, &end, 10);
            if (*end || cores <= 0) { fprintf(stderr, "fwq-noise: bad --cores '%s'\n", v); return FWQ_EXIT_USAGE; } }
        else if (!strcmp(a, "--seed")) { NEED_VALUE(); seed = (unsigned)strtoul(v, &end, 10); }
        else if (!strcmp(a, "--policy")) { NEED_VALUE();
            if (!strcmp(v, "fifo")) fifo = 1; else if (!strcmp(v, "other")) fifo = 0;
            else { fprintf(stderr, "fwq-noise: --policy must be fifo or other\n"); return FWQ_EXIT_USAGE; } }
        else if (!strcmp(a, "--report") || !strcmp(a, "-o")) { NEED_VALUE(); report_path = v; }
        else if (!strcmp(a, "--scaled")) scaled = 1;
        else if (!strcmp(a, "--unscaled")) scaled = 0;
        else if (!strcmp(a, "--sync")) sync_start = 1;
        else if (!strcmp(a, "--float")) floating = 1;
        else if (!strcmp(a, "--roam")) roam = 1;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else { fprintf(stderr, "fwq-noise: unknown option '%s'\n", a); usage(stderr); return FWQ_EXIT_USAGE; }
    }
    if (!freq || !duration_ns || !cpu_text) {
        fprintf(stderr, "fwq-noise: --freq, --duration and --cpus are required\n");
        return FWQ_EXIT_USAGE;
    }
    int cpus[CPU_SETSIZE];
    int k = fwq_parse_cpu_list(cpu_text, cpus, CPU_SETSIZE);
    long configured = sysconf(_SC_NPROCESSORS_CONF);
    if (k <= 0) { fprintf(stderr, "fwq-noise: bad --cpus list '%s'\n", cpu_text); return FWQ_EXIT_USAGE; }
    for (int j = 0; j < k; j++)
        if (cpus[j] >= configured) { fprintf(stderr, "fwq-noise: CPU %d does not exist (%ld CPUs)\n", cpus[j], configured); return FWQ_EXIT_USAGE; }

    if (roam && floating) { fprintf(stderr, "fwq-noise: --roam and --float exclude each other\n"); return FWQ_EXIT_USAGE; }
    int *roam_cpus = NULL, nroam = 0;
    if (roam) {      /* one roaming thread carries the whole signature; --cpus is where it may go */
        roam_cpus = malloc((size_t)k * sizeof *roam_cpus);
        memcpy(roam_cpus, cpus, (size_t)k * sizeof *roam_cpus);
        nroam = k;
        k = 1;
    }
    uint64_t *roam_bursts = calloc((size_t)(nroam ? nroam : 1), sizeof *roam_bursts);

    double cpu_freq = freq * (scaled ? cores : 1) / k;
    double period_s = 1.0 / cpu_freq;
    uint64_t period_ns = (uint64_t)llround(period_s * 1e9);
    if (duration_ns >= period_ns) {
        fprintf(stderr, "fwq-noise: duration %.1f us fills the whole per-CPU period %.1f us (duty cycle >= 100%%)\n",
                duration_ns / 1e3, period_ns / 1e3);
        return FWQ_EXIT_USAGE;
    }

    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    struct injector *in = calloc((size_t)k, sizeof *in);
    pthread_barrier_init(&ready, NULL, (unsigned)k + 1);
    pthread_barrier_init(&scheduled, NULL, (unsigned)k + 1);
    for (int j = 0; j < k; j++) {
        in[j] = (struct injector){.cpu = floating || roam ? -1 : cpus[j], .fifo = fifo, .period_ns = period_ns,
                                  .duration_ns = duration_ns, .roam = roam_cpus, .nroam = nroam,
                                  .roam_seed = seed ^ 0x9e3779b9u, .roam_bursts = roam_bursts};
        if (pthread_create(&in[j].thread, NULL, injector_main, &in[j]) != 0) {
            fprintf(stderr, "fwq-noise: cannot start thread for CPU %d\n", cpus[j]);
            return FWQ_EXIT_RUNTIME;
        }
    }
    pthread_barrier_wait(&ready);

    /* first event: phase 0 of the period, on the realtime grid (--sync) or at a random phase */
    uint64_t mono = now_ns(CLOCK_MONOTONIC), real = now_ns(CLOCK_REALTIME);
    uint64_t phase_wait;
    if (sync_start) phase_wait = period_ns - real % period_ns;
    else { srand(seed); phase_wait = (uint64_t)((double)rand() / RAND_MAX * (double)period_ns); }
    uint64_t base = mono + phase_wait + 1000000; /* +1 ms: every thread is past the barrier by then */
    uint64_t deadline = seconds > 0 ? mono + (uint64_t)(seconds * 1e9) : 0;
    for (int j = 0; j < k; j++) {
        in[j].first_ns = base + ((uint64_t)j * duration_ns) % period_ns;
        in[j].deadline_ns = deadline;
    }
    pthread_barrier_wait(&scheduled);
    for (int j = 0; j < k; j++) pthread_join(in[j].thread, NULL);

    FILE *out = report_path ? fopen(report_path, "w") : stdout;
    if (!out) { fprintf(stderr, "fwq-noise: cannot write %s\n", report_path); return FWQ_EXIT_RUNTIME; }
    int all_fifo = 1, fifo_errno = 0;
    for (int j = 0; j < k; j++) {
        all_fifo &= in[j].policy_ok;
        if (!in[j].policy_ok && !fifo_errno) fifo_errno = in[j].policy_errno;
    }
    /* policy = what the bursts really ran at; policy_requested = what was asked for */
    fprintf(out, "{\"mode\": \"busy\", \"freq_hz\": %.6g, \"duration_us\": %.3f, \"scaled\": %s, "
                 "\"cores_per_node\": %d, \"start\": \"%s\", \"policy_requested\": \"%s\", \"policy\": \"%s\", "
                 "\"fifo_errno\": %d, \"fifo_error\": \"%s\", \"euid\": %d, \"cpus\": [",
            freq, duration_ns / 1e3, scaled ? "true" : "false", cores,
            sync_start ? "synchronized" : "uncoordinated", fifo ? "fifo" : "other", fifo && all_fifo ? "fifo" : "other",
            fifo_errno, fifo_errno ? strerror(fifo_errno) : "", (int)geteuid());
    double busy_total = 0, elapsed_total = 0;
    for (int j = 0; j < k; j++) {
        double elapsed = (double)(in[j].stop_ns - in[j].start_ns);
        double duty = elapsed > 0 ? in[j].busy_ns / elapsed : 0;
        busy_total += (double)in[j].busy_ns;
        elapsed_total += elapsed;
        fprintf(out, "%s{\"cpu\": %d, \"pinned\": %s, \"freq_hz\": %.6g, \"period_ms\": %.6f, \"events\": %llu, "
                     "\"missed\": %llu, \"busy_s\": %.6f, \"overrun_s\": %.6f, \"cpu_s\": %.6f, "
                     "\"elapsed_s\": %.6f, \"duty_cycle\": %.6f, "
                     "\"target_duty_cycle\": %.6f, \"wake_latency_us_mean\": %.3f, \"wake_latency_us_max\": %.3f",
                j ? ", " : "", roam ? -1 : cpus[j], in[j].pinned ? "true" : "false", cpu_freq, period_ns / 1e6,
                (unsigned long long)in[j].events, (unsigned long long)in[j].missed, in[j].busy_ns / 1e9,
                in[j].overrun_ns / 1e9,
                in[j].cpu_ns / 1e9, elapsed / 1e9, duty, duration_ns * cpu_freq / 1e9,
                in[j].events ? in[j].wake_late_sum_ns / in[j].events / 1e3 : 0, in[j].wake_late_max_ns / 1e3);
        if (roam) {     /* where the bursts went: CPU -> bursts */
            fputs(", \"roam_bursts\": {", out);
            for (int r = 0; r < nroam; r++)
                fprintf(out, "%s\"%d\": %llu", r ? ", " : "", roam_cpus[r], (unsigned long long)roam_bursts[r]);
            fputc('}', out);
        }
        fputc('}', out);
    }
    fprintf(out, "], \"duty_cycle\": %.6f, \"target_duty_cycle\": %.6f}\n",
            elapsed_total > 0 ? busy_total / elapsed_total : 0, duration_ns * cpu_freq / 1e9);
    if (report_path) fclose(out);
    if (fifo && !all_fifo)
        fprintf(stderr, "fwq-noise: warning: SCHED_FIFO refused (%s, euid %d): bursts ran at SCHED_OTHER\n",
                strerror(fifo_errno), (int)geteuid());
    free(in);
    free(roam_cpus);
    free(roam_bursts);
    return 0;
}
