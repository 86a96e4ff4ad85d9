/* Unit tests of libmpibind on synthetic hwloc topologies (no files needed) plus,
 * when the shared directory is given, a few checks on real topology XMLs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "mpibind.h"

static int failures, checks;

#define CHECK(cond, ...)                                          \
  do {                                                            \
    checks++;                                                     \
    if (!(cond)) {                                                \
      failures++;                                                 \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                               \
      fputc('\n', stderr);                                        \
    }                                                             \
  } while (0)

static hwloc_topology_t synthetic(const char *desc)
{
  hwloc_topology_t t;
  hwloc_topology_init(&t);
  hwloc_topology_set_synthetic(t, desc);
  if (mpibind_load_topology(t) != 0) {
    fprintf(stderr, "cannot load synthetic topology %s\n", desc);
    exit(2);
  }
  return t;
}

static const char *cpus_of(mpibind_t *h, int task)
{
  static char buf[256];
  mpibind_cpus_ptask_snprint(buf, sizeof(buf), h, task);
  return buf;
}

/* 2 NUMA x 4 cores x 2 PUs = 16 PUs; synthetic PU os ids are 0..15 in order. */
#define TWO_NUMA "pack:2 numa:1 core:4 pu:2"

static mpibind_t *map(hwloc_topology_t t, int ntasks, int nthreads, int smt, int greedy)
{
  mpibind_t *h;
  mpibind_init(&h);
  mpibind_set_topology(h, t);
  mpibind_set_ntasks(h, ntasks);
  if (nthreads)
    mpibind_set_nthreads(h, nthreads);
  if (smt)
    mpibind_set_smt(h, smt);
  if (greedy >= 0)
    mpibind_set_greedy(h, greedy);
  return h;
}

static void test_mem_hierarchy(void)
{
  hwloc_topology_t t = synthetic(TWO_NUMA);
  mpibind_t *h = map(t, 4, 0, 0, -1);
  CHECK(mpibind(h) == 0, "%s", mpibind_errmsg(h));
  CHECK(mpibind_get_greedy_path(h) == 0, "4 tasks on 2 NUMA is not greedy");
  CHECK(mpibind_get_hw_smt(h) == 2, "hw smt %d", mpibind_get_hw_smt(h));
  /* One thread per core by default: 2 cores, first PU each. */
  CHECK(strcmp(cpus_of(h, 0), "0,2") == 0, "task 0 cpus %s", cpus_of(h, 0));
  CHECK(strcmp(cpus_of(h, 3), "12,14") == 0, "task 3 cpus %s", cpus_of(h, 3));
  CHECK(mpibind_get_nthreads(h)[0] == 2, "nthreads %d", mpibind_get_nthreads(h)[0]);
  mpibind_finalize(h);

  /* smt:2 gives each task both PUs of its cores, nthreads = PUs. */
  h = map(t, 4, 0, 2, -1);
  CHECK(mpibind(h) == 0, "%s", mpibind_errmsg(h));
  CHECK(strcmp(cpus_of(h, 1), "4-7") == 0, "task 1 cpus %s", cpus_of(h, 1));
  CHECK(mpibind_get_nthreads(h)[1] == 4, "nthreads %d", mpibind_get_nthreads(h)[1]);
  mpibind_finalize(h);

  /* More tasks than cores: tasks split the PUs of a core. */
  h = map(t, 16, 0, 0, -1);
  CHECK(mpibind(h) == 0, "%s", mpibind_errmsg(h));
  CHECK(strcmp(cpus_of(h, 0), "0") == 0 && strcmp(cpus_of(h, 1), "1") == 0,
        "tasks 0,1: %s", cpus_of(h, 0));
  mpibind_finalize(h);

  /* More tasks than PUs: PUs are shared, never empty. */
  h = map(t, 40, 0, 0, -1);
  CHECK(mpibind(h) == 0, "%s", mpibind_errmsg(h));
  int i, empty = 0;
  for (i = 0; i < 40; i++)
    empty += mpibind_get_cpus(h)[i] == NULL || hwloc_bitmap_iszero(mpibind_get_cpus(h)[i]);
  CHECK(empty == 0, "%d empty tasks", empty);
  mpibind_finalize(h);
  hwloc_topology_destroy(t);
}

