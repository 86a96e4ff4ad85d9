/* Public interface: handle, inputs, mpibind(), results, environment, output. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"

void set_error(mpibind_t *h, const char *fmt, ...)
{
  va_list ap;
  if (h == NULL)
    return;
  va_start(ap, fmt);
  vsnprintf(h->err, sizeof(h->err), fmt, ap);
  va_end(ap);
}

const char *mpibind_errmsg(const mpibind_t *h)
{
  return h ? h->err : "invalid mpibind handle (NULL)";
}

const char *mpibind_version(void)
{
  return MPIBIND_VERSION_STRING;
}

/* The root object of a loaded topology records the runtime library's version;
 * hwloc_get_api_version() would only give the API level (2.8.0 for 2.9.0). */
const char *mpibind_hwloc_version(void)
{
  static char buf[32];
  if (buf[0] == '\0') {
    hwloc_topology_t topo;
    const char *v = NULL;
    snprintf(buf, sizeof(buf), "unknown");
    if (hwloc_topology_init(&topo) == 0) {
      if (hwloc_topology_set_synthetic(topo, "pu:1") == 0 && hwloc_topology_load(topo) == 0)
        v = hwloc_obj_get_info_by_name(hwloc_get_root_obj(topo), "hwlocVersion");
      if (v)
        snprintf(buf, sizeof(buf), "%s", v);
      hwloc_topology_destroy(topo);
    }
  }
  return buf;
}

int mpibind_init(mpibind_t **handle)
{
  if (handle == NULL)
    return 1;
  mpibind_t *h = calloc(1, sizeof(*h));
  *handle = h;
  if (h == NULL)
    return 1;
  h->greedy = 1;
  h->gpu_optim = 1;
  h->restrict_type = MPIBIND_RESTRICT_CPU;
  h->id_type = MPIBIND_ID_SMI;
  return 0;
}

/* Forget the results of a previous mpibind() call. */
static void free_results(mpibind_t *h)
{
  int i, v;
  for (v = 0; v < h->nvars; v++) {
    free(h->vars[v].name);
    for (i = 0; i < h->ntasks; i++)
      free(h->vars[v].values[i]);
    free(h->vars[v].values);
  }
  free(h->vars);
  free(h->var_names);
  h->vars = NULL;
  h->var_names = NULL;
  h->nvars = 0;
  if (h->mapped) {
    for (i = 0; i < h->ntasks; i++) {
      hwloc_bitmap_free(h->cpus[i]);
      hwloc_bitmap_free(h->gpus[i]);
      if (h->cpus_arr)
        free(h->cpus_arr[i]);
      if (h->gpu_strs)
        free(h->gpu_strs[i]);
    }
  }
  free(h->cpus);
  free(h->gpus);
  free(h->nthreads);
  free(h->cpus_arr);
  free(h->gpu_strs);
  free(h->numas);
  free(h->gpus_dev);
  h->cpus = h->gpus = NULL;
  h->nthreads = NULL;
  h->cpus_arr = NULL;
  h->gpu_strs = NULL;
  h->numas = NULL;
  h->gpus_dev = NULL;
  h->nnumas = h->ngpus = 0;
  h->mapped = 0;
}

int mpibind_finalize(mpibind_t *h)
{
  if (h == NULL)
    return 1;
  free_results(h);
  if (h->own_topo)
    hwloc_topology_destroy(h->own_topo);
  free(h->restrict_ids);
  free(h->gpus_allowed);
  free(h);
  return 0;
}

/* ---- inputs ---- */
#define CHECK_HANDLE(h) do { if ((h) == NULL) return 1; } while (0)

int mpibind_set_ntasks(mpibind_t *h, int ntasks)
{
  CHECK_HANDLE(h);
  if (ntasks < 1) {
    set_error(h, "ntasks must be >= 1 (got %d)", ntasks);
    return 1;
  }
  if (h->mapped)
    free_results(h);
  h->ntasks = ntasks;
  return 0;
}

