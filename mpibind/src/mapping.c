/* The mapping algorithm: greedy path and memory-hierarchy path. */
#include <stdlib.h>
#include <string.h>
#include "internal.h"

/* Split n items into parts: the first n % parts get one more. */
static void split_evenly(int n, int parts, int *out)
{
  int i;
  for (i = 0; i < parts; i++)
    out[i] = n / parts + (i < n % parts ? 1 : 0);
}

/* Put the elements into buckets in contiguous blocks. With fewer elements than
 * buckets, consecutive buckets share an element. */
static void fill_buckets(const int *elems, int nelems, hwloc_bitmap_t *buckets, int nbuckets)
{
  int i, k = 0, used = 0;
  if (nelems <= 0 || nbuckets <= 0)
    return;
  if (nelems >= nbuckets) {
    int *per_bucket = malloc(nbuckets * sizeof(int));
    split_evenly(nelems, nbuckets, per_bucket);
    for (i = 0; i < nelems; i++) {
      hwloc_bitmap_set(buckets[k], (unsigned)elems[i]);
      if (++used == per_bucket[k]) {
        used = 0;
        k++;
      }
    }
    free(per_bucket);
  } else {
    int *per_elem = malloc(nelems * sizeof(int));
    split_evenly(nbuckets, nelems, per_elem);
    for (i = 0; i < nbuckets; i++) {
      hwloc_bitmap_set(buckets[i], (unsigned)elems[k]);
      if (++used == per_elem[k]) {
        used = 0;
        k++;
      }
    }
    free(per_elem);
  }
}

static int bitmap_to_array(hwloc_const_bitmap_t set, int *out)
{
  int id, n = 0;
  hwloc_bitmap_foreach_begin(id, set) {
    out[n++] = id;
  } hwloc_bitmap_foreach_end();
  return n;
}

/* The first k PUs (by OS index) of an object's cpuset. */
static void first_pus(hwloc_const_bitmap_t cpuset, int k, hwloc_bitmap_t out)
{
  int id = -1;
  hwloc_bitmap_zero(out);
  while (k-- > 0 && (id = hwloc_bitmap_next(cpuset, id)) >= 0)
    hwloc_bitmap_set(out, (unsigned)id);
}

/* Give nobjs objects (their chosen PUs in pus[]) to ntasks tasks. Objects go in
 * contiguous blocks; with more tasks than objects, the tasks of one object split
 * its PUs and share them when there are too few. */
static void assign_pus(hwloc_bitmap_t *pus, int nobjs, hwloc_bitmap_t *cpus, int ntasks)
{
  int i, t = 0;
  if (nobjs < ntasks) {
    int *tasks_per_obj = malloc(nobjs * sizeof(int));
    int maxw = 1;
    for (i = 0; i < nobjs; i++)
      if (hwloc_bitmap_weight(pus[i]) > maxw)
        maxw = hwloc_bitmap_weight(pus[i]);
    int *ids = malloc(maxw * sizeof(int));
    split_evenly(ntasks, nobjs, tasks_per_obj);
    for (i = 0; i < nobjs; i++) {
      int n = bitmap_to_array(pus[i], ids);
      fill_buckets(ids, n, cpus + t, tasks_per_obj[i]);
      t += tasks_per_obj[i];
    }
    free(ids);
    free(tasks_per_obj);
  } else {
    int *objs_per_task = malloc(ntasks * sizeof(int));
    int obj = 0;
    split_evenly(nobjs, ntasks, objs_per_task);
    for (t = 0; t < ntasks; t++)
      for (i = 0; i < objs_per_task[t]; i++, obj++)
        hwloc_bitmap_or(cpus[t], cpus[t], pus[obj]);
    free(objs_per_task);
  }
}

/* Match ntasks x nthreads workers to the CPUs below root: walk down from root to
 * the first level with at least as many objects as workers (the core level at the
 * latest, and always the core level when the user gave an SMT level), then take
 * one PU per object above the core level, or enough PUs per core at it. */
static void cpu_match(mpibind_t *h, hwloc_obj_t root, int ntasks, int *nthreads,
                      hwloc_bitmap_t *cpus)
{
  hwloc_topology_t topo = h->topo;
  int hw_smt = topo_smt_level(topo);
  int usr_smt = h->smt;
  int core_depth = mpibind_get_core_depth(topo);
  int pu_depth = hwloc_get_type_depth(topo, HWLOC_OBJ_PU);
  int depth, i;

  if (*nthreads <= 0) {
    /* Default: one thread per core, per SMT-k thread, or per PU. */
    int intermediate_smt = (usr_smt > 1 && usr_smt < hw_smt) ? usr_smt : 0;
    depth = usr_smt < hw_smt ? core_depth : pu_depth;
    int n = hwloc_get_nbobjs_inside_cpuset_by_depth(topo, root->cpuset, depth);
    if (intermediate_smt)
      n *= intermediate_smt;
    *nthreads = n >= ntasks ? n / ntasks : 1;
  }
  int workers = *nthreads * ntasks;

  int match_depth = -1, pus_per_obj = 1, nobjs = 0;
  for (depth = (int)root->depth; depth <= core_depth; depth++) {
    if (usr_smt && depth != core_depth)
      continue;
    nobjs = hwloc_get_nbobjs_inside_cpuset_by_depth(topo, root->cpuset, depth);
    if (nobjs >= workers || depth == core_depth) {
      match_depth = depth;
      if (usr_smt)
        pus_per_obj = usr_smt;
      else if (depth == core_depth)
        for (pus_per_obj = 1; pus_per_obj < hw_smt && nobjs * pus_per_obj < workers;)
          pus_per_obj++;
      break;
    }
  }
  if (match_depth < 0 || nobjs <= 0) {
    /* Odd topology (memory attached below the cores): fall back to PUs. */
    match_depth = pu_depth;
    pus_per_obj = 1;
    nobjs = hwloc_get_nbobjs_inside_cpuset_by_depth(topo, root->cpuset, pu_depth);
    if (nobjs <= 0)
      return;
  }

  hwloc_bitmap_t *pus = malloc(nobjs * sizeof(*pus));
  hwloc_obj_t obj = NULL;
  for (i = 0; i < nobjs; i++) {
    obj = hwloc_get_next_obj_inside_cpuset_by_depth(topo, root->cpuset, match_depth, obj);
    pus[i] = hwloc_bitmap_alloc();
    first_pus(obj->cpuset, pus_per_obj, pus[i]);
  }
  assign_pus(pus, nobjs, cpus, ntasks);
  for (i = 0; i < nobjs; i++)
    hwloc_bitmap_free(pus[i]);
  free(pus);
}

