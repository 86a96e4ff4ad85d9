/* Loading a topology and reading the facts mpibind needs from it:
 * SMT level, usable NUMA domains and GPUs. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "internal.h"

int mpibind_load_topology(hwloc_topology_t topo)
{
  if (topo == NULL)
    return -1;
  /* Bindings must reach the OS even when the topology comes from XML; flags the
   * caller set before (INCLUDE_DISALLOWED: mpibind_open_topology_flags) are kept. */
  hwloc_topology_set_flags(topo, hwloc_topology_get_flags(topo) | HWLOC_TOPOLOGY_FLAG_IS_THISSYSTEM);
  /* Structure only (this may merge Core into PU when SMT is off: we always
   * look for "Core or below"), plus PCI and OS devices to locate GPUs. */
  if (hwloc_topology_set_all_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_STRUCTURE) < 0 ||
      hwloc_topology_set_type_filter(topo, HWLOC_OBJ_OS_DEVICE,
                                     HWLOC_TYPE_FILTER_KEEP_IMPORTANT) < 0 ||
      hwloc_topology_set_type_filter(topo, HWLOC_OBJ_PCI_DEVICE,
                                     HWLOC_TYPE_FILTER_KEEP_IMPORTANT) < 0)
    return -1;
  return hwloc_topology_load(topo) < 0 ? -1 : 0;
}

int mpibind_open_topology(hwloc_topology_t *out, const char *xml_path,
                          char *err, size_t errlen)
{
  return mpibind_open_topology_flags(out, xml_path, 0, err, errlen);
}

int mpibind_open_topology_flags(hwloc_topology_t *out, const char *xml_path,
                                unsigned long flags, char *err, size_t errlen)
{
  hwloc_topology_t topo;
  char dummy[1];
  if (err == NULL) {
    err = dummy;
    errlen = sizeof(dummy);
  }
  err[0] = '\0';
  *out = NULL;
  if (xml_path != NULL && access(xml_path, R_OK) != 0) {
    snprintf(err, errlen, "cannot read topology file %s: %s", xml_path, strerror(errno));
    return -1;
  }
  if (hwloc_topology_init(&topo) < 0) {
    snprintf(err, errlen, "hwloc_topology_init failed");
    return -1;
  }
  if (flags && hwloc_topology_set_flags(topo, flags) < 0) {
    snprintf(err, errlen, "hwloc refused topology flags 0x%lx", flags);
    hwloc_topology_destroy(topo);
    return -1;
  }
  if (xml_path != NULL && hwloc_topology_set_xml(topo, xml_path) < 0) {
    snprintf(err, errlen, "cannot load topology %s (not a valid hwloc XML file?)", xml_path);
    hwloc_topology_destroy(topo);
    return -1;
  }
  if (mpibind_load_topology(topo) != 0) {
    if (xml_path)
      snprintf(err, errlen, "cannot load topology %s (not a valid hwloc XML file?)", xml_path);
    else
      snprintf(err, errlen, "cannot discover the topology of this machine");
    hwloc_topology_destroy(topo);
    return -1;
  }
  if (hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU) <= 0) {
    snprintf(err, errlen, "topology %s has no PUs", xml_path ? xml_path : "(this machine)");
    hwloc_topology_destroy(topo);
    return -1;
  }
  *out = topo;
  return 0;
}

void mpibind_close_topology(hwloc_topology_t topo)
{
  if (topo)
    hwloc_topology_destroy(topo);
}

int mpibind_get_core_depth(hwloc_topology_t topo)
{
  return hwloc_get_type_or_below_depth(topo, HWLOC_OBJ_CORE);
}

/* PUs per core, from the first core (1 when cores were merged into PUs). */
int topo_smt_level(hwloc_topology_t topo)
{
  hwloc_obj_t core = hwloc_get_obj_by_depth(topo, mpibind_get_core_depth(topo), 0);
  if (core == NULL || core->arity == 0)
    return 1;
  return (int)core->arity;
}

/* Memory that is not the node's ordinary DRAM (KNL MCDRAM, HBM, GPU memory, NVM). */
static int numa_is_special(hwloc_obj_t numa)
{
  return numa->subtype != NULL && strcmp(numa->subtype, "DRAM") != 0;
}

static int by_logical_index(const void *a, const void *b)
{
  const hwloc_obj_t x = *(const hwloc_obj_t *)a, y = *(const hwloc_obj_t *)b;
  return (x->logical_index > y->logical_index) - (x->logical_index < y->logical_index);
}

/* The NUMA domains tasks are spread over, in logical order. CPU-less nodes (GPU
 * memory in hwloc-1 XMLs) are left out. Where several nodes cover intersecting CPUs
 * (DRAM + MCDRAM/HBM/GPU memory) only one per locality is kept, preferring plain
 * DRAM: otherwise two tasks would share the same CPUs while others sit idle. The
 * reference only does this with hwloc >= 2.12; we do it with any hwloc. */