int mpibind_set_nthreads(mpibind_t *h, int nthreads)
{
  CHECK_HANDLE(h);
  if (nthreads < 0) {
    set_error(h, "nthreads must be >= 0 (0 = automatic), got %d", nthreads);
    return 1;
  }
  h->nthreads_in = nthreads;
  return 0;
}

int mpibind_set_greedy(mpibind_t *h, int greedy)
{
  CHECK_HANDLE(h);
  if (greedy != 0 && greedy != 1) {
    set_error(h, "greedy must be 0 or 1, got %d", greedy);
    return 1;
  }
  h->greedy = greedy;
  return 0;
}

int mpibind_set_gpu_optim(mpibind_t *h, int gpu_optim)
{
  CHECK_HANDLE(h);
  if (gpu_optim != 0 && gpu_optim != 1) {
    set_error(h, "gpu_optim must be 0 or 1, got %d", gpu_optim);
    return 1;
  }
  h->gpu_optim = gpu_optim;
  return 0;
}

int mpibind_set_smt(mpibind_t *h, int smt)
{
  CHECK_HANDLE(h);
  if (smt < 0) {
    set_error(h, "smt must be >= 0 (0 = automatic), got %d", smt);
    return 1;
  }
  h->smt = smt;
  return 0;
}

static int replace_string(char **dst, const char *src)
{
  free(*dst);
  *dst = src ? strdup(src) : NULL;
  return (src && *dst == NULL) ? 1 : 0;
}

int mpibind_set_restrict_ids(mpibind_t *h, const char *ids)
{
  CHECK_HANDLE(h);
  return replace_string(&h->restrict_ids, ids);
}

int mpibind_set_restrict_type(mpibind_t *h, int type)
{
  CHECK_HANDLE(h);
  if (type != MPIBIND_RESTRICT_CPU && type != MPIBIND_RESTRICT_MEM) {
    set_error(h, "restrict type must be MPIBIND_RESTRICT_CPU or MPIBIND_RESTRICT_MEM");
    return 1;
  }
  h->restrict_type = type;
  return 0;
}

int mpibind_set_gpus_allowed(mpibind_t *h, const char *smi_ids)
{
  CHECK_HANDLE(h);
  if (smi_ids && mpibind_range_nints(smi_ids) < 0) {
    set_error(h, "malformed GPU id list '%s'", smi_ids);
    return 1;
  }
  return replace_string(&h->gpus_allowed, smi_ids);
}

int mpibind_set_topology(mpibind_t *h, hwloc_topology_t topo)
{
  CHECK_HANDLE(h);
  if (h->own_topo) {
    hwloc_topology_destroy(h->own_topo);
    h->own_topo = NULL;
  }
  h->user_topo = topo;
  return 0;
}

int mpibind_set_topology_file(mpibind_t *h, const char *xml_path)
{
  CHECK_HANDLE(h);
  hwloc_topology_t topo;
  if (xml_path == NULL) {
    set_error(h, "no topology file given");
    return 1;
  }
  if (mpibind_open_topology(&topo, xml_path, h->err, sizeof(h->err)) != 0)
    return 1;
  if (h->own_topo)
    hwloc_topology_destroy(h->own_topo);
  h->own_topo = topo;
  h->user_topo = NULL;
  return 0;
}

/* ---- mapping ---- */

