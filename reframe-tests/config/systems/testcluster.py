"""`testcluster`: the local Slurm test cluster of `stackproof cluster up` (squeue scheduler, since
it runs without slurmdbd/sacct; srun launcher with PMIx for Open MPI). Partitions `cpu` (all nodes)
and `gpu` (the nodes with fake GPUs). Nodes are emulated on this host, so the node type is `local`.

Select it explicitly (`--system testcluster`); it never matches by hostname. The Slurm clients
need the cluster's slurm.conf: it is taken from $STACKPROOF_RUN_DIR when SLURM_CONF is unset.
Environment: STACKPROOF_RUN_DIR (default the cluster's private run dir, /run/stackproof/cluster), STACKPROOF_CLUSTER_NODES
(node count the cluster was started with, default 2), STACKPROOF_FAKE_GPUS (fake GPUs per node of
the gpu partition; default: what the cluster's cluster.json says, else 0). The `gpu` partition
exists only when the cluster has fake GPUs."""
import os

from partitions import default_prefix, nodetype_for, partition, system, testcluster_fake_gpus

from stackproof.cluster.state import run_dir

RUN_DIR = str(run_dir())     # $STACKPROOF_RUN_DIR, else the cluster's own default
NODES = int(os.environ.get('STACKPROOF_CLUSTER_NODES', '2'))
FAKE_GPUS = testcluster_fake_gpus(RUN_DIR)

# sbatch/squeue run in ReFrame's own process environment, not the job's: point them at the
# test cluster unless the caller already did (`stackproof cluster exec -- reframe ...`).
if os.path.isfile(os.path.join(RUN_DIR, 'etc/slurm/slurm.conf')):
    os.environ.setdefault('SLURM_CONF', os.path.join(RUN_DIR, 'etc/slurm/slurm.conf'))

nt = nodetype_for('testcluster', 'local')
site_configuration = {}
if nt is not None:
    common = dict(scheduler='squeue', launcher='srun', max_jobs=1, nodes=NODES, stackproof_root=RUN_DIR,
                  env_vars=[('SLURM_MPI_TYPE', 'pmix')])
    parts = [partition(nt, 'cpu', descr='all test-cluster nodes', access=['--partition=cpu'],
                       features=['remote', 'slurm', 'profiles', 'corespec', 'mpibind'], **common)]
    if FAKE_GPUS:
        parts.append(partition(nt, 'gpu', descr='test-cluster nodes with fake GPUs', access=['--partition=gpu'],
                               features=['remote', 'slurm', 'profiles'], fake_gpus=FAKE_GPUS, **common))
    site_configuration = system('testcluster', descr='local Slurm test cluster (stackproof cluster up)',
                                hostnames=['^stackproof-testcluster-never-matches$'], prefix=default_prefix(),
                                partitions=parts)