static void test_greedy(void)
{
  hwloc_topology_t t = synthetic(TWO_NUMA);
  mpibind_t *h = map(t, 1, 0, 0, -1);
  CHECK(mpibind(h) == 0, "%s", mpibind_errmsg(h));
  CHECK(mpibind_get_greedy_path(h) == 1, "1 task on 2 NUMA is greedy");
  CHECK(strcmp(cpus_of(h, 0), "0-15") == 0, "greedy cpus %s", cpus_of(h, 0));
  CHECK(mpibind_get_nthreads(h)[0] == 16, "greedy nthreads %d", mpibind_get_nthreads(h)[0]);
  mpibind_finalize(h);

  h = map(t, 1, 3, 0, 0);
  CHECK(mpibind(h) == 0, "%s", mpibind_errmsg(h));
  CHECK(mpibind_get_greedy_path(h) == 0, "greedy=0");
  /* All 4 cores of the first NUMA match 3 workers: ncpus (4) may exceed nthreads (3). */
  CHECK(strcmp(cpus_of(h, 0), "0,2,4,6") == 0, "greedy=0 nthreads 3 cpus %s", cpus_of(h, 0));
  CHECK(mpibind_get_nthreads(h)[0] == 3, "nthreads %d", mpibind_get_nthreads(h)[0]);
  mpibind_finalize(h);
  hwloc_topology_destroy(t);
}

static void test_errors_and_restrict(void)
{
  hwloc_topology_t t = synthetic(TWO_NUMA);
  mpibind_t *h;
  mpibind_init(&h);
  CHECK(mpibind_set_ntasks(h, 0) != 0, "ntasks 0 accepted");
  CHECK(strstr(mpibind_errmsg(h), "ntasks") != NULL, "message: %s", mpibind_errmsg(h));
  CHECK(mpibind_set_greedy(h, 2) != 0, "greedy 2 accepted");
  mpibind_set_topology(h, t);
  CHECK(mpibind(h) != 0, "mpibind without ntasks succeeded");
  mpibind_finalize(h);

  h = map(t, 2, 0, 3, -1);
  CHECK(mpibind(h) != 0, "smt 3 on SMT-2 accepted");
  CHECK(strstr(mpibind_errmsg(h), "smt 3") != NULL, "message: %s", mpibind_errmsg(h));
  mpibind_finalize(h);

  /* Restrict to CPUs 8-15 (second NUMA): the caller's topology stays whole. */
  h = map(t, 2, 0, 0, -1);
  mpibind_set_restrict_ids(h, "8-15");
  CHECK(mpibind(h) == 0, "%s", mpibind_errmsg(h));
  CHECK(strcmp(cpus_of(h, 0), "8,10") == 0, "restricted cpus %s", cpus_of(h, 0));
  CHECK(hwloc_bitmap_weight(hwloc_topology_get_topology_cpuset(t)) == 16,
        "caller's topology was modified");
  mpibind_finalize(h);

  h = map(t, 2, 0, 0, -1);
  mpibind_set_restrict_type(h, MPIBIND_RESTRICT_MEM);
  mpibind_set_restrict_ids(h, "1");
  CHECK(mpibind(h) == 0, "%s", mpibind_errmsg(h));
  CHECK(strcmp(cpus_of(h, 1), "12,14") == 0, "mem-restricted cpus %s", cpus_of(h, 1));
  mpibind_finalize(h);

  h = map(t, 2, 0, 0, -1);
  mpibind_set_restrict_ids(h, "100-200");
  CHECK(mpibind(h) != 0, "restrict outside the topology accepted");
  mpibind_finalize(h);
  h = map(t, 2, 0, 0, -1);
  mpibind_set_restrict_ids(h, "0-x");
  CHECK(mpibind(h) != 0, "malformed restrict accepted");
  mpibind_finalize(h);
  hwloc_topology_destroy(t);
}