int topo_select_numas(hwloc_topology_t topo, hwloc_obj_t **out)
{
  int total = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
  hwloc_obj_t *kept = calloc(total > 0 ? total : 1, sizeof(*kept));
  int nkept = 0;
  hwloc_obj_t numa = NULL;

  while ((numa = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, numa)) != NULL) {
    if (numa->cpuset == NULL || hwloc_bitmap_iszero(numa->cpuset) || numa->parent == NULL)
      continue;
    int i, clash = -1;
    for (i = 0; i < nkept; i++)
      if (hwloc_bitmap_intersects(kept[i]->cpuset, numa->cpuset)) {
        clash = i;
        break;
      }
    if (clash < 0)
      kept[nkept++] = numa;
    else if (numa_is_special(kept[clash]) && !numa_is_special(numa))
      kept[clash] = numa;
  }
  qsort(kept, nkept, sizeof(*kept), by_logical_index);
  *out = kept;
  return nkept;
}

/* A GPU OS device of a real GPU driver (NVML, RSMI...). DRM devices (card0,
 * renderD128, controlD64) are GPU-typed too but carry no vendor information and
 * duplicate the real ones: they are not GPUs for mpibind. */
static int osdev_is_gpu(hwloc_obj_t obj)
{
  if (obj->attr->osdev.type == HWLOC_OBJ_OSDEV_GPU) {
    const char *n = obj->name ? obj->name : "";
    if (strncmp(n, "card", 4) == 0 || strncmp(n, "renderD", 7) == 0 ||
        strncmp(n, "controlD", 8) == 0)
      return 0;
    if (hwloc_obj_get_info_by_name(obj, "GPUVendor") != NULL)
      return 1;
    return obj->subtype && (strcmp(obj->subtype, "NVML") == 0 || strcmp(obj->subtype, "RSMI") == 0);
  }
  /* CUDA and OpenCL co-processors duplicate NVML/RSMI devices; Level Zero has none. */
  return obj->attr->osdev.type == HWLOC_OBJ_OSDEV_COPROC && obj->subtype &&
         strcmp(obj->subtype, "LevelZero") == 0;
}

/* "nvml3" -> 3, "opencl1d0" -> 10: the digits of the name, as the reference does. */
static int name_number(const char *name)
{
  int value = -1;
  for (; name && *name; name++)
    if (isdigit((unsigned char)*name))
      value = (value < 0 ? 0 : value * 10) + (*name - '0');
  return value;
}

static void find_uuid(hwloc_obj_t obj, char *out, size_t size)
{
  unsigned i;
  out[0] = '\0';
  for (i = 0; i < obj->infos_count; i++) {
    const char *name = obj->infos[i].name;
    size_t len = strlen(name);
    if (len >= 4 && strcmp(name + len - 4, "UUID") == 0) {
      snprintf(out, size, "%s", obj->infos[i].value);
      return;
    }
  }
}

static int is_gpu_vendor(unsigned vendor)
{
  return vendor == 0x10de || vendor == 0x1002 || vendor == 0x8086;
}

/* Compute accelerators show as 3D (0302) or "other display" (0380) controllers:
 * H100/A100 (NVIDIA), Instinct MI (AMD), Data Center GPU Max (Intel). */
static int pci_is_compute_class(hwloc_obj_t pci)
{
  unsigned cls = pci->attr->pcidev.class_id;
  return is_gpu_vendor(pci->attr->pcidev.vendor_id) && (cls == 0x0302 || cls == 0x0380);
}

/* A VGA controller (0300) of NVIDIA or AMD: a workstation GPU, or a server's onboard
 * graphics. Intel's VGA devices are integrated graphics, never counted; VGA chips of
 * other vendors (ASPEED 1a03, Matrox 102b: the BMC's console) never either. */
static int pci_is_vga_gpu(hwloc_obj_t pci)
{
  unsigned vendor = pci->attr->pcidev.vendor_id;
  return pci->attr->pcidev.class_id == 0x0300 && (vendor == 0x10de || vendor == 0x1002);
}

/* No compute OS device below the PCI device, at most DRM devices: its driver backend
 * was not loaded. Debian's and Ubuntu's hwloc are built without NVML, so their
 * topologies show an H100 exactly like this. */
static int pci_without_backend(hwloc_obj_t pci)
{
  hwloc_obj_t child;
  for (child = pci->io_first_child; child != NULL; child = child->next_sibling) {
    const char *n = child->name ? child->name : "";
    if (child->type != HWLOC_OBJ_OS_DEVICE)
      continue;
    if (child->attr->osdev.type == HWLOC_OBJ_OSDEV_GPU &&
        (strncmp(n, "card", 4) == 0 || strncmp(n, "renderD", 7) == 0 ||
         strncmp(n, "controlD", 8) == 0))
      continue;   /* DRM: present without any compute backend */
    return 0;     /* NVML, RSMI, CUDA, OpenCL, Level Zero...: hwloc knows this GPU */
  }
  return 1;
}

/* A GPU seen only as a PCI device. A VGA-class device counts only on a node with no
 * compute-class device at all (a workstation): beside compute GPUs it is the
 * server's onboard or BMC graphics, which no task may be given. */