/* Apply the user's CPU or NUMA restriction to a topology we own. */
static int apply_restriction(mpibind_t *h)
{
  int rc = 1;
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  int is_mem = h->restrict_type == MPIBIND_RESTRICT_MEM;
  const char *what = is_mem ? "NUMA nodes" : "CPUs";

  if (mpibind_range_nints(h->restrict_ids) <= 0 ||
      hwloc_bitmap_list_sscanf(set, h->restrict_ids) < 0 || hwloc_bitmap_iszero(set)) {
    set_error(h, "malformed restrict list '%s' (expected ids like 0-3,8)", h->restrict_ids);
    goto out;
  }
  hwloc_const_bitmap_t avail = is_mem ? hwloc_topology_get_topology_nodeset(h->topo)
                                      : hwloc_topology_get_topology_cpuset(h->topo);
  if (!hwloc_bitmap_intersects(set, avail)) {
    set_error(h, "restrict %s '%s' are not in this topology", what, h->restrict_ids);
    goto out;
  }
  unsigned long flags = is_mem ? (HWLOC_RESTRICT_FLAG_BYNODESET | HWLOC_RESTRICT_FLAG_REMOVE_MEMLESS)
                               : HWLOC_RESTRICT_FLAG_REMOVE_CPULESS;
  if (hwloc_topology_restrict(h->topo, set, flags) < 0) {
    set_error(h, "cannot restrict the topology to %s %s: %s", what, h->restrict_ids,
              strerror(errno));
    goto out;
  }
  rc = 0;
out:
  hwloc_bitmap_free(set);
  return rc;
}

/* Choose the topology to work on; a restriction needs a private copy. */
static int prepare_topology(mpibind_t *h)
{
  if (h->user_topo) {
    if (h->own_topo) {
      hwloc_topology_destroy(h->own_topo);
      h->own_topo = NULL;
    }
    if (h->restrict_ids) {
      if (hwloc_topology_dup(&h->own_topo, h->user_topo) < 0) {
        set_error(h, "cannot copy the topology: %s", strerror(errno));
        return 1;
      }
      h->topo = h->own_topo;
    } else {
      h->topo = h->user_topo;
    }
    return 0;
  }
  if (h->own_topo == NULL &&
      mpibind_open_topology(&h->own_topo, NULL, h->err, sizeof(h->err)) != 0)
    return 1;
  h->topo = h->own_topo;
  return 0;
}

int mpibind(mpibind_t *h)
{
  int i;
  CHECK_HANDLE(h);
  h->err[0] = '\0';
  free_results(h);
  if (h->ntasks < 1) {
    set_error(h, "ntasks must be set (>= 1) before mpibind()");
    return 1;
  }
  if (prepare_topology(h) != 0)
    return 1;

  h->hw_smt = topo_smt_level(h->topo);
  if (h->smt > h->hw_smt) {
    set_error(h, "smt %d exceeds the hardware SMT level of this topology (%d)", h->smt,
              h->hw_smt);
    return 1;
  }
  if (h->restrict_ids && apply_restriction(h) != 0)
    return 1;

  h->nnumas = topo_select_numas(h->topo, &h->numas);
  if (h->nnumas == 0) {
    set_error(h, "the topology has no NUMA domain with CPUs");
    return 1;
  }
  h->ngpus = topo_discover_gpus(h->topo, h->gpus_allowed, &h->gpus_dev);

  h->nthreads = calloc(h->ntasks, sizeof(int));
  h->cpus = calloc(h->ntasks, sizeof(hwloc_bitmap_t));
  h->gpus = calloc(h->ntasks, sizeof(hwloc_bitmap_t));
  for (i = 0; i < h->ntasks; i++) {
    h->cpus[i] = hwloc_bitmap_alloc();
    h->gpus[i] = hwloc_bitmap_alloc();
  }
  h->mapped = 1;

  h->greedy_path = h->greedy && h->ntasks < h->nnumas;
  if (h->greedy_path)
    map_greedy(h);
  else
    map_mem_hierarchy(h, h->gpu_optim && h->ngpus > 0);

  for (i = 0; i < h->ntasks; i++)
    if (hwloc_bitmap_iszero(h->cpus[i])) {
      set_error(h, "internal error: task %d got no CPUs", i);
      return 1;
    }
  return 0;
}

