/* Parsing of id lists, restrict values and front-end options; the plugin's
 * on/off decision. Kept here so every front end behaves the same. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"

/* Count the integers of "0-3,8"; -1 if it is not such a list. */
int mpibind_range_nints(const char *list)
{
  const char *p = list;
  long count = 0;
  if (list == NULL)
    return -1;
  while (isspace((unsigned char)*p))
    p++;
  if (*p == '\0')
    return -1;
  while (*p) {
    char *end;
    if (!isdigit((unsigned char)*p))
      return -1;
    long lo = strtol(p, &end, 10), hi = lo;
    p = end;
    if (*p == '-') {
      if (!isdigit((unsigned char)p[1]))
        return -1;
      hi = strtol(p + 1, &end, 10);
      p = end;
      if (hi < lo)
        return -1;
    }
    count += hi - lo + 1;
    if (count > INT_MAX)
      return -1;
    while (isspace((unsigned char)*p))
      p++;
    if (*p == ',') {
      p++;
      if (*p == '\0')
        return -1;
    } else if (*p != '\0') {
      return -1;
    }
  }
  return (int)count;
}

int mpibind_cores_to_pus(hwloc_topology_t topo, const char *cores, hwloc_bitmap_t pus)
{
  hwloc_bitmap_t set;
  int id, rc = 0, depth = mpibind_get_core_depth(topo);
  if (mpibind_range_nints(cores) < 0)
    return 1;
  set = hwloc_bitmap_alloc();
  hwloc_bitmap_list_sscanf(set, cores);
  hwloc_bitmap_zero(pus);
  hwloc_bitmap_foreach_begin(id, set) {
    hwloc_obj_t core = hwloc_get_obj_by_depth(topo, depth, (unsigned)id);
    if (core == NULL) {
      rc = 1;
      break;
    }
    hwloc_bitmap_or(pus, pus, core->cpuset);
  } hwloc_bitmap_foreach_end();
  hwloc_bitmap_free(set);
  return rc;
}

int mpibind_parse_restrict_ids(const char *value, char *out, size_t size, char *err,
                               size_t errlen)
{
  char line[4096];
  char dummy[1];
  if (err == NULL) {
    err = dummy;
    errlen = sizeof(dummy);
  }
  if (value == NULL || *value == '\0') {
    snprintf(err, errlen, "empty restrict value");
    return 1;
  }
  if (mpibind_range_nints(value) > 0) {
    snprintf(out, size, "%s", value);
    return 0;
  }
  /* Not a list: the path of a file holding one. */
  FILE *f = fopen(value, "r");
  if (f == NULL) {
    snprintf(err, errlen, "restrict value '%s' is neither an id list nor a readable file (%s)",
             value, strerror(errno));
    return 1;
  }
  if (fgets(line, sizeof(line), f) == NULL)
    line[0] = '\0';
  fclose(f);
  line[strcspn(line, "\r\n")] = '\0';
  if (mpibind_range_nints(line) <= 0) {
    snprintf(err, errlen, "restrict file %s does not hold an id list (got '%s')", value, line);
    return 1;
  }
  snprintf(out, size, "%s", line);
  return 0;
}

int mpibind_parse_restrict_type(const char *value)
{
  if (value && strcmp(value, "cpu") == 0)
    return MPIBIND_RESTRICT_CPU;
  if (value && strcmp(value, "mem") == 0)
    return MPIBIND_RESTRICT_MEM;
  return -1;
}

void mpibind_options_init(struct mpibind_options *o)
{
  o->enable = -1;
  o->verbose = 0;
  o->debug = 0;
  o->gpu_optim = -1;
  o->greedy = -1;
  o->smt = 0;
  o->help = 0;
}

const char *mpibind_options_usage(void)
{
  return "mpibind options (comma-separated, e.g. --mpibind=v,smt:2):\n"
         "  on | off       bind (or not) whatever the site default\n"
         "  v | verbose    print the mapping (node 0); v:2 prints it on every node\n"
         "  gpu[:0|1]      distribute tasks by GPUs (1, default) or by CPUs (0)\n"
         "  greedy[:0|1]   with fewer tasks than NUMA domains, give tasks whole domains (1, default)\n"
         "  smt:K          use K hardware threads per core (1..SMT of the node)\n"
         "  debug          print plugin decisions\n"
         "  help           print this help\n";
}

