/* Slurm SPANK plugin: bind every task of a step with mpibind.
 *
 * plugstack.conf:  required <libdir>/mpibind/mpibind_slurm.so [default_off] [exclusive_only_off]
 * srun/sbatch/salloc: --mpibind[=on|off|v|v:2|gpu:0|1|greedy:0|1|smt:K|debug|help]
 *
 * Thin by design: option parsing, the on/off decision and the mapping live in libmpibind
 * (linked in). The plugin reads what Slurm knows (tasks, allocated cores and GPUs),
 * maps once per node in user_init, then binds each task and exports its variables in
 * task_init. Every error fails the step with a message instead of running unbound.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <slurm/spank.h>
#include "mpibind.h"

SPANK_PLUGIN(mpibind, 1);

static struct mpibind_options opts;
static int opts_ready;
static int conf_default_off, conf_exclusive_only_off;
static mpibind_t *mph;
static hwloc_topology_t topo;
static int active; /* this step is bound by us */

static void ensure_opts(void)
{
  if (!opts_ready) {
    mpibind_options_init(&opts);
    opts_ready = 1;
  }
}

/* --mpibind[=list]: an invalid list makes srun/sbatch/salloc fail right away. */
static int option_cb(int val, const char *optarg, int remote)
{
  char err[256];
  ensure_opts();
  if (optarg == NULL) {
    opts.enable = 1;
    return 0;
  }
  if (mpibind_parse_options(optarg, &opts, err, sizeof(err)) != 0) {
    slurm_error("mpibind: %s", err);
    fprintf(stderr, "%s", mpibind_options_usage());
    return -1;
  }
  if (opts.help && !remote) {
    fprintf(stdout, "%s", mpibind_options_usage());
    exit(0);
  }
  return 0;
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
  int i;
  ensure_opts();
  for (i = 0; i < ac; i++) {
    if (strcmp(av[i], "default_off") == 0)
      conf_default_off = 1;
    else if (strcmp(av[i], "exclusive_only_off") == 0)
      conf_exclusive_only_off = 1;
    else {
      slurm_error("mpibind: invalid plugstack.conf argument '%s' "
                  "(expected default_off or exclusive_only_off)", av[i]);
      return -1;
    }
  }
  /* Registered here (not through a static table) so sbatch and salloc see it too. */
  struct spank_option opt = {
    "mpibind", "[args]",
    "Map tasks, threads and GPUs with mpibind (args: on, off, v, gpu:0|1, greedy:0|1, "
    "smt:K, help)",
    2, 0, (spank_opt_cb_f)option_cb};
  if (spank_context() != S_CTX_SLURMD && spank_context() != S_CTX_JOB_SCRIPT &&
      spank_option_register(sp, &opt) != ESPANK_SUCCESS) {
    slurm_error("mpibind: cannot register the --mpibind option");
    return -1;
  }
  return 0;
}

/* Physical cores of this node: distinct sibling lists in sysfs. */
static int node_core_count(void)
{
  char seen[1024][32];
  int nseen = 0, i;
  DIR *dir = opendir("/sys/devices/system/cpu");
  struct dirent *e;
  if (dir == NULL)
    return -1;
  while ((e = readdir(dir)) != NULL) {
    char path[300], list[32] = "";
    if (strncmp(e->d_name, "cpu", 3) != 0 || e->d_name[3] < '0' || e->d_name[3] > '9')
      continue;
    snprintf(path, sizeof(path), "/sys/devices/system/cpu/%.32s/topology/core_cpus_list",
             e->d_name);
    FILE *f = fopen(path, "r");
    if (f == NULL) {
      snprintf(path, sizeof(path), "/sys/devices/system/cpu/%.32s/topology/thread_siblings_list",
               e->d_name);
      f = fopen(path, "r");
    }
    if (f == NULL)
      continue;
    if (fgets(list, sizeof(list), f))
      list[strcspn(list, "\n")] = '\0';
    fclose(f);
    for (i = 0; i < nseen && strcmp(seen[i], list) != 0; i++)
      ;
    if (i == nseen && nseen < 1024)
      snprintf(seen[nseen++], sizeof(seen[0]), "%s", list);
  }
  closedir(dir);
  return nseen;
}