/* ---- getters ---- */
int mpibind_get_ntasks(const mpibind_t *h) { return h ? h->ntasks : -1; }
int mpibind_get_greedy(const mpibind_t *h) { return h ? h->greedy : -1; }
int mpibind_get_gpu_optim(const mpibind_t *h) { return h ? h->gpu_optim : -1; }
int mpibind_get_smt(const mpibind_t *h) { return h ? h->smt : -1; }
const char *mpibind_get_restrict_ids(const mpibind_t *h) { return h ? h->restrict_ids : NULL; }
int mpibind_get_restrict_type(const mpibind_t *h) { return h ? h->restrict_type : -1; }
hwloc_topology_t mpibind_get_topology(const mpibind_t *h) { return h ? h->topo : NULL; }
int mpibind_get_greedy_path(const mpibind_t *h) { return h && h->mapped ? h->greedy_path : -1; }
int mpibind_get_hw_smt(const mpibind_t *h) { return h && h->topo ? h->hw_smt : -1; }
int mpibind_get_num_gpus(const mpibind_t *h) { return h && h->mapped ? h->ngpus : -1; }
int mpibind_get_num_numas(const mpibind_t *h) { return h && h->mapped ? h->nnumas : -1; }
int *mpibind_get_nthreads(const mpibind_t *h) { return h && h->mapped ? h->nthreads : NULL; }
hwloc_bitmap_t *mpibind_get_cpus(const mpibind_t *h) { return h && h->mapped ? h->cpus : NULL; }
hwloc_bitmap_t *mpibind_get_gpus(const mpibind_t *h) { return h && h->mapped ? h->gpus : NULL; }

static int valid_task(const mpibind_t *h, int task)
{
  return h && h->mapped && task >= 0 && task < h->ntasks;
}

int *mpibind_get_cpus_ptask(mpibind_t *h, int task, int *ncpus)
{
  if (!valid_task(h, task))
    return NULL;
  if (h->cpus_arr == NULL)
    h->cpus_arr = calloc(h->ntasks, sizeof(int *));
  if (h->cpus_arr[task] == NULL) {
    int id, n = 0;
    h->cpus_arr[task] = malloc((hwloc_bitmap_weight(h->cpus[task]) + 1) * sizeof(int));
    hwloc_bitmap_foreach_begin(id, h->cpus[task]) {
      h->cpus_arr[task][n++] = id;
    } hwloc_bitmap_foreach_end();
  }
  if (ncpus)
    *ncpus = hwloc_bitmap_weight(h->cpus[task]);
  return h->cpus_arr[task];
}

int mpibind_cpus_ptask_snprint(char *buf, size_t size, const mpibind_t *h, int task)
{
  if (!valid_task(h, task))
    return -1;
  return hwloc_bitmap_list_snprintf(buf, size, h->cpus[task]);
}

const char *mpibind_get_gpu_id(const mpibind_t *h, int gpu, int id_type)
{
  if (h == NULL || !h->mapped || gpu < 0 || gpu >= h->ngpus)
    return NULL;
  const struct gpu *g = &h->gpus_dev[gpu];
  switch (id_type) {
  case MPIBIND_ID_UNIV: return g->uuid;
  case MPIBIND_ID_SMI: return g->smi_str;
  case MPIBIND_ID_PCIBUS: return g->pci;
  case MPIBIND_ID_NAME: return g->name;
  default: return NULL;
  }
}

int mpibind_set_gpu_ids(mpibind_t *h, int id_type)
{
  CHECK_HANDLE(h);
  if (id_type != MPIBIND_ID_UNIV && id_type != MPIBIND_ID_SMI &&
      id_type != MPIBIND_ID_PCIBUS && id_type != MPIBIND_ID_NAME) {
    set_error(h, "unknown GPU id type %d", id_type);
    return 1;
  }
  h->id_type = id_type;
  if (h->gpu_strs) { /* rebuilt lazily with the new type */
    int i;
    for (i = 0; i < h->ntasks; i++)
      free(h->gpu_strs[i]);
    free(h->gpu_strs);
    h->gpu_strs = NULL;
  }
  return 0;
}