/* "name" or "name:value"; value must be an integer within [lo, hi]. */
static int parse_int_value(const char *token, const char *value, int lo, int hi, int *out,
                           char *err, size_t errlen)
{
  char *end;
  long v;
  errno = 0;
  v = strtol(value, &end, 10);
  if (*value == '\0' || *end != '\0' || errno || v < lo || v > hi) {
    snprintf(err, errlen, "invalid value in mpibind option '%s' (expected %d..%d)", token, lo,
             hi);
    return 1;
  }
  *out = (int)v;
  return 0;
}

static int parse_one(const char *token, struct mpibind_options *o, char *err, size_t errlen)
{
  char name[64];
  const char *colon = strchr(token, ':');
  const char *value = colon ? colon + 1 : NULL;
  size_t n = colon ? (size_t)(colon - token) : strlen(token);
  if (n == 0 || n >= sizeof(name)) {
    snprintf(err, errlen, "invalid mpibind option '%s'", token);
    return 1;
  }
  memcpy(name, token, n);
  name[n] = '\0';

  if (!value && strcmp(name, "on") == 0)
    o->enable = 1;
  else if (!value && strcmp(name, "off") == 0)
    o->enable = 0;
  else if (!value && strcmp(name, "debug") == 0)
    o->debug = 1;
  else if (!value && strcmp(name, "help") == 0)
    o->help = 1;
  else if (strcmp(name, "v") == 0 || strcmp(name, "verbose") == 0) {
    if (!value)
      o->verbose = 1;
    else
      return parse_int_value(token, value, 0, 2, &o->verbose, err, errlen);
  } else if (strcmp(name, "gpu") == 0) {
    if (!value)
      o->gpu_optim = 1;
    else
      return parse_int_value(token, value, 0, 1, &o->gpu_optim, err, errlen);
  } else if (strcmp(name, "greedy") == 0) {
    if (!value)
      o->greedy = 1;
    else
      return parse_int_value(token, value, 0, 1, &o->greedy, err, errlen);
  } else if (strcmp(name, "smt") == 0) {
    if (!value) {
      snprintf(err, errlen, "mpibind option 'smt' needs a value, e.g. smt:2");
      return 1;
    }
    return parse_int_value(token, value, 1, 64, &o->smt, err, errlen);
  } else {
    snprintf(err, errlen, "unknown mpibind option '%s' (try --mpibind=help)", token);
    return 1;
  }
  return 0;
}

int mpibind_parse_options(const char *list, struct mpibind_options *o, char *err,
                          size_t errlen)
{
  char dummy[1];
  if (err == NULL) {
    err = dummy;
    errlen = sizeof(dummy);
  }
  err[0] = '\0';
  if (list == NULL)
    return 0;
  if (*list == '\0') {
    snprintf(err, errlen, "empty mpibind option list");
    return 1;
  }
  char *copy = strdup(list);
  char *save = NULL, *token;
  int rc = 0;
  /* Empty items (",," or a trailing comma) are mistakes too. */
  size_t len = strlen(copy);
  if (copy[0] == ',' || copy[len - 1] == ',' || strstr(copy, ",,")) {
    snprintf(err, errlen, "empty item in mpibind option list '%s'", list);
    free(copy);
    return 1;
  }
  for (token = strtok_r(copy, ",", &save); token && rc == 0; token = strtok_r(NULL, ",", &save))
    rc = parse_one(token, o, err, errlen);
  free(copy);
  return rc;
}

int mpibind_decide_enabled(int user_enable, int default_off, int exclusive_only_off,
                           int exclusive)
{
  if (user_enable == 0 || user_enable == 1)
    return user_enable;
  if (default_off)
    return 0;
  if (exclusive_only_off)
    return 1;
  return exclusive ? 1 : 0;
}
