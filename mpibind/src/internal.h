/* Private declarations shared by the library's source files. */
#ifndef MPIBIND_INTERNAL_H
#define MPIBIND_INTERNAL_H

#include <stdarg.h>
#include "mpibind.h"

#define MPIBIND_ERRLEN 512
#define MPIBIND_IDLEN 64

struct gpu {
  hwloc_obj_t ancestor;        /* first non-I/O ancestor: where the GPU is local */
  int smi;                     /* number in the OS device name: exported id */
  unsigned vendor_id;          /* PCI vendor: 0x10de NVIDIA, 0x1002 AMD, 0x8086 Intel */
  char name[MPIBIND_IDLEN];
  char pci[MPIBIND_IDLEN];
  char uuid[MPIBIND_IDLEN];
  char smi_str[16];
};

struct env_var {
  char *name;
  char **values; /* ntasks */
};

struct mpibind {
  /* inputs */
  int ntasks, nthreads_in, greedy, gpu_optim, smt, restrict_type;
  char *restrict_ids;
  char *gpus_allowed;
  hwloc_topology_t user_topo;  /* caller's, never modified */
  hwloc_topology_t own_topo;   /* loaded or copied by us, destroyed at finalize */
  hwloc_topology_t topo;       /* the one used: user_topo or own_topo */

  /* topology facts */
  int hw_smt;
  int nnumas;
  hwloc_obj_t *numas;          /* usable NUMA domains in logical order */
  int ngpus;
  struct gpu *gpus_dev;

  /* results */
  int mapped, greedy_path;
  int *nthreads;
  hwloc_bitmap_t *cpus;
  hwloc_bitmap_t *gpus;
  int **cpus_arr;              /* lazily built per task */
  int id_type;
  char ***gpu_strs;            /* per task, per GPU: pointers into gpus_dev */
  int nvars;
  struct env_var *vars;
  char **var_names;

  char err[MPIBIND_ERRLEN];
};

void set_error(mpibind_t *h, const char *fmt, ...)
  __attribute__((format(printf, 2, 3)));

/* topology.c */
int topo_smt_level(hwloc_topology_t topo);
int topo_select_numas(hwloc_topology_t topo, hwloc_obj_t **numas);
int topo_discover_gpus(hwloc_topology_t topo, const char *allowed, struct gpu **gpus);

/* mapping.c */
void map_greedy(mpibind_t *h);
void map_mem_hierarchy(mpibind_t *h, int gpu_optim);

#endif