char **mpibind_get_gpus_ptask(mpibind_t *h, int task, int *ngpus)
{
  if (!valid_task(h, task))
    return NULL;
  if (h->gpu_strs == NULL)
    h->gpu_strs = calloc(h->ntasks, sizeof(char **));
  if (h->gpu_strs[task] == NULL) {
    int id, n = 0;
    h->gpu_strs[task] = calloc(hwloc_bitmap_weight(h->gpus[task]) + 1, sizeof(char *));
    hwloc_bitmap_foreach_begin(id, h->gpus[task]) {
      h->gpu_strs[task][n++] = (char *)mpibind_get_gpu_id(h, id, h->id_type);
    } hwloc_bitmap_foreach_end();
  }
  if (ngpus)
    *ngpus = hwloc_bitmap_weight(h->gpus[task]);
  return h->gpu_strs[task];
}

/* ---- text output ---- */

/* snprintf-like append: keeps counting past the end of buf. */
static void append(char *buf, size_t size, size_t *len, const char *fmt, ...)
  __attribute__((format(printf, 4, 5)));
static void append(char *buf, size_t size, size_t *len, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(*len < size ? buf + *len : NULL, *len < size ? size - *len : 0, fmt, ap);
  va_end(ap);
  if (n > 0)
    *len += (size_t)n;
}

int mpibind_mapping_ptask_snprint(char *buf, size_t size, mpibind_t *h, int task)
{
  if (!valid_task(h, task))
    return -1;
  int i, ngpus = 0;
  size_t len = 0;
  char **gpus = mpibind_get_gpus_ptask(h, task, &ngpus);
  char *cpus = NULL;

  if (buf && size)
    buf[0] = '\0';
  append(buf, size, &len, "mpibind: task %3d nths %2d gpus ", task, h->nthreads[task]);
  for (i = 0; i < ngpus; i++)
    append(buf, size, &len, "%s%s", i ? "," : "", gpus[i]);
  hwloc_bitmap_list_asprintf(&cpus, h->cpus[task]);
  append(buf, size, &len, " cpus %s", cpus ? cpus : "");
  free(cpus);
  return (int)len;
}

int mpibind_mapping_snprint(char *buf, size_t size, mpibind_t *h)
{
  if (h == NULL || !h->mapped)
    return -1;
  int t;
  size_t len = 0;
  if (buf && size)
    buf[0] = '\0';
  for (t = 0; t < h->ntasks; t++) {
    int n = mpibind_mapping_ptask_snprint(len < size ? buf + len : NULL,
                                          len < size ? size - len : 0, h, t);
    len += (size_t)n;
    append(buf, size, &len, "\n");
  }
  return (int)len;
}

void mpibind_mapping_print(mpibind_t *h)
{
  int n = mpibind_mapping_snprint(NULL, 0, h);
  if (n < 0)
    return;
  char *buf = malloc((size_t)n + 1);
  mpibind_mapping_snprint(buf, (size_t)n + 1, h);
  fputs(buf, stdout);
  free(buf);
}

/* ---- environment variables ---- */

/* Each GPU runtime reads its own variable and only its vendor's devices belong in
 * it: on a node mixing vendors every variable lists that vendor's ids alone. */
static const struct { unsigned vendor; const char *name; } gpu_env_vars[] = {
  {0x10de, "CUDA_VISIBLE_DEVICES"},
  {0x1002, "ROCR_VISIBLE_DEVICES"},
  {0x8086, "ZE_AFFINITY_MASK"},
};
#define N_GPU_ENV_VARS ((int)(sizeof(gpu_env_vars) / sizeof(gpu_env_vars[0])))

static int node_has_vendor(const mpibind_t *h, unsigned vendor)
{
  int i;
  for (i = 0; i < h->ngpus; i++)
    if (h->gpus_dev[i].vendor_id == vendor)
      return 1;
  return 0;
}

