/* GPUs found from PCI alone (hwloc without NVML/RSMI) on hand-made topologies of
 * mixed nodes (tests/data/pci-*.xml): only compute devices count, never the
 * server's VGA/BMC chip, and each vendor's ids go to that vendor's variable only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mpibind.h"

static int failures, checks;

#define CHECK(cond, ...)                                              \
  do {                                                                \
    checks++;                                                         \
    if (!(cond)) {                                                    \
      failures++;                                                     \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                   \
      fputc('\n', stderr);                                            \
    }                                                                 \
  } while (0)

struct node_case {
  const char *file;
  int ngpus;
  const char *pci_ids;     /* every GPU's PCI bus id, bus order, space-joined */
  const char *cuda, *rocr; /* one task's variables; NULL: must not be set */
};

static const struct node_case cases[] = {
  {"pci-4nvidia-aspeed.xml", 4,
   "0000:17:00.0 0000:3d:00.0 0000:63:00.0 0000:89:00.0", "0,1,2,3", NULL},
  {"pci-2amd-matrox.xml", 2, "0000:c1:00.0 0000:c6:00.0", NULL, "0,1"},
  {"pci-nvidia-amdvga.xml", 2, "0000:21:00.0 0000:81:00.0", "0,1", NULL},
  {"pci-nvidia-vga-beside-compute.xml", 2, "0000:21:00.0 0000:81:00.0", "0,1", NULL},
  {"pci-workstation-nvidia.xml", 1, "0000:01:00.0", "0", NULL},
  {"pci-mixed-nvidia-amd.xml", 4,
   "0000:10:00.0 0000:20:00.0 0000:30:00.0 0000:40:00.0", "0,1", "0,1"},
};

static mpibind_t *mapped(hwloc_topology_t t, int ntasks)
{
  mpibind_t *h;
  mpibind_init(&h);
  mpibind_set_topology(h, t);
  mpibind_set_ntasks(h, ntasks);
  if (mpibind(h) != 0 || mpibind_set_env_vars(h) != 0) {
    fprintf(stderr, "mpibind failed: %s\n", mpibind_errmsg(h));
    exit(2);
  }
  return h;
}

static const char *var_of(mpibind_t *h, const char *name, int task)
{
  char **values = mpibind_get_env_var_values(h, name);
  return values ? values[task] : NULL;
}

static int same(const char *a, const char *b)
{
  return (a == NULL && b == NULL) || (a && b && strcmp(a, b) == 0);
}

/* One task: it has every GPU, so its variables list the node's ids per vendor. */
static void check_one_task(const struct node_case *c, hwloc_topology_t t)
{
  char got[512] = "";
  int i, n = 0;
  mpibind_t *h = mapped(t, 1);
  CHECK(mpibind_get_num_gpus(h) == c->ngpus, "%s: %d GPUs, expected %d", c->file,
        mpibind_get_num_gpus(h), c->ngpus);
  mpibind_set_gpu_ids(h, MPIBIND_ID_PCIBUS);
  char **ids = mpibind_get_gpus_ptask(h, 0, &n);
  for (i = 0; i < n; i++)
    snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%s", i ? " " : "", ids[i]);
  CHECK(strcmp(got, c->pci_ids) == 0, "%s: GPUs [%s], expected [%s]", c->file, got, c->pci_ids);
  CHECK(same(var_of(h, "CUDA_VISIBLE_DEVICES", 0), c->cuda), "%s: CUDA_VISIBLE_DEVICES=%s, expected %s",
        c->file, var_of(h, "CUDA_VISIBLE_DEVICES", 0), c->cuda ? c->cuda : "(unset)");
  CHECK(same(var_of(h, "ROCR_VISIBLE_DEVICES", 0), c->rocr), "%s: ROCR_VISIBLE_DEVICES=%s, expected %s",
        c->file, var_of(h, "ROCR_VISIBLE_DEVICES", 0), c->rocr ? c->rocr : "(unset)");
  CHECK(var_of(h, "ZE_AFFINITY_MASK", 0) == NULL, "%s: ZE_AFFINITY_MASK set", c->file);
  mpibind_finalize(h);
}

/* One task per GPU: together the tasks name each vendor's ids once each. */
static void check_task_per_gpu(const struct node_case *c, hwloc_topology_t t)
{
  const char *vars[] = {"CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"};
  const char *want[] = {c->cuda, c->rocr};
  int v, task;
  mpibind_t *h = mapped(t, c->ngpus);
  for (v = 0; v < 2; v++) {
    char joined[256] = "";
    if (want[v] == NULL)
      continue;
    for (task = 0; task < c->ngpus; task++) {
      const char *value = var_of(h, vars[v], task);
      if (value && value[0])
        snprintf(joined + strlen(joined), sizeof(joined) - strlen(joined), "%s%s",
                 joined[0] ? "," : "", value);
    }
    CHECK(strcmp(joined, want[v]) == 0, "%s, %d tasks: %s over tasks %s, expected %s", c->file,
          c->ngpus, vars[v], joined, want[v]);
  }
  mpibind_finalize(h);
}

int main(int argc, char **argv)
{
  char path[1024], err[256];
  size_t k;
  if (argc != 2) {
    fprintf(stderr, "usage: %s DATA_DIR\n", argv[0]);
    return 2;
  }
  for (k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
    hwloc_topology_t t;
    snprintf(path, sizeof(path), "%s/%s", argv[1], cases[k].file);
    if (mpibind_open_topology(&t, path, err, sizeof(err)) != 0) {
      fprintf(stderr, "%s\n", err);
      return 2;
    }
    check_one_task(&cases[k], t);
    check_task_per_gpu(&cases[k], t);
    mpibind_close_topology(t);
  }
  printf("pci_fallback: %d checks, %d failures\n", checks, failures);
  return failures ? 1 : 0;
}
