"""A real Slurm test cluster on this machine: munged + slurmctld + slurmd, configured by
`stackproof slurm render` for the local node type and a core-specialization profile.

Modules: state (Settings, State, the private run directory), procs (process and cgroup helpers),
munge (per-cluster key and munged), netns (multi-node namespaces), daemons (slurmctld, slurmd,
noise daemon), core (the Cluster: up/down/status/exec), cli (`stackproof cluster ...`).

Layout: everything lives in one private run directory ($STACKPROOF_RUN_DIR, default
/run/stackproof/cluster, 0700, owned by root, never a symlink): etc/ (rendered configs, hosts),
munge/ (a fresh key per `up`, 0400, removed by `down`; socket), state/, spool/, log/, run/ (PID
files), tmpfs/, dev/ (fake GPU device files), cluster.json (what `up` started, written atomically).

Modes:
- single node: one slurmd named after this host, controller on 127.0.0.1;
- --nodes N: N slurmd, each in its own network + UTS (+ mount, for a private /etc/hosts) namespace
  with hostname nI and address 10.99.X.(10+I), bridged in the controller's namespace (10.99.X.1;
  X and the link names derive from the run directory, so clusters never share them). This host
  joins the bridge as 10.99.X.254, so Slurm clients run from anywhere on it.

`up` validates first (bad input never stops a running cluster), then is idempotent: a running
cluster with the same settings is left alone except that dead daemons are restarted (slurmctld from
its saved state, so jobs survive); different settings (another profile) restart Slurm.

Owns the cluster's daemons, namespaces, cgroups and state.

May import: basics, nodes/ (node types, slurm.conf rendering, profiles), noise/ (the noise daemon's
binary). Imported by provision/, reframe/, acceptance/ and the CLI.
"""
from stackproof.cluster.cli import find_built_mpibind_plugin, register, settings_from_args, settings_with
from stackproof.cluster.core import REQUIRED, Cluster
from stackproof.cluster.daemons import slurmctld_pidfile, slurmd_pidfile
from stackproof.cluster.netns import NETNS_PREFIX, host_veth, node_addr, subnet
from stackproof.cluster.procs import cgroup_mode, log
from stackproof.cluster.state import DEFAULT_PORTS, DEFAULT_RUN_DIRS, CorruptState, Settings, State, run_dir

DEFAULT_RUN_DIR = str(DEFAULT_RUN_DIRS[0])

__all__ = ["Cluster", "Settings", "State", "CorruptState", "REQUIRED", "NETNS_PREFIX", "host_veth", "node_addr", "subnet",
           "DEFAULT_PORTS", "DEFAULT_RUN_DIR", "run_dir", "cgroup_mode", "log",
           "find_built_mpibind_plugin", "register", "settings_from_args", "settings_with", "slurmctld_pidfile", "slurmd_pidfile"]