static void test_env_and_text(void)
{
  hwloc_topology_t t = synthetic(TWO_NUMA);
  mpibind_t *h = map(t, 2, 0, 0, -1);
  CHECK(mpibind(h) == 0 && mpibind_set_env_vars(h) == 0, "%s", mpibind_errmsg(h));
  int n = 0;
  char **names = mpibind_get_env_var_names(h, &n);
  CHECK(n == 3, "no GPUs: 3 OMP variables only, got %d", n);
  CHECK(strcmp(mpibind_get_env_var_values(h, "OMP_NUM_THREADS")[1], "4") == 0, "OMP_NUM_THREADS");
  CHECK(strcmp(mpibind_get_env_var_values(h, "OMP_PLACES")[0], "threads") == 0, "OMP_PLACES");
  CHECK(strcmp(mpibind_get_env_var_values(h, "OMP_PROC_BIND")[0], "spread") == 0, "BIND");
  CHECK(mpibind_get_env_var_values(h, "VISIBLE_DEVICES") == NULL, "no VISIBLE_DEVICES");
  (void)names;
  char line[128];
  mpibind_mapping_ptask_snprint(line, sizeof(line), h, 1);
  CHECK(strcmp(line, "mpibind: task   1 nths  4 gpus  cpus 8,10,12,14") == 0, "line '%s'", line);
  char small[20];
  int need = mpibind_mapping_snprint(small, sizeof(small), h);
  CHECK(need > (int)sizeof(small) && strlen(small) == sizeof(small) - 1, "truncation");
  mpibind_finalize(h);
  hwloc_topology_destroy(t);
}

