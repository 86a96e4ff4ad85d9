/* mpibind command line: predict the mapping of tasks, threads and GPUs on a node. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mpibind.h"

static const char *prog = "mpibind";

static void usage(FILE *out)
{
  fprintf(out,
          "usage: %s --ntasks N [options]\n"
          "  --topology FILE.xml    hwloc XML topology (default: this machine)\n"
          "  --ntasks N             number of tasks on the node (required, >= 1)\n"
          "  --nthreads T           threads per task (default: automatic)\n"
          "  --smt K                hardware threads per core to use (default: automatic)\n"
          "  --greedy 0|1           whole NUMA domains when tasks < NUMA domains (default 1)\n"
          "  --gpu-optim 0|1        distribute tasks by GPUs (default 1)\n"
          "  --restrict-type cpu|mem  what --restrict lists (default cpu)\n"
          "  --restrict IDS         restrict to these CPU or NUMA ids (list or file)\n"
          "  --gpu-ids smi|pci|uuid|name  GPU id type printed (default smi)\n"
          "  --json                 print JSON instead of text\n"
          "  --env                  also print the environment variables of each task\n"
          "  --version              print versions and exit\n",
          prog);
}

static void die(int code, const char *fmt, const char *arg)
{
  fprintf(stderr, "%s: ", prog);
  fprintf(stderr, fmt, arg);
  fputc('\n', stderr);
  exit(code);
}

static int parse_int(const char *opt, const char *s, int lo, int hi)
{
  char *end;
  long v;
  errno = 0;
  v = strtol(s, &end, 10);
  if (*s == '\0' || *end != '\0' || errno || v < lo || v > hi) {
    fprintf(stderr, "%s: invalid value '%s' for --%s (expected an integer in %d..%d)\n", prog, s,
            opt, lo, hi);
    exit(2);
  }
  return (int)v;
}

static void json_string(const char *s)
{
  putchar('"');
  for (; *s; s++) {
    if (*s == '"' || *s == '\\')
      printf("\\%c", *s);
    else if ((unsigned char)*s < 0x20)
      printf("\\u%04x", *s);
    else
      putchar(*s);
  }
  putchar('"');
}

static void print_json(mpibind_t *h, int with_env)
{
  int t, i, ntasks = mpibind_get_ntasks(h), nvars = 0;
  int *nthreads = mpibind_get_nthreads(h);
  char **names = mpibind_get_env_var_names(h, &nvars);
  printf("{\"tasks\": [");
  for (t = 0; t < ntasks; t++) {
    int ngpus = 0;
    char **gpus = mpibind_get_gpus_ptask(h, t, &ngpus);
    int len = mpibind_cpus_ptask_snprint(NULL, 0, h, t);
    char *cpus = malloc((size_t)len + 1);
    mpibind_cpus_ptask_snprint(cpus, (size_t)len + 1, h, t);
    printf("%s{\"task\": %d, \"nthreads\": %d, \"cpus\": \"%s\", \"gpus\": [", t ? ", " : "", t,
           nthreads[t], cpus);
    for (i = 0; i < ngpus; i++) {
      if (i)
        printf(", ");
      json_string(gpus[i]);
    }
    printf("]");
    if (with_env) {
      printf(", \"env\": {");
      for (i = 0; i < nvars; i++) {
        printf("%s", i ? ", " : "");
        json_string(names[i]);
        printf(": ");
        json_string(mpibind_get_env_var_values(h, names[i])[t]);
      }
      printf("}");
    }
    printf("}");
    free(cpus);
  }
  printf("]}\n");
}

int main(int argc, char **argv)
{
  enum { O_TOPO = 1, O_NTASKS, O_NTHREADS, O_SMT, O_GREEDY, O_GPU, O_RTYPE, O_RESTRICT,
         O_GPUIDS, O_JSON, O_ENV, O_VERSION, O_HELP };
  static const struct option longopts[] = {
    {"topology", required_argument, NULL, O_TOPO},
    {"ntasks", required_argument, NULL, O_NTASKS},
    {"nthreads", required_argument, NULL, O_NTHREADS},
    {"smt", required_argument, NULL, O_SMT},
    {"greedy", required_argument, NULL, O_GREEDY},
    {"gpu-optim", required_argument, NULL, O_GPU},
    {"restrict-type", required_argument, NULL, O_RTYPE},
    {"restrict", required_argument, NULL, O_RESTRICT},
    {"gpu-ids", required_argument, NULL, O_GPUIDS},
    {"json", no_argument, NULL, O_JSON},
    {"env", no_argument, NULL, O_ENV},
    {"version", no_argument, NULL, O_VERSION},
    {"help", no_argument, NULL, O_HELP},
    {NULL, 0, NULL, 0}};
  const char *topology = NULL, *restrict_value = NULL;
  int ntasks = 0, nthreads = 0, smt = 0, greedy = 1, gpu_optim = 1;
  int restrict_type = MPIBIND_RESTRICT_CPU, id_type = MPIBIND_ID_SMI, json = 0, env = 0;
  int c;

  opterr = 0;
  while ((c = getopt_long(argc, argv, ":", longopts, NULL)) != -1) {
    switch (c) {
    case O_TOPO: topology = optarg; break;
    case O_NTASKS: ntasks = parse_int("ntasks", optarg, 1, 1 << 20); break;
    case O_NTHREADS: nthreads = parse_int("nthreads", optarg, 1, 1 << 20); break;
    case O_SMT: smt = parse_int("smt", optarg, 1, 1024); break;
    case O_GREEDY: greedy = parse_int("greedy", optarg, 0, 1); break;
    case O_GPU: gpu_optim = parse_int("gpu-optim", optarg, 0, 1); break;
    case O_RTYPE:
      if ((restrict_type = mpibind_parse_restrict_type(optarg)) < 0)
        die(2, "invalid --restrict-type '%s' (expected cpu or mem)", optarg);
      break;
    case O_RESTRICT: restrict_value = optarg; break;
    case O_GPUIDS:
      if (strcmp(optarg, "smi") == 0) id_type = MPIBIND_ID_SMI;
      else if (strcmp(optarg, "pci") == 0) id_type = MPIBIND_ID_PCIBUS;
      else if (strcmp(optarg, "uuid") == 0) id_type = MPIBIND_ID_UNIV;
      else if (strcmp(optarg, "name") == 0) id_type = MPIBIND_ID_NAME;
      else die(2, "invalid --gpu-ids '%s' (expected smi, pci, uuid or name)", optarg);
      break;
    case O_JSON: json = 1; break;
    case O_ENV: env = 1; break;
    case O_VERSION:
      printf("mpibind %s (hwloc %s)\n", mpibind_version(), mpibind_hwloc_version());
      return 0;
    case O_HELP: usage(stdout); return 0;
    case ':':
      die(2, "option %s needs a value", argv[optind - 1]);
      break;
    default:
      fprintf(stderr, "%s: unknown option '%s'\n", prog, argv[optind - 1]);
      usage(stderr);
      return 2;
    }
  }
  if (optind < argc)
    die(2, "unexpected argument '%s'", argv[optind]);
  if (ntasks == 0) {
    fprintf(stderr, "%s: --ntasks N is required (N >= 1)\n", prog);
    usage(stderr);
    return 2;
  }

  mpibind_t *h;
  char restrict_ids[4096], err[512];
  if (mpibind_init(&h) != 0)
    die(1, "%s", "out of memory");
  if (restrict_value) {
    if (mpibind_parse_restrict_ids(restrict_value, restrict_ids, sizeof(restrict_ids), err,
                                   sizeof(err)) != 0)
      die(2, "%s", err);
    mpibind_set_restrict_ids(h, restrict_ids);
    mpibind_set_restrict_type(h, restrict_type);
  }
  if ((topology && mpibind_set_topology_file(h, topology) != 0) ||
      mpibind_set_ntasks(h, ntasks) != 0 || mpibind_set_nthreads(h, nthreads) != 0 ||
      mpibind_set_smt(h, smt) != 0 || mpibind_set_greedy(h, greedy) != 0 ||
      mpibind_set_gpu_optim(h, gpu_optim) != 0 || mpibind(h) != 0 ||
      mpibind_set_gpu_ids(h, id_type) != 0 || mpibind_set_env_vars(h) != 0) {
    fprintf(stderr, "%s: %s\n", prog, mpibind_errmsg(h));
    mpibind_finalize(h);
    return 1;
  }
  if (json) {
    print_json(h, env);
  } else {
    mpibind_mapping_print(h);
    if (env)
      mpibind_env_vars_print(h);
  }
  mpibind_finalize(h);
  return 0;
}