static int pci_gpu_without_backend(hwloc_obj_t pci, int node_has_compute_class)
{
  if (!pci_is_compute_class(pci) && !(pci_is_vga_gpu(pci) && !node_has_compute_class))
    return 0;
  return pci_without_backend(pci);
}

static int by_pci_bus(const void *a, const void *b)
{
  const struct hwloc_pcidev_attr_s *x = &(*(const hwloc_obj_t *)a)->attr->pcidev;
  const struct hwloc_pcidev_attr_s *y = &(*(const hwloc_obj_t *)b)->attr->pcidev;
  unsigned long kx = ((unsigned long)x->domain << 24) | (x->bus << 16) | (x->dev << 8) | x->func;
  unsigned long ky = ((unsigned long)y->domain << 24) | (y->bus << 16) | (y->dev << 8) | y->func;
  return (kx > ky) - (kx < ky);
}

/* GPUs from PCI alone, used only when no GPU OS device exists at all: ids follow PCI
 * bus order per vendor, which is the order of NVML (nvidia-smi) and ROCm SMI. */
static int pci_fallback_gpus(hwloc_topology_t topo, hwloc_bitmap_t allowed_set, struct gpu **out)
{
  int npci = 0, n = 0, i, j, has_compute = 0;
  hwloc_obj_t obj = NULL, *list;
  while ((obj = hwloc_get_next_pcidev(topo, obj)) != NULL) {
    npci++;
    has_compute |= pci_is_compute_class(obj);
  }
  list = calloc(npci > 0 ? npci : 1, sizeof(*list));
  npci = 0;
  while ((obj = hwloc_get_next_pcidev(topo, obj)) != NULL)
    if (pci_gpu_without_backend(obj, has_compute))
      list[npci++] = obj;
  qsort(list, npci, sizeof(*list), by_pci_bus);
  *out = calloc(npci > 0 ? npci : 1, sizeof(**out));
  for (i = 0; i < npci; i++) {
    hwloc_obj_t pci = list[i];
    int smi = 0;
    for (j = 0; j < i; j++)
      smi += list[j]->attr->pcidev.vendor_id == pci->attr->pcidev.vendor_id;
    if (allowed_set && !hwloc_bitmap_isset(allowed_set, (unsigned)smi))
      continue;
    struct gpu *g = &(*out)[n++];
    g->ancestor = hwloc_get_non_io_ancestor_obj(topo, pci);
    g->smi = smi;
    g->vendor_id = pci->attr->pcidev.vendor_id;
    snprintf(g->pci, sizeof(g->pci), "%04x:%02x:%02x.%01x", pci->attr->pcidev.domain,
             pci->attr->pcidev.bus, pci->attr->pcidev.dev, pci->attr->pcidev.func);
    snprintf(g->name, sizeof(g->name), "pci%.60s", g->pci);   /* a bus id is 12 chars; bounded for the compiler */
    snprintf(g->smi_str, sizeof(g->smi_str), "%d", g->smi);
    g->uuid[0] = '\0';
  }
  free(list);
  return n;
}

int topo_discover_gpus(hwloc_topology_t topo, const char *allowed, struct gpu **out)
{
  int n = 0, cap = 0;
  struct gpu *gpus = NULL;
  hwloc_bitmap_t allowed_set = NULL;
  hwloc_obj_t obj = NULL;

  if (allowed != NULL) {
    allowed_set = hwloc_bitmap_alloc();
    hwloc_bitmap_list_sscanf(allowed_set, allowed);
  }
  while ((obj = hwloc_get_next_osdev(topo, obj)) != NULL) {
    hwloc_obj_t pci = obj->parent;
    if (!osdev_is_gpu(obj))
      continue;
    /* A GPU must hang off a PCI device: that gives its bus id and locality. */
    if (pci == NULL || pci->type != HWLOC_OBJ_PCI_DEVICE)
      continue;
    int smi = name_number(obj->name);
    if (allowed_set && (smi < 0 || !hwloc_bitmap_isset(allowed_set, (unsigned)smi)))
      continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 16;
      gpus = realloc(gpus, cap * sizeof(*gpus));
    }
    struct gpu *g = &gpus[n];
    memset(g, 0, sizeof(*g));
    g->ancestor = hwloc_get_non_io_ancestor_obj(topo, obj);
    g->smi = smi >= 0 ? smi : n;
    g->vendor_id = pci->attr->pcidev.vendor_id;
    snprintf(g->name, sizeof(g->name), "%s", obj->name ? obj->name : "");
    snprintf(g->pci, sizeof(g->pci), "%04x:%02x:%02x.%01x", pci->attr->pcidev.domain,
             pci->attr->pcidev.bus, pci->attr->pcidev.dev, pci->attr->pcidev.func);
    snprintf(g->smi_str, sizeof(g->smi_str), "%d", g->smi);
    find_uuid(obj, g->uuid, sizeof(g->uuid));
    n++;
  }
  if (n == 0) {
    free(gpus);
    n = pci_fallback_gpus(topo, allowed_set, &gpus);
  }
  if (allowed_set)
    hwloc_bitmap_free(allowed_set);
  *out = gpus;
  return n;
}
