/* Mapping time of libmpibind on topology XMLs.
 *
 * usage: mpibind_bench [-n ITERATIONS] FILE.xml...
 * For each file: the topology is loaded once (timed separately, it is what a plugin
 * pays per node), then each task count is mapped ITERATIONS times: init, set_topology,
 * ntasks, mpibind(), set_env_vars, finalize. Prints a Markdown table in milliseconds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "mpibind.h"

static double now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static int map_once(hwloc_topology_t topo, int ntasks, double *ms)
{
  mpibind_t *h;
  double t0 = now_ms();
  mpibind_init(&h);
  mpibind_set_topology(h, topo);
  mpibind_set_ntasks(h, ntasks);
  int rc = mpibind(h) || mpibind_set_env_vars(h);
  if (rc)
    fprintf(stderr, "mpibind_bench: %s\n", mpibind_errmsg(h));
  mpibind_finalize(h);
  *ms = now_ms() - t0;
  return rc;
}

int main(int argc, char **argv)
{
  int iterations = 200, i, f, first = 1;
  double worst = 0;
  if (argc > 2 && strcmp(argv[1], "-n") == 0) {
    iterations = atoi(argv[2]);
    first = 3;
  }
  if (first >= argc || iterations < 1) {
    fprintf(stderr, "usage: %s [-n ITERATIONS] FILE.xml...\n", argv[0]);
    return 2;
  }
  double *samples = malloc(iterations * sizeof(double));
  printf("| topology | PUs | NUMA | GPUs | load (ms) | ntasks | median (ms) | p99 (ms) | max (ms) |\n");
  printf("|---|---|---|---|---|---|---|---|---|\n");
  for (f = first; f < argc; f++) {
    hwloc_topology_t topo;
    char err[512];
    double t0 = now_ms();
    if (mpibind_open_topology(&topo, argv[f], err, sizeof(err)) != 0) {
      fprintf(stderr, "mpibind_bench: %s\n", err);
      return 1;
    }
    double load_ms = now_ms() - t0;
    int npus = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
    int ncores = hwloc_get_nbobjs_by_depth(topo, mpibind_get_core_depth(topo));

    mpibind_t *probe;
    mpibind_init(&probe);
    mpibind_set_topology(probe, topo);
    mpibind_set_ntasks(probe, 1);
    mpibind(probe);
    int nnuma = mpibind_get_num_numas(probe), ngpus = mpibind_get_num_gpus(probe);
    mpibind_finalize(probe);

    const char *name = strrchr(argv[f], '/') ? strrchr(argv[f], '/') + 1 : argv[f];
    int counts[] = {1, nnuma, ncores, npus};
    for (int c = 0; c < 4; c++) {
      if (c > 0 && counts[c] == counts[c - 1])
        continue;
      for (i = 0; i < iterations; i++)
        if (map_once(topo, counts[c], &samples[i]) != 0)
          return 1;
      qsort(samples, iterations, sizeof(double), cmp_double);
      double median = samples[iterations / 2];
      double p99 = samples[(int)(iterations * 0.99) < iterations ? (int)(iterations * 0.99)
                                                                  : iterations - 1];
      double max = samples[iterations - 1];
      if (median > worst)
        worst = median;
      printf("| %s | %d | %d | %d | %.2f | %d | %.3f | %.3f | %.3f |\n", name, npus, nnuma,
             ngpus, load_ms, counts[c], median, p99, max);
    }
    mpibind_close_topology(topo);
  }
  printf("\nworst median mapping time: %.3f ms (target < 5 ms): %s\n", worst,
         worst < 5.0 ? "met" : "NOT met");
  free(samples);
  return 0;
}
