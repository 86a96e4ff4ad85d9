"""`vcluster`: the virtual cluster of `stackproof vcluster up` (QEMU TCG nodes network-booted from
the debian12-compute image; Slurm 22.05 with slurmctld on the head namespace, no slurmdbd: squeue
scheduler; srun launcher with PMIx). One partition `cpu` of node type vcluster-tcg
(images/vcluster/nodetype.yaml, 1 socket x 2 cores: with corespec, 1 application core per node).

Select it explicitly (`--system vcluster`); it never matches by hostname. ReFrame must run inside the
head's namespace so that Slurm clients reach slurmctld, which `stackproof vcluster exec` does:
  stackproof vcluster exec -- reframe -C reframe-tests/config/site.py --system vcluster -r ...
Jobs run on the nodes, whose root filesystem is the image in RAM: stage and output directories must
be on a path the nodes see, so only run-only checks of programs in the image (/opt/stackproof/bin,
/opt/vcluster/bin) work; noise inside a TCG VM is large (report it, never assert on it).
Environment: STACKPROOF_VCLUSTER_DIR (default build/vcluster), STACKPROOF_VCLUSTER_NODES (default 2)."""
import os

from stackproof.nodetype import load
from stackproof.paths import REPO

from partitions import default_prefix, partition, system

ROOT = os.environ.get('STACKPROOF_VCLUSTER_DIR', str(REPO / 'build' / 'vcluster'))
NODES = int(os.environ.get('STACKPROOF_VCLUSTER_NODES', '2'))
if os.path.isfile(os.path.join(ROOT, 'run/etc/slurm.conf')):
    os.environ.setdefault('SLURM_CONF', os.path.join(ROOT, 'run/etc/slurm.conf'))

site_configuration = system(
    'vcluster', descr='virtual cluster (stackproof vcluster up): QEMU nodes booted from our image',
    hostnames=['^stackproof-vcluster-never-matches$'], prefix=default_prefix(),
    partitions=[
        partition(load(str(REPO / 'images' / 'vcluster' / 'nodetype.yaml')), 'cpu',
                  descr='virtual nodes (TCG, 2 vCPUs, 1.5 GB)', access=['--partition=cpu'],
                  scheduler='squeue', launcher='srun', max_jobs=1, nodes=NODES, stackproof_root='/',
                  features=['remote', 'slurm', 'vcluster'], env_vars=[('SLURM_MPI_TYPE', 'pmix')]),
    ])