/* GPUs local to root (their non-I/O ancestor lies inside root). */
static int gpus_below(mpibind_t *h, hwloc_obj_t root, int *ids)
{
  int i, n = 0;
  for (i = 0; i < h->ngpus; i++) {
    hwloc_obj_t anc = h->gpus_dev[i].ancestor;
    if (anc && anc->cpuset && root->cpuset && hwloc_bitmap_isincluded(anc->cpuset, root->cpuset))
      ids[n++] = i;
  }
  return n;
}

static void gpu_match(mpibind_t *h, hwloc_obj_t root, int ntasks, hwloc_bitmap_t *gpus)
{
  int *ids = malloc((h->ngpus + 1) * sizeof(int));
  int n = gpus_below(h, root, ids);
  fill_buckets(ids, n, gpus, ntasks);
  free(ids);
}

/* Fewer tasks than NUMA domains: each task gets whole NUMA domains (all PUs of
 * their parent objects) and their GPUs, in contiguous blocks. */
void map_greedy(mpibind_t *h)
{
  int i, t = 0, used = 0;
  int *numas_per_task = malloc(h->ntasks * sizeof(int));
  int *ids = malloc((h->ngpus + 1) * sizeof(int));

  split_evenly(h->nnumas, h->ntasks, numas_per_task);
  for (i = 0; i < h->nnumas; i++) {
    hwloc_obj_t root = h->numas[i]->parent;
    hwloc_bitmap_or(h->cpus[t], h->cpus[t], root->cpuset);
    int k, n = gpus_below(h, root, ids);
    for (k = 0; k < n; k++)
      hwloc_bitmap_set(h->gpus[t], (unsigned)ids[k]);
    if (++used == numas_per_task[t]) {
      used = 0;
      t++;
    }
  }
  for (t = 0; t < h->ntasks; t++)
    h->nthreads[t] = h->nthreads_in > 0 ? h->nthreads_in : hwloc_bitmap_weight(h->cpus[t]);
  free(ids);
  free(numas_per_task);
}

/* Tasks per NUMA domain in proportion to its compute units (GPUs or PUs): the
 * floor first, then one more to the domains with the largest remainders (ties go
 * to the lower domain). */
static void tasks_per_numa(int ntasks, int nnumas, const int *units, int *out)
{
  int i, j, total = 0, assigned = 0;
  int *rem = malloc(nnumas * sizeof(int));
  int *order = malloc(nnumas * sizeof(int));

  for (i = 0; i < nnumas; i++)
    total += units[i];
  for (i = 0; i < nnumas; i++) {
    long long num = (long long)ntasks * units[i];
    out[i] = (int)(num / total);
    rem[i] = (int)(num % total);
    assigned += out[i];
  }
  /* Stable insertion sort of indexes by descending remainder. */
  for (i = 0; i < nnumas; i++) {
    for (j = i; j > 0 && rem[order[j - 1]] < rem[i]; j--)
      order[j] = order[j - 1];
    order[j] = i;
  }
  for (i = 0; i < ntasks - assigned && i < nnumas; i++)
    out[order[i]]++;
  free(order);
  free(rem);
}

void map_mem_hierarchy(mpibind_t *h, int gpu_optim)
{
  int i, j, offset = 0, total = 0;
  int *units = calloc(h->nnumas, sizeof(int));
  int *ntasks = calloc(h->nnumas, sizeof(int));

  for (i = 0; i < h->nnumas; i++) {
    hwloc_obj_t numa = h->numas[i];
    if (gpu_optim) {
      for (j = 0; j < h->ngpus; j++) {
        hwloc_obj_t anc = h->gpus_dev[j].ancestor;
        if (anc && anc->nodeset && hwloc_bitmap_isset(anc->nodeset, numa->os_index))
          units[i]++;
      }
    } else {
      units[i] = hwloc_bitmap_weight(numa->cpuset);
    }
    total += units[i];
  }
  if (total == 0) /* GPUs local to no usable domain: balance on PUs instead */
    for (i = 0; i < h->nnumas; i++)
      units[i] = hwloc_bitmap_weight(h->numas[i]->cpuset);
  tasks_per_numa(h->ntasks, h->nnumas, units, ntasks);

  for (i = 0; i < h->nnumas; i++) {
    int np = ntasks[i], nt = h->nthreads_in;
    if (np == 0)
      continue;
    hwloc_obj_t root = h->numas[i]->parent;
    cpu_match(h, root, np, &nt, h->cpus + offset);
    for (j = 0; j < np; j++)
      h->nthreads[offset + j] = nt;
    gpu_match(h, root, np, h->gpus + offset);
    offset += np;
  }
  free(ntasks);
  free(units);
}
