/* libfwq-selfish.so: in-process noise like the Selfish Detour utility (seed 000): an interval timer
 * raises SIGALRM in the application's main thread and the handler spins for a fixed time, so the
 * application itself is delayed. Loaded with LD_PRELOAD and configured by environment:
 *   STACKPROOF_SELFISH_FREQ      events per second in each targeted process (required)
 *   STACKPROOF_SELFISH_DURATION  spin per event, e.g. 2500us (required)
 *   STACKPROOF_SELFISH_RANKS     ranks to disturb, e.g. 0 or 0,2-3 (default: all)
 *   STACKPROOF_SELFISH_OFFSET    extra start delay per local rank, e.g. 2500us (wave front)
 *   STACKPROOF_SELFISH_REPORT    file to append one JSON line per process at exit (default stderr)
 * The rank comes from OMPI_COMM_WORLD_RANK, PMI_RANK or SLURM_PROCID; launchers themselves
 * (mpirun, srun, orted, ...) are never disturbed. */
#define _GNU_SOURCE
#include "fwq_common.h"

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static uint64_t duration_ns, events, busy_ns, cpu_ns, start_ns;
static double freq;
static int active, rank = -1;
static timer_t timer;

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Spin until `duration` of wall time has passed: the detour the application sees. busy_ns is that
 * wall time (longer when the handler itself is preempted), cpu_ns the CPU time the noise consumed. */
static void on_alarm(int sig)
{
    (void)sig;
    int saved = errno;
    uint64_t begin = mono_ns(), end = begin + duration_ns, t, c0 = thread_cpu_ns();
    while ((t = mono_ns()) < end) {}
    busy_ns += t - begin;
    cpu_ns += thread_cpu_ns() - c0;
    events++;
    errno = saved;
}

static int env_rank(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : -1;
}

static int is_launcher(void)
{
    static const char *names[] = {"mpirun", "mpiexec", "orterun", "prterun", "orted", "prted", "srun",
                                  "slurmstepd", "hydra_pmi_proxy", "mpiexec.hydra", NULL};
    for (int i = 0; names[i]; i++)
        if (!strcmp(program_invocation_short_name, names[i])) return 1;
    return 0;
}

__attribute__((constructor)) static void selfish_start(void)
{
    const char *f = getenv("STACKPROOF_SELFISH_FREQ"), *d = getenv("STACKPROOF_SELFISH_DURATION");
    if (!f || !d || is_launcher()) return;
    freq = strtod(f, NULL);
    if (!(freq > 0) || fwq_parse_duration_ns(d, &duration_ns) != 0) {
        fprintf(stderr, "libfwq-selfish: bad STACKPROOF_SELFISH_FREQ/DURATION '%s'/'%s': no noise injected\n", f, d);
        return;
    }
    rank = env_rank("OMPI_COMM_WORLD_RANK");
    if (rank < 0) rank = env_rank("PMI_RANK");
    if (rank < 0) rank = env_rank("SLURM_PROCID");
    if (rank < 0) rank = 0;
    const char *ranks = getenv("STACKPROOF_SELFISH_RANKS");
    if (ranks && *ranks && strcmp(ranks, "all") != 0) {
        int list[1024], n = fwq_parse_cpu_list(ranks, list, 1024), hit = 0;
        for (int i = 0; i < n; i++) hit |= list[i] == rank;
        if (!hit) return;
    }
    int local = env_rank("OMPI_COMM_WORLD_LOCAL_RANK");
    if (local < 0) local = env_rank("SLURM_LOCALID");
    if (local < 0) local = 0;
    uint64_t offset_ns = 0;
    const char *o = getenv("STACKPROOF_SELFISH_OFFSET");
    if (o && *o && fwq_parse_duration_ns(o, &offset_ns) == 0) offset_ns *= (uint64_t)local;

    struct sigaction sa = {.sa_handler = on_alarm, .sa_flags = SA_RESTART};
    sigaction(SIGALRM, &sa, NULL);
    /* deliver to this (the main) thread only, not to MPI progress threads */
    struct sigevent ev = {.sigev_notify = SIGEV_THREAD_ID, .sigev_signo = SIGALRM};
    ev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
    if (timer_create(CLOCK_MONOTONIC, &ev, &timer) != 0) {
        fprintf(stderr, "libfwq-selfish: timer_create failed: %s\n", strerror(errno));
        return;
    }
    uint64_t period = (uint64_t)llround(1e9 / freq), first = period + offset_ns;
    struct itimerspec its = {
        .it_interval = {(time_t)(period / 1000000000ull), (long)(period % 1000000000ull)},
        .it_value = {(time_t)(first / 1000000000ull), (long)(first % 1000000000ull)}};
    start_ns = mono_ns();
    timer_settime(timer, 0, &its, NULL);
    active = 1;
}

__attribute__((destructor)) static void selfish_stop(void)
{
    if (!active) return;
    timer_delete(timer);
    double elapsed = (double)(mono_ns() - start_ns);
    const char *path = getenv("STACKPROOF_SELFISH_REPORT");
    FILE *out = path && *path ? fopen(path, "a") : NULL;
    fprintf(out ? out : stderr,
            "{\"mode\": \"signal\", \"rank\": %d, \"pid\": %d, \"cpu\": %d, \"freq_hz\": %.6g, \"duration_us\": %.3f, "
            "\"events\": %llu, \"busy_s\": %.6f, \"cpu_s\": %.6f, \"elapsed_s\": %.6f, \"duty_cycle\": %.6f, "
            "\"cpu_duty_cycle\": %.6f, \"target_duty_cycle\": %.6f}\n",
            rank, (int)getpid(), sched_getcpu(), freq, duration_ns / 1e3, (unsigned long long)events,
            busy_ns / 1e9, cpu_ns / 1e9, elapsed / 1e9, elapsed > 0 ? busy_ns / elapsed : 0,
            elapsed > 0 ? cpu_ns / elapsed : 0, freq * duration_ns / 1e9);
    if (out) fclose(out);
}