static int getenv_job(spank_t sp, const char *name, char *buf, int size)
{
  return spank_getenv(sp, name, buf, size) == ESPANK_SUCCESS && buf[0] != '\0';
}

static int fail(const char *msg, const char *detail)
{
  slurm_error("mpibind: %s%s%s", msg, detail ? ": " : "", detail ? detail : "");
  if (mph) {
    mpibind_finalize(mph);
    mph = NULL;
  }
  if (topo) {
    hwloc_topology_destroy(topo);
    topo = NULL;
  }
  active = 0;
  return -1;
}

/* Load the topology: MPIBIND_TOPOFILE (exclusive steps only, and it must describe this
 * node) or live discovery; then keep to the step's allocated cores.
 *
 * Slurm numbers a step's cores over the whole node (slurmd loads hwloc with WHOLE_SYSTEM:
 * core i is the i-th core in socket order, cores outside slurmd's own cpuset included).
 * hwloc in slurmstepd, by default, hides the CPUs outside the cgroup it runs in and
 * renumbers the rest, so the topology is loaded whole (INCLUDE_DISALLOWED) and a
 * non-exclusive step is cut to exactly its cores: the CPUs core specialization keeps
 * for the system (CpuSpecList) are never mapped, whatever cpuset slurmstepd is in. */
static int load_topology(spank_t sp, int exclusive, const char *alloc_cores)
{
  char xml[1024], err[512];
  const char *path = NULL;
  if (exclusive && getenv_job(sp, "MPIBIND_TOPOFILE", xml, sizeof(xml)))
    path = xml;
  if (mpibind_open_topology_flags(&topo, path, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED, err,
                                  sizeof(err)) != 0)
    return fail("cannot load the topology", err);
  if (path) {
    long online = sysconf(_SC_NPROCESSORS_CONF);
    int pus = hwloc_bitmap_weight(hwloc_topology_get_complete_cpuset(topo));
    if (online > 0 && pus != online) {
      snprintf(err, sizeof(err), "%.300s describes %d CPUs, this node has %ld", path, pus, online);
      return fail("MPIBIND_TOPOFILE does not match this node", err);
    }
  }
  if (!exclusive) {
    hwloc_bitmap_t pus = hwloc_bitmap_alloc();
    int rc = mpibind_cores_to_pus(topo, alloc_cores, pus);
    if (rc == 0)
      rc = hwloc_topology_restrict(topo, pus, HWLOC_RESTRICT_FLAG_REMOVE_CPULESS);
    hwloc_bitmap_free(pus);
    if (rc != 0)
      return fail("cannot keep to the step's allocated cores (not cores of this node?)",
                  alloc_cores);
  }
  return 0;
}

