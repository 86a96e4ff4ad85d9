"""`testcluster`: the local Slurm test cluster of `stackproof cluster up` (squeue scheduler, since
it runs without slurmdbd/sacct; srun launcher with PMIx for Open MPI). Partitions `cpu` (all nodes)
and `gpu` (the nodes with fake GPUs, only when the cluster has them). Nodes are emulated on this
host, so the node type is `local`.

The configuration describes the running cluster: node count, fake GPUs, core-specialization profile
and noise daemon come from its state (<run dir>/cluster.json, written by `stackproof cluster up`),
so a check never changes the cluster; one for another profile is skipped (stackproof.reframe.profile).
Select it explicitly (`--system testcluster`, or RFM_SYSTEM=testcluster from `stackproof cluster
env`); it never matches by hostname. Without a running cluster a run stops once, saying how to
start one (listing and --dry-run work, for a 1-node baseline cluster).

Every job of the cluster takes whole nodes (`--exclusive`) and waits for the previous one
(`--dependency=singleton` under one job name): the emulated nodes share this host's CPUs, so noise-
and latency-sensitive checks never overlap, whatever ReFrame's execution policy. Jobs the cluster
can never start (`PartitionConfig`, `PartitionNodeLimit`...) are cancelled by ReFrame, not left pending.
Feature `emulated`: the nodes share this host's CPUs and memory, so problems sized for real nodes
(AMG `size=paper`) are skipped, saying so.

Environment: STACKPROOF_RUN_DIR (default the cluster's private run dir, /run/stackproof/cluster);
STACKPROOF_CLUSTER_NODES and STACKPROOF_FAKE_GPUS override the state's node count and fake GPUs.
"""
import json
import os
import sys

from partitions import SiteConfigError, default_prefix, nodetype_for, partition, requested_system, system

from stackproof.cluster.state import run_dir

RUN_DIR = str(run_dir())     # $STACKPROOF_RUN_DIR, else the cluster's own default
SLURM_CONF = os.path.join(RUN_DIR, 'etc/slurm/slurm.conf')
JOB_NAME = 'stackproof-testcluster'
# reasons a pending job can never start on this cluster: ReFrame cancels it (a failure, not a hang)
NEVER_STARTS = ['ReqNodeNotAvail', 'PartitionConfig', 'PartitionNodeLimit', 'PartitionTimeLimit',
                'BadConstraints', 'DependencyNeverSatisfied', 'InvalidAccount', 'InvalidQOS']


def cluster_state(path):
    """The running cluster's cluster.json (settings + node names), or None."""
    try:
        with open(os.path.join(path, 'cluster.json')) as fh:
            state = json.load(fh)
        return state if isinstance(state, dict) and isinstance(state.get('settings'), dict) else None
    except (OSError, ValueError):
        return None


def _int_env(name, default):
    value = os.environ.get(name)
    if value in (None, ''):
        return default
    if not value.isdigit():
        raise SiteConfigError(f'{name}={value!r}: expected a non-negative integer')
    return int(value)


def _running_checks(argv):
    return any(a in ('-r', '--run') for a in argv) and '--dry-run' not in argv


STATE = cluster_state(RUN_DIR)
SETTINGS = (STATE or {}).get('settings', {})
NODES = _int_env('STACKPROOF_CLUSTER_NODES', len((STATE or {}).get('node_names') or []) or 1)
FAKE_GPUS = _int_env('STACKPROOF_FAKE_GPUS', int(SETTINGS.get('fake_gpus') or 0))
PROFILE = SETTINGS.get('profile') or 'baseline'
NOISE_DAEMON = SETTINGS.get('noise_daemon') or ''

if requested_system() == 'testcluster' and STATE is None and _running_checks(sys.argv):
    raise SiteConfigError(f'no test cluster is up (no {RUN_DIR}/cluster.json): start one with '
                       '`stackproof cluster up [--nodes N] [--profile P]`, then `eval "$(stackproof cluster env)"`')

# sbatch/squeue run in ReFrame's own process environment, not the job's: point them at the
# test cluster unless the caller already did (`eval "$(stackproof cluster env)"`).
if os.path.isfile(SLURM_CONF):
    os.environ.setdefault('SLURM_CONF', SLURM_CONF)

nt = nodetype_for('testcluster', 'local')
site_configuration = {}
if nt is not None:
    common = dict(scheduler='squeue', launcher='srun', max_jobs=1, nodes=NODES, stackproof_root=RUN_DIR,
                  env_vars=[('SLURM_MPI_TYPE', 'pmix')],
                  extras={'profile': PROFILE, 'noise_daemon': NOISE_DAEMON})
    serial = [f'--job-name={JOB_NAME}', '--dependency=singleton', '--exclusive']
    # the mpibind SPANK plugin only when the running cluster loads it (without a cluster: assumed)
    mpibind = ['mpibind'] if STATE is None or SETTINGS.get('mpibind_plugin') else []
    parts = [partition(nt, 'cpu', descr='all test-cluster nodes', access=['--partition=cpu'] + serial,
                       features=['remote', 'slurm', 'emulated', 'profiles', 'corespec'] + mpibind, **common)]
    if FAKE_GPUS:
        parts.append(partition(nt, 'gpu', descr='test-cluster nodes with fake GPUs',
                               access=['--partition=gpu'] + serial,
                               features=['remote', 'slurm', 'emulated', 'profiles'], fake_gpus=FAKE_GPUS, **common))
    for p in parts:
        p['sched_options'] = {'slurm_job_cancel_reasons': NEVER_STARTS}
    site_configuration = system('testcluster', descr='local Slurm test cluster (stackproof cluster up)',
                                hostnames=['^stackproof-testcluster-never-matches$'], prefix=default_prefix(),
                                partitions=parts)
