/*
 * mpibind: memory-driven mapping of tasks, threads and GPUs to hardware.
 *
 * A reimplementation of the algorithm of LLNL mpibind (see README.md and
 * COMPATIBILITY.md). Typical use:
 *
 *   mpibind_t *h;
 *   mpibind_init(&h);
 *   mpibind_set_topology_file(h, "node.xml");   // or nothing: this machine
 *   mpibind_set_ntasks(h, 4);
 *   if (mpibind(h) != 0) fprintf(stderr, "%s\n", mpibind_errmsg(h));
 *   mpibind_mapping_print(h);
 *   mpibind_finalize(h);
 *
 * Functions returning int return 0 on success and non-zero on error unless
 * documented otherwise; mpibind_errmsg() then says why.
 */
#ifndef MPIBIND_H
#define MPIBIND_H

#include <stddef.h>
#include <hwloc.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library is built with hidden visibility: only what this header declares is exported. */
#pragma GCC visibility push(default)

#define MPIBIND_VERSION_STRING "1.0.0"

/* One enum, in the reference implementation's order, so numeric values match. */
enum {
  MPIBIND_RESTRICT_CPU = 0, /* restrict ids are OS CPU (PU) ids */
  MPIBIND_RESTRICT_MEM,     /* restrict ids are NUMA node OS ids */
  MPIBIND_ID_UNIV,          /* GPU UUID (empty string when unknown) */
  MPIBIND_ID_SMI,           /* id exported in *_VISIBLE_DEVICES (nvml3 -> "3") */
  MPIBIND_ID_PCIBUS,        /* PCI bus id, e.g. "0000:04:00.0" */
  MPIBIND_ID_NAME           /* hwloc OS device name, e.g. "rsmi2" */
};

typedef struct mpibind mpibind_t;

/* ---- lifecycle ---- */
int mpibind_init(mpibind_t **handle);
int mpibind_finalize(mpibind_t *handle);
/* Last error message of this handle ("" when none). Never NULL. */
const char *mpibind_errmsg(const mpibind_t *handle);

/* ---- topology ----
 * mpibind_load_topology(): the way mpibind wants a topology loaded: IS_THISSYSTEM,
 * every type KEEP_STRUCTURE, PCI and OS devices KEEP_IMPORTANT. Call after
 * hwloc_topology_init() (and hwloc_topology_set_xml() if wanted).
 * mpibind_open_topology(): init + optional XML + load; xml_path NULL = this machine.
 * mpibind_open_topology_flags(): the same with hwloc topology flags added, e.g.
 * HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED for the whole node whatever cpuset the caller
 * runs in (the Slurm plugin: Slurm numbers a step's cores over the whole node).
 * Writes an explanation to err (may be NULL) on failure. */
int mpibind_load_topology(hwloc_topology_t topo);
int mpibind_open_topology(hwloc_topology_t *topo, const char *xml_path,
                          char *err, size_t errlen);
int mpibind_open_topology_flags(hwloc_topology_t *topo, const char *xml_path,
                                unsigned long flags, char *err, size_t errlen);
void mpibind_close_topology(hwloc_topology_t topo);

/* ---- inputs (before mpibind()) ---- */
int mpibind_set_ntasks(mpibind_t *h, int ntasks);        /* required, >= 1 */
int mpibind_set_nthreads(mpibind_t *h, int nthreads);    /* 0 = automatic (default) */
int mpibind_set_greedy(mpibind_t *h, int greedy);        /* 0|1, default 1 */
int mpibind_set_gpu_optim(mpibind_t *h, int gpu_optim);  /* 0|1, default 1 */
int mpibind_set_smt(mpibind_t *h, int smt);              /* 0 = automatic (default), 1..hw SMT */
int mpibind_set_restrict_ids(mpibind_t *h, const char *ids); /* hwloc list, e.g. "0-3,8" */
int mpibind_set_restrict_type(mpibind_t *h, int type);   /* MPIBIND_RESTRICT_CPU (default) or _MEM */
/* Only GPUs whose SMI id is in this list are used (e.g. Slurm's allocated GPUs). */
int mpibind_set_gpus_allowed(mpibind_t *h, const char *smi_ids);
/* Caller-owned topology (loaded with mpibind_load_topology). It is never modified:
 * a restriction works on a private copy. */
int mpibind_set_topology(mpibind_t *h, hwloc_topology_t topo);
/* Load an hwloc XML file into a handle-owned topology. */
int mpibind_set_topology_file(mpibind_t *h, const char *xml_path);

/* ---- compute the mapping ---- */
int mpibind(mpibind_t *h);

/* ---- results (after mpibind()) ---- */
int mpibind_get_ntasks(const mpibind_t *h);
int mpibind_get_greedy(const mpibind_t *h);
int mpibind_get_gpu_optim(const mpibind_t *h);
int mpibind_get_smt(const mpibind_t *h);
const char *mpibind_get_restrict_ids(const mpibind_t *h);
int mpibind_get_restrict_type(const mpibind_t *h);
/* The topology the mapping was computed on (restricted if asked); owned by the handle
 * unless it is the caller's own. */
