/* Drives mpibind_slurm.so without Slurm: this program provides the few SPANK functions
 * the plugin calls (items and job environment from tables below) and checks the
 * plugin's decisions, errors, binding and exported variables on this machine. */
#include <dlfcn.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <hwloc.h>
#include <slurm/spank.h>

static int failures;
#define CHECK(cond, what)                                               \
  do {                                                                  \
    if (cond)                                                           \
      printf("ok   %s\n", what);                                        \
    else {                                                              \
      printf("FAIL %s\n", what);                                        \
      failures++;                                                       \
    }                                                                   \
  } while (0)

/* ---- the fake Slurm ---- */
static spank_context_t context = S_CTX_REMOTE;
static uint32_t item_stepid, item_ntasks = 2, item_nodeid;
static int item_taskid;
static char item_cores[64] = "0";
static struct { const char *name; char value[1024]; } jobenv[8];
static struct spank_option registered;
static char last_error[1024];
static int setenv_calls;
static char set_omp[64];

spank_err_t spank_get_item(spank_t sp, spank_item_t item, ...)
{
  va_list ap;
  va_start(ap, item);
  switch (item) {
  case S_JOB_STEPID: *va_arg(ap, uint32_t *) = item_stepid; break;
  case S_JOB_LOCAL_TASK_COUNT: *va_arg(ap, uint32_t *) = item_ntasks; break;
  case S_JOB_NODEID: *va_arg(ap, uint32_t *) = item_nodeid; break;
  case S_TASK_ID: *va_arg(ap, int *) = item_taskid; break;
  case S_STEP_ALLOC_CORES: *va_arg(ap, char **) = item_cores; break;
  default: va_end(ap); return ESPANK_BAD_ARG;
  }
  va_end(ap);
  return ESPANK_SUCCESS;
}

spank_err_t spank_getenv(spank_t sp, const char *var, char *buf, int len)
{
  for (int i = 0; i < 8; i++)
    if (jobenv[i].name && strcmp(jobenv[i].name, var) == 0) {
      snprintf(buf, len, "%s", jobenv[i].value);
      return ESPANK_SUCCESS;
    }
  return ESPANK_ENV_NOEXIST;
}

spank_err_t spank_setenv(spank_t sp, const char *var, const char *val, int overwrite)
{
  setenv_calls++;
  if (strcmp(var, "OMP_NUM_THREADS") == 0)
    snprintf(set_omp, sizeof(set_omp), "%s", val);
  return ESPANK_SUCCESS;
}

int spank_remote(spank_t sp) { return context == S_CTX_REMOTE; }
spank_context_t spank_context(void) { return context; }

spank_err_t spank_option_register(spank_t sp, struct spank_option *opt)
{
  registered = *opt;
  return ESPANK_SUCCESS;
}

void slurm_error(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof(last_error), fmt, ap);
  va_end(ap);
  fprintf(stderr, "  [slurm_error] %s\n", last_error);
}

static void set_env(int slot, const char *name, const char *value)
{
  jobenv[slot].name = name;
  snprintf(jobenv[slot].value, sizeof(jobenv[slot].value), "%s", value ? value : "");
}

typedef int (*hook_f)(spank_t, int, char **);