int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
  uint32_t stepid = 0, ntasks = 0, nodeid = 0;
  char *alloc_cores = NULL;
  char buf[4096], err[512];

  if (!spank_remote(sp))
    return 0;
  ensure_opts();
  /* The batch script and salloc's interactive/extern steps are not bound: their
   * environment would leak into the job's sruns. */
  if (spank_get_item(sp, S_JOB_STEPID, &stepid) != ESPANK_SUCCESS)
    return fail("cannot read the step id", NULL);
  if (stepid >= 0xfffffffaU)
    return 0;
  if (spank_get_item(sp, S_STEP_ALLOC_CORES, &alloc_cores) != ESPANK_SUCCESS ||
      alloc_cores == NULL)
    return fail("cannot read the step's allocated cores", NULL);
  int node_cores = node_core_count();
  int exclusive = node_cores > 0 && mpibind_range_nints(alloc_cores) >= node_cores;
  if (!mpibind_decide_enabled(opts.enable, conf_default_off, conf_exclusive_only_off,
                              exclusive)) {
    if (opts.debug)
      fprintf(stderr, "mpibind: off for this step (exclusive=%d)\n", exclusive);
    return 0;
  }

  if (spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &ntasks) != ESPANK_SUCCESS || ntasks == 0)
    return fail("cannot read the local task count", NULL);
  spank_get_item(sp, S_JOB_NODEID, &nodeid);
  if (load_topology(sp, exclusive, alloc_cores) != 0)
    return -1;
  if (mpibind_init(&mph) != 0)
    return fail("out of memory", NULL);
  mpibind_set_topology(mph, topo);
  mpibind_set_ntasks(mph, (int)ntasks);

  if (getenv_job(sp, "OMP_NUM_THREADS", buf, sizeof(buf))) {
    char *end;
    long n = strtol(buf, &end, 10);
    if (n > 0 && *end == '\0')
      mpibind_set_nthreads(mph, (int)n);
  }
  if (opts.smt > 0)
    mpibind_set_smt(mph, opts.smt);
  if (opts.greedy >= 0)
    mpibind_set_greedy(mph, opts.greedy);
  if (opts.gpu_optim >= 0)
    mpibind_set_gpu_optim(mph, opts.gpu_optim);
  if (getenv_job(sp, "MPIBIND_RESTRICT_TYPE", buf, sizeof(buf))) {
    int type = mpibind_parse_restrict_type(buf);
    if (type < 0)
      return fail("MPIBIND_RESTRICT_TYPE must be cpu or mem", buf);
    mpibind_set_restrict_type(mph, type);
  }
  if (getenv_job(sp, "MPIBIND_RESTRICT", buf, sizeof(buf))) {
    char ids[4096];
    if (mpibind_parse_restrict_ids(buf, ids, sizeof(ids), err, sizeof(err)) != 0)
      return fail("bad MPIBIND_RESTRICT", err);
    mpibind_set_restrict_ids(mph, ids);
  }
  /* Only the GPUs Slurm gave this step (gres/gpu exports their indexes). */
  if (getenv_job(sp, "SLURM_STEP_GPUS", buf, sizeof(buf)) ||
      getenv_job(sp, "SLURM_JOB_GPUS", buf, sizeof(buf))) {
    if (mpibind_set_gpus_allowed(mph, buf) != 0)
      return fail("cannot use Slurm's GPU list", buf);
  }

  if (mpibind(mph) != 0 || mpibind_set_env_vars(mph) != 0) {
    snprintf(err, sizeof(err), "%s", mpibind_errmsg(mph));
    return fail("mapping failed", err);
  }
  active = 1;
  if (opts.debug) {
    char cpus[256];
    hwloc_bitmap_list_snprintf(cpus, sizeof(cpus), hwloc_topology_get_topology_cpuset(topo));
    fprintf(stderr, "mpibind: node %u ntasks %u exclusive %d alloc_cores %s cpus %s\n", nodeid,
            ntasks, exclusive, alloc_cores, cpus);
  }
  if (opts.verbose > 1 || (opts.verbose == 1 && nodeid == 0)) {
    int len = mpibind_mapping_snprint(NULL, 0, mph);
    char *text = malloc((size_t)len + 1);
    mpibind_mapping_snprint(text, (size_t)len + 1, mph);
    fprintf(stderr, "mpibind: %d GPUs on this node\n%s", mpibind_get_num_gpus(mph), text);
    free(text);
  }
  return 0;
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
  int task = -1, nvars = 0, v;
  if (!spank_remote(sp) || !active)
    return 0;
  if (spank_get_item(sp, S_TASK_ID, &task) != ESPANK_SUCCESS)
    return fail("cannot read the task id", NULL);
  if (mpibind_apply(mph, task) != 0) {
    slurm_error("mpibind: %s", mpibind_errmsg(mph));
    return -1;
  }
  char **names = mpibind_get_env_var_names(mph, &nvars);
  for (v = 0; v < nvars; v++) {
    char **values = mpibind_get_env_var_values(mph, names[v]);
    if (spank_setenv(sp, names[v], values[task], 1) != ESPANK_SUCCESS) {
      slurm_error("mpibind: cannot set %s for task %d", names[v], task);
      return -1;
    }
  }
  return 0;
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
  if (mph)
    mpibind_finalize(mph);
  if (topo)
    hwloc_topology_destroy(topo);
  mph = NULL;
  topo = NULL;
  active = 0;
  return 0;
}