hwloc_topology_t mpibind_get_topology(const mpibind_t *h);
/* 1 if the greedy path was taken, 0 for the memory-hierarchy path. */
int mpibind_get_greedy_path(const mpibind_t *h);
/* Hardware SMT level (PUs per core) of the topology. */
int mpibind_get_hw_smt(const mpibind_t *h);
int mpibind_get_num_gpus(const mpibind_t *h);
/* Number of NUMA domains the mapping used (after dropping CPU-less and overlapping ones). */
int mpibind_get_num_numas(const mpibind_t *h);

int *mpibind_get_nthreads(const mpibind_t *h);          /* ntasks entries */
hwloc_bitmap_t *mpibind_get_cpus(const mpibind_t *h);   /* ntasks cpusets (OS PU ids) */
hwloc_bitmap_t *mpibind_get_gpus(const mpibind_t *h);   /* ntasks sets of internal GPU indexes */
/* OS PU ids of one task; *ncpus gets the count. The array is owned by the handle. */
int *mpibind_get_cpus_ptask(mpibind_t *h, int task, int *ncpus);
/* hwloc list string of one task's cpuset ("0-4,36-40"); returns snprintf-style length. */
int mpibind_cpus_ptask_snprint(char *buf, size_t size, const mpibind_t *h, int task);
/* Type of GPU ids returned by mpibind_get_gpus_ptask/printed by mapping_*; default SMI. */
int mpibind_set_gpu_ids(mpibind_t *h, int id_type);
/* GPU ids of one task as strings; *ngpus gets the count. Owned by the handle. */
char **mpibind_get_gpus_ptask(mpibind_t *h, int task, int *ngpus);
/* One GPU's id of any type, by internal index (0..num_gpus-1). */
const char *mpibind_get_gpu_id(const mpibind_t *h, int gpu, int id_type);

/* "mpibind: task   0 nths  2 gpus 0 cpus 0-4,36-40" lines. */
int mpibind_mapping_ptask_snprint(char *buf, size_t size, mpibind_t *h, int task);
int mpibind_mapping_snprint(char *buf, size_t size, mpibind_t *h);
void mpibind_mapping_print(mpibind_t *h);

/* ---- environment variables per task ----
 * OMP_NUM_THREADS, OMP_PLACES=threads, OMP_PROC_BIND=spread and, when the node
 * has GPUs, CUDA_VISIBLE_DEVICES (NVIDIA), ROCR_VISIBLE_DEVICES (AMD) or
 * ZE_AFFINITY_MASK (Intel Level Zero). */
int mpibind_set_env_vars(mpibind_t *h);
char **mpibind_get_env_var_names(mpibind_t *h, int *count);
char **mpibind_get_env_var_values(mpibind_t *h, const char *name); /* ntasks entries */
void mpibind_env_vars_print(mpibind_t *h);

/* ---- apply: bind the calling process to a task's cpuset ---- */
int mpibind_apply(mpibind_t *h, int task);

/* ---- utilities ---- */
int mpibind_get_core_depth(hwloc_topology_t topo);
/* Number of integers in an hwloc list string ("0-3,8" -> 5), -1 if malformed. */
int mpibind_range_nints(const char *list);
/* Set of PUs of logical cores listed in cores (Slurm's abstract core ids). */
int mpibind_cores_to_pus(hwloc_topology_t topo, const char *cores, hwloc_bitmap_t pus);
/* A restrict value is either an id list or the path of a file that holds one.
 * Writes the list to out. */
int mpibind_parse_restrict_ids(const char *value, char *out, size_t size,
                               char *err, size_t errlen);
/* "cpu" or "mem" -> MPIBIND_RESTRICT_*, -1 otherwise. */
int mpibind_parse_restrict_type(const char *value);
const char *mpibind_version(void);
/* Version of the hwloc library actually loaded (not the API it was built with). */
const char *mpibind_hwloc_version(void);

/* ---- options of the Slurm plugin (--mpibind=...) and other front ends ---- */
struct mpibind_options {
  int enable;    /* -1 unset, 0 off, 1 on */
  int verbose;   /* 0 none, 1 node 0 prints, 2 every node prints */
  int debug;
  int gpu_optim; /* -1 unset */
  int greedy;    /* -1 unset */
  int smt;       /* 0 unset */
  int help;
};
void mpibind_options_init(struct mpibind_options *o);
/* Comma-separated list: on, off, v, v:2, verbose[:N], gpu[:0|1], greedy[:0|1], smt:K,
 * debug, help. Unknown or malformed items are an error (message in err). */
int mpibind_parse_options(const char *list, struct mpibind_options *o,
                          char *err, size_t errlen);
const char *mpibind_options_usage(void);
/* The plugin's ON/OFF decision: the user's on/off wins; else off with default_off;
 * else on with exclusive_only_off; else on only for node-exclusive steps. */
int mpibind_decide_enabled(int user_enable, int default_off, int exclusive_only_off,
                           int exclusive);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif /* MPIBIND_H */