/* The task's GPUs of one vendor as exported (SMI) ids, comma-joined, each id once. */
static char *gpu_env_value(const mpibind_t *h, int task, unsigned vendor)
{
  int id;
  size_t len = 0, size = 16 * (hwloc_bitmap_weight(h->gpus[task]) + 1);
  char *value = malloc(size);
  hwloc_bitmap_t seen = hwloc_bitmap_alloc();
  value[0] = '\0';
  hwloc_bitmap_foreach_begin(id, h->gpus[task]) {
    const struct gpu *g = &h->gpus_dev[id];
    if (g->vendor_id != vendor || g->smi < 0 || hwloc_bitmap_isset(seen, (unsigned)g->smi))
      continue;
    hwloc_bitmap_set(seen, (unsigned)g->smi);
    append(value, size, &len, "%s%d", len ? "," : "", g->smi);
  } hwloc_bitmap_foreach_end();
  hwloc_bitmap_free(seen);
  return value;
}

int mpibind_set_env_vars(mpibind_t *h)
{
  CHECK_HANDLE(h);
  if (!h->mapped) {
    set_error(h, "mpibind_set_env_vars() needs a successful mpibind() first");
    return 1;
  }
  const char *names[3 + N_GPU_ENV_VARS] = {"OMP_NUM_THREADS", "OMP_PLACES", "OMP_PROC_BIND"};
  unsigned vendors[3 + N_GPU_ENV_VARS] = {0};
  int v, t, nvars = 3;

  for (v = 0; v < N_GPU_ENV_VARS; v++)
    if (node_has_vendor(h, gpu_env_vars[v].vendor)) {
      vendors[nvars] = gpu_env_vars[v].vendor;
      names[nvars++] = gpu_env_vars[v].name;
    }

  for (v = 0; v < h->nvars; v++) {
    free(h->vars[v].name);
    for (t = 0; t < h->ntasks; t++)
      free(h->vars[v].values[t]);
    free(h->vars[v].values);
  }
  free(h->vars);
  free(h->var_names);

  h->nvars = nvars;
  h->vars = calloc(nvars, sizeof(struct env_var));
  h->var_names = calloc(nvars + 1, sizeof(char *));
  for (v = 0; v < nvars; v++) {
    h->vars[v].name = strdup(names[v]);
    h->var_names[v] = h->vars[v].name;
    h->vars[v].values = calloc(h->ntasks, sizeof(char *));
    for (t = 0; t < h->ntasks; t++) {
      char *value = NULL;
      if (v == 0) {
        char num[16];
        snprintf(num, sizeof(num), "%d", h->nthreads[t]);
        value = strdup(num);
      } else if (v == 1) {
        value = strdup("threads");
      } else if (v == 2) {
        value = strdup("spread");
      } else {
        /* Always the exported (SMI) ids, whatever mpibind_set_gpu_ids chose. */
        value = gpu_env_value(h, t, vendors[v]);
      }
      h->vars[v].values[t] = value;
    }
  }
  return 0;
}

char **mpibind_get_env_var_names(mpibind_t *h, int *count)
{
  if (count)
    *count = h ? h->nvars : 0;
  return h ? h->var_names : NULL;
}

char **mpibind_get_env_var_values(mpibind_t *h, const char *name)
{
  int v;
  if (h == NULL || name == NULL)
    return NULL;
  for (v = 0; v < h->nvars; v++)
    if (strcmp(h->vars[v].name, name) == 0)
      return h->vars[v].values;
  return NULL;
}

void mpibind_env_vars_print(mpibind_t *h)
{
  int v, t;
  if (h == NULL)
    return;
  for (v = 0; v < h->nvars; v++) {
    printf("%s:\n", h->vars[v].name);
    for (t = 0; t < h->ntasks; t++)
      printf("  [%d]: %s\n", t, h->vars[v].values[t]);
  }
}

int mpibind_apply(mpibind_t *h, int task)
{
  CHECK_HANDLE(h);
  if (!valid_task(h, task)) {
    set_error(h, "no mapping for task %d", task);
    return 1;
  }
  if (hwloc_set_cpubind(h->topo, h->cpus[task], 0) < 0) {
    char *s = NULL;
    hwloc_bitmap_list_asprintf(&s, h->cpus[task]);
    set_error(h, "cannot bind task %d to CPUs %s: %s", task, s ? s : "?", strerror(errno));
    free(s);
    return 1;
  }
  return 0;
}