static void test_options(void)
{
  struct mpibind_options o;
  char err[256];
  mpibind_options_init(&o);
  CHECK(mpibind_parse_options("on,v:2,gpu:0,greedy:1,smt:2", &o, err, sizeof(err)) == 0, "%s", err);
  CHECK(o.enable == 1 && o.verbose == 2 && o.gpu_optim == 0 && o.greedy == 1 && o.smt == 2,
        "parsed values");
  mpibind_options_init(&o);
  CHECK(mpibind_parse_options("bogus", &o, err, sizeof(err)) != 0, "bogus accepted");
  CHECK(strstr(err, "bogus") != NULL, "message %s", err);
  CHECK(mpibind_parse_options("smt:0", &o, err, sizeof(err)) != 0, "smt:0 accepted");
  CHECK(mpibind_parse_options("smt", &o, err, sizeof(err)) != 0, "smt without value accepted");
  CHECK(mpibind_parse_options("gpu:2", &o, err, sizeof(err)) != 0, "gpu:2 accepted");
  CHECK(mpibind_parse_options("on,", &o, err, sizeof(err)) != 0, "trailing comma accepted");
  CHECK(mpibind_parse_options("omp_places", &o, err, sizeof(err)) != 0, "omp_places accepted");
  mpibind_options_init(&o);
  CHECK(mpibind_parse_options("off", &o, err, sizeof(err)) == 0 && o.enable == 0, "off");

  /* Decision order: user on/off, then default_off, then exclusive_only_off, then exclusive. */
  CHECK(mpibind_decide_enabled(1, 1, 0, 0) == 1, "user on beats default_off");
  CHECK(mpibind_decide_enabled(0, 0, 1, 1) == 0, "user off wins");
  CHECK(mpibind_decide_enabled(-1, 1, 1, 1) == 0, "default_off");
  CHECK(mpibind_decide_enabled(-1, 0, 1, 0) == 1, "exclusive_only_off binds shared steps");
  CHECK(mpibind_decide_enabled(-1, 0, 0, 0) == 0, "shared step not bound by default");
  CHECK(mpibind_decide_enabled(-1, 0, 0, 1) == 1, "exclusive step bound by default");

  CHECK(mpibind_range_nints("0-3,8") == 5, "range count");
  CHECK(mpibind_range_nints("0-3,") == -1 && mpibind_range_nints("a") == -1 &&
        mpibind_range_nints("3-1") == -1 && mpibind_range_nints("") == -1, "bad lists");
  CHECK(mpibind_parse_restrict_type("mem") == MPIBIND_RESTRICT_MEM &&
        mpibind_parse_restrict_type("gpu") == -1, "restrict types");

  char ids[64], path[] = "/tmp/mpibind-unit-XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0 && write(fd, "4-7\n", 4) == 4, "temp file");
  close(fd);
  CHECK(mpibind_parse_restrict_ids(path, ids, sizeof(ids), err, sizeof(err)) == 0 &&
        strcmp(ids, "4-7") == 0, "restrict from file: %s", err);
  unlink(path);
  CHECK(mpibind_parse_restrict_ids("/nonexistent/x", ids, sizeof(ids), err, sizeof(err)) != 0,
        "missing restrict file accepted");

  hwloc_topology_t t = synthetic(TWO_NUMA);
  hwloc_bitmap_t pus = hwloc_bitmap_alloc();
  CHECK(mpibind_cores_to_pus(t, "1,4", pus) == 0 && hwloc_bitmap_weight(pus) == 4 &&
        hwloc_bitmap_isset(pus, 2) && hwloc_bitmap_isset(pus, 9), "cores_to_pus");
  CHECK(mpibind_cores_to_pus(t, "99", pus) != 0, "core 99 accepted");
  hwloc_bitmap_free(pus);
  hwloc_topology_destroy(t);

  /* Flags added by the caller survive mpibind_load_topology (the plugin's whole node). */
  CHECK(mpibind_open_topology_flags(&t, NULL, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED, err,
                                    sizeof(err)) == 0, "open_topology_flags: %s", err);
  if (t) {
    unsigned long f = hwloc_topology_get_flags(t);
    CHECK((f & HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED) && (f & HWLOC_TOPOLOGY_FLAG_IS_THISSYSTEM),
          "open_topology_flags keeps INCLUDE_DISALLOWED and adds IS_THISSYSTEM (flags 0x%lx)", f);
    mpibind_close_topology(t);
  }
}

