"""`vcluster`: the virtual cluster of `stackproof vcluster up` (QEMU TCG nodes network-booted from
the debian12-compute image; Slurm 22.05 with slurmctld on the head namespace, no slurmdbd: squeue
scheduler; srun launcher with PMIx). One partition `cpu` of node type vcluster-tcg
(images/vcluster/nodetype.yaml, 1 socket x 2 cores).

Select it explicitly (`--system vcluster`); it never matches by hostname. ReFrame must run inside the
head's namespace so that Slurm clients reach slurmctld, which `stackproof vcluster exec` does:
  stackproof vcluster exec -- reframe -C reframe-tests/config/site.py --system vcluster \
      --distribute=all -n MPIHello -n 'FWQNoise.*signature=none' -r
- Stage directories are under <vcluster root>/share/reframe/stage, which every node mounts at the same
  path (virtiofs, src/stackproof/provision/vcluster/share.py), the one place the nodes write; output
  directories, perflogs and reports under <vcluster root>/reframe, on the head alone (what root reads
  afterwards is not on a share a node writes); the stacks root is mounted read-only, so jobs run the
  stack binaries `stackproof stack build` made on the head.
- Stack: `commodity` only (Debian's Open MPI, the MPI of the image).
- Profile: the nodes' image fixes it (feature `corespec`); the head writes the profile.env the nodes
  run to <root>/run/etc/stackproof/profile.env (stackproof_root), so checks place ranks on the
  application cores (corespec: CPU 1 of each node) and profile rows the nodes do not run are skipped.
- Jobs get the nodes' own SLURM_CONF (ReFrame's environment holds the head's copy).
- Noise inside a TCG VM is large: report FWQ numbers, never assert on them.
- Feature `emulated` (QEMU nodes on this host): problems sized for real nodes (AMG `size=paper`) skip.
Environment: STACKPROOF_VCLUSTER_DIR (default build/vcluster), STACKPROOF_VCLUSTER_NODES (default 2)."""
import os

from stackproof.nodes.nodetype import load
from stackproof.paths import REPO

from partitions import partition, system

ROOT = os.path.abspath(os.environ.get('STACKPROOF_VCLUSTER_DIR', str(REPO / 'build' / 'vcluster')))
NODES = int(os.environ.get('STACKPROOF_VCLUSTER_NODES', '2'))
NODETYPE = str(REPO / 'images' / 'vcluster' / 'nodetype.yaml')
if os.path.isfile(os.path.join(ROOT, 'run/etc/slurm.conf')):
    os.environ.setdefault('SLURM_CONF', os.path.join(ROOT, 'run/etc/slurm.conf'))

site_configuration = system(
    'vcluster', descr='virtual cluster (stackproof vcluster up): QEMU nodes booted from our image',
    hostnames=['^stackproof-vcluster-never-matches$'], prefix=os.path.join(ROOT, 'reframe'),
    partitions=[
        partition(load(NODETYPE), 'cpu', descr='virtual nodes (TCG, 2 vCPUs, 1.5 GB)', access=['--partition=cpu'],
                  scheduler='squeue', launcher='srun', max_jobs=1, nodes=NODES, time_limit='10m',
                  stackproof_root=os.path.join(ROOT, 'run'), stacks=('commodity',),
                  extras={'nodetype': NODETYPE},
                  features=['remote', 'slurm', 'emulated', 'vcluster', 'corespec'],
                  env_vars=[('SLURM_MPI_TYPE', 'pmix'), ('SLURM_CONF', '/etc/slurm/slurm.conf')]),
    ])
site_configuration['systems'][0]['stagedir'] = os.path.join(ROOT, 'share', 'reframe', 'stage')
# squeue answers at once here: poll at least once a second (ReFrame's default decays to every 10 s)
site_configuration['general'] = [{'poll_rate_min': 1.0, 'target_systems': ['vcluster']}]