int main(int argc, char **argv)
{
  if (argc < 3) {
    fprintf(stderr, "usage: %s mpibind_slurm.so TOPOLOGY.xml-of-another-machine\n", argv[0]);
    return 2;
  }
  void *plugin = dlopen(argv[1], RTLD_NOW);
  if (!plugin) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  hook_f init = (hook_f)dlsym(plugin, "slurm_spank_init");
  hook_f user_init = (hook_f)dlsym(plugin, "slurm_spank_user_init");
  hook_f task_init = (hook_f)dlsym(plugin, "slurm_spank_task_init");
  hook_f fini = (hook_f)dlsym(plugin, "slurm_spank_exit");
  CHECK(init && user_init && task_init && fini && dlsym(plugin, "plugin_name"),
        "plugin exports the SPANK entry points");

  char *bad[] = {"bogus"};
  CHECK(init(NULL, 1, bad) != 0 && strstr(last_error, "bogus"),
        "invalid plugstack.conf argument fails");

  context = S_CTX_ALLOCATOR; /* sbatch/salloc register the option too */
  CHECK(init(NULL, 0, NULL) == 0 && registered.name && strcmp(registered.name, "mpibind") == 0,
        "--mpibind registered with spank_option_register (sbatch/salloc context)");
  context = S_CTX_LOCAL;
  CHECK(init(NULL, 0, NULL) == 0, "init in srun context");
  CHECK(registered.cb(registered.val, "bogus", 0) != 0 && strstr(last_error, "bogus"),
        "--mpibind=bogus fails srun with a message");
  CHECK(registered.cb(registered.val, "smt:0", 0) != 0, "--mpibind=smt:0 fails");
  CHECK(registered.cb(registered.val, "v,gpu:0,greedy:1", 0) == 0, "--mpibind=v,gpu:0,greedy:1");

  /* Remote side on this machine. Use all cores so the step is exclusive. */
  context = S_CTX_REMOTE;
  cpu_set_t before;
  sched_getaffinity(0, sizeof(before), &before);
  int ncpus = CPU_COUNT(&before);
  snprintf(item_cores, sizeof(item_cores), "0-%d", 1023);
  item_ntasks = 2;

  item_stepid = 0xfffffffb; /* batch script */
  CHECK(user_init(NULL, 0, NULL) == 0 && task_init(NULL, 0, NULL) == 0 && setenv_calls == 0,
        "batch step is left alone");

  item_stepid = 0;
  snprintf(item_cores, sizeof(item_cores), "0-1023"); /* more than any node: exclusive */
  registered.cb(registered.val, "on", 1);
  CHECK(user_init(NULL, 0, NULL) == 0, "user_init maps the step");
  item_taskid = ncpus > 1 ? 1 : 0;
  CHECK(task_init(NULL, 0, NULL) == 0 && setenv_calls >= 3 && atoi(set_omp) >= 1,
        "task_init binds and exports OMP_NUM_THREADS");
  cpu_set_t after;
  sched_getaffinity(0, sizeof(after), &after);
  CHECK(CPU_COUNT(&after) >= 1 && (ncpus == 1 || CPU_COUNT(&after) < ncpus),
        "the task is bound to its share of the CPUs");
  sched_setaffinity(0, sizeof(before), &before);
  fini(NULL, 0, NULL);

  /* A step given only the node's last core (CpuSpecList keeps the others for the
   * system): its one task runs on exactly that core's CPUs. */
  hwloc_topology_t whole;
  hwloc_topology_init(&whole);
  hwloc_topology_set_flags(whole, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED);
  hwloc_topology_load(whole);
  int ncores = hwloc_get_nbobjs_by_type(whole, HWLOC_OBJ_CORE);
  if (ncores > 1) {
    hwloc_obj_t last = hwloc_get_obj_by_type(whole, HWLOC_OBJ_CORE, (unsigned)ncores - 1);
    hwloc_bitmap_t got = hwloc_bitmap_alloc();
    snprintf(item_cores, sizeof(item_cores), "%d", ncores - 1);
    item_ntasks = 1;
    item_taskid = 0;
    registered.cb(registered.val, "on", 1);
    CHECK(user_init(NULL, 0, NULL) == 0 && task_init(NULL, 0, NULL) == 0,
          "a step with one core of the node is mapped");
    hwloc_get_cpubind(whole, got, HWLOC_CPUBIND_THREAD);
    CHECK(hwloc_bitmap_isequal(got, last->cpuset),
          "a non-exclusive step is kept to its allocated core (core specialization)");
    sched_setaffinity(0, sizeof(before), &before);
    fini(NULL, 0, NULL);
    snprintf(item_cores, sizeof(item_cores), "%d", ncores + 7);
    CHECK(user_init(NULL, 0, NULL) != 0 && strstr(last_error, "allocated cores"),
          "allocated cores this node does not have fail the step");
    fini(NULL, 0, NULL);
    hwloc_bitmap_free(got);
    snprintf(item_cores, sizeof(item_cores), "0-1023");
    item_ntasks = 2;
  } else {
    printf("skip a non-exclusive step: this machine has one core\n");
  }
  hwloc_topology_destroy(whole);

  registered.cb(registered.val, "off", 1);
  setenv_calls = 0;
  CHECK(user_init(NULL, 0, NULL) == 0 && task_init(NULL, 0, NULL) == 0 && setenv_calls == 0,
        "--mpibind=off: nothing bound");
  fini(NULL, 0, NULL);

  registered.cb(registered.val, "on,smt:64", 1);
  CHECK(user_init(NULL, 0, NULL) != 0 && strstr(last_error, "smt 64"),
        "smt above the node's SMT fails the step");
  fini(NULL, 0, NULL);

  registered.cb(registered.val, "smt:1", 1);
  set_env(0, "MPIBIND_TOPOFILE", argv[2]);
  CHECK(user_init(NULL, 0, NULL) != 0 && strstr(last_error, "does not match"),
        "MPIBIND_TOPOFILE of another machine is refused");
  fini(NULL, 0, NULL);
  set_env(0, "MPIBIND_RESTRICT", "not-a-list-or-file");
  CHECK(user_init(NULL, 0, NULL) != 0 && strstr(last_error, "MPIBIND_RESTRICT"),
        "bad MPIBIND_RESTRICT fails the step");
  fini(NULL, 0, NULL);

  printf("plugin: %d failures\n", failures);
  return failures ? 1 : 0;
}