/* Real XMLs: GPU ids and variables, overlapping HBM NUMA nodes, DRM devices. */
static void test_shared(const char *shared)
{
  char path[1024];
  hwloc_topology_t t;
  char err[256];
  mpibind_t *h;

  snprintf(path, sizeof(path), "%s/topologies/mpibind__eas-tioga.xml", shared);
  if (mpibind_open_topology(&t, path, err, sizeof(err)) == 0) {
    h = map(t, 8, 0, 0, -1);
    CHECK(mpibind(h) == 0 && mpibind_set_env_vars(h) == 0, "%s", mpibind_errmsg(h));
    CHECK(mpibind_get_num_gpus(h) == 8, "tioga gpus %d", mpibind_get_num_gpus(h));
    char **v = mpibind_get_env_var_values(h, "ROCR_VISIBLE_DEVICES");
    CHECK(v && strcmp(v[0], "4") == 0 && strcmp(v[7], "1") == 0, "tioga ROCR ids");
    int ng = 0;
    mpibind_set_gpu_ids(h, MPIBIND_ID_PCIBUS);
    char **g = mpibind_get_gpus_ptask(h, 0, &ng);
    CHECK(ng == 1 && strlen(g[0]) == 12 && g[0][4] == ':', "pci id %s", ng ? g[0] : "-");
    mpibind_finalize(h);
    mpibind_close_topology(t);
  } else {
    fprintf(stderr, "skip shared checks: %s\n", err);
    return;
  }

  snprintf(path, sizeof(path), "%s/topologies/robustness/hwloc__64intel64-fakeKNL-SNC4-hybrid.xml",
           shared);
  if (mpibind_open_topology(&t, path, err, sizeof(err)) == 0) {
    h = map(t, 8, 0, 0, -1);
    CHECK(mpibind(h) == 0, "%s", mpibind_errmsg(h));
    CHECK(mpibind_get_num_numas(h) == 4, "KNL hybrid: MCDRAM nodes dropped, got %d NUMA",
          mpibind_get_num_numas(h));
    int i, j, dup = 0;
    for (i = 0; i < 8; i++)
      for (j = i + 1; j < 8; j++)
        dup += hwloc_bitmap_intersects(mpibind_get_cpus(h)[i], mpibind_get_cpus(h)[j]);
    CHECK(dup == 0, "KNL hybrid: %d overlapping task pairs", dup);
    mpibind_finalize(h);
    mpibind_close_topology(t);
  }

  snprintf(path, sizeof(path), "%s/topologies/robustness/coral-lassen-hwloc1.xml", shared);
  if (mpibind_open_topology(&t, path, err, sizeof(err)) == 0) {
    h = map(t, 4, 0, 0, -1);
    CHECK(mpibind(h) == 0, "%s", mpibind_errmsg(h));
    /* The V100s have only DRM devices (card1, renderD128): those are not GPUs, but
     * the PCI 3D controllers below them are, found by the PCI fallback in bus order. */
    CHECK(mpibind_get_num_gpus(h) == 4, "V100s behind DRM devices: %d GPUs, expected 4",
          mpibind_get_num_gpus(h));
    CHECK(mpibind_get_num_numas(h) == 2, "GPU-memory NUMA nodes used: %d",
          mpibind_get_num_numas(h));
    mpibind_finalize(h);
    mpibind_close_topology(t);
  }
}

/* Debian's hwloc (no NVML) shows the H100 as a bare PCI 3D controller; hwloc with
 * NVML shows nvml0 below it. Both must give the same GPU, id and PCI bus id. */
static void test_pci_only_gpu(const char *shared)
{
  const char *files[] = {"device__h100-no-nvml.xml", "device__h100-nvml.xml"};
  char path[1024], err[256];
  int k;
  for (k = 0; k < 2; k++) {
    hwloc_topology_t t;
    snprintf(path, sizeof(path), "%s/topologies/%s", shared, files[k]);
    if (mpibind_open_topology(&t, path, err, sizeof(err)) != 0)
      continue;
    mpibind_t *h = map(t, 2, 0, 0, -1);
    CHECK(mpibind(h) == 0, "%s", mpibind_errmsg(h));
    CHECK(mpibind_get_num_gpus(h) == 1, "%s: %d GPUs, expected the H100", files[k],
          mpibind_get_num_gpus(h));
    int ngpus = 0;
    mpibind_set_gpu_ids(h, MPIBIND_ID_PCIBUS);
    char **ids = mpibind_get_gpus_ptask(h, 1, &ngpus);
    CHECK(ngpus == 1 && strcmp(ids[0], "0000:00:06.0") == 0, "%s: task 1 GPU %s", files[k],
          ngpus ? ids[0] : "none");
    mpibind_set_gpu_ids(h, MPIBIND_ID_SMI);
    ids = mpibind_get_gpus_ptask(h, 0, &ngpus);
    CHECK(ngpus == 1 && strcmp(ids[0], "0") == 0, "%s: task 0 SMI id %s", files[k],
          ngpus ? ids[0] : "none");
    mpibind_finalize(h);
    mpibind_close_topology(t);
  }
}

int main(int argc, char **argv)
{
  test_mem_hierarchy();
  test_greedy();
  test_errors_and_restrict();
  test_env_and_text();
  test_options();
  if (argc > 1)
    test_shared(argv[1]);
  if (argc > 1)
    test_pci_only_gpu(argv[1]);
  printf("unit: %d checks, %d failures\n", checks, failures);
  return failures ? 1 : 0;
}
