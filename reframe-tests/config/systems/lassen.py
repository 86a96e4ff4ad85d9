"""`lassen`: an example real site, a Lassen-like IBM POWER9 + 4x V100 cluster (node type `lassen`,
derived from LLNL's hwloc XML). Partitions `pbatch` (CPU work on the GPU nodes) and `pgpu`.
Edit access/hostnames for your site; never the hardware facts (they come from the node type)."""
from stackproof.nodes.nodetype import load

from partitions import default_prefix, partition, system, topology_file

nt = load('lassen')
common = dict(scheduler='squeue', launcher='srun', max_jobs=8, nodes=2, time_limit='30m',
              topology_xml=topology_file(nt), stacks=('commodity', 'vendor'),
              env_vars=[('SLURM_MPI_TYPE', 'pmix')])

site_configuration = system(
    'lassen', descr='Lassen-like POWER9 + V100 cluster', hostnames=[r'^lassen\d*$'], prefix=default_prefix(),
    partitions=[
        partition(nt, 'pbatch', descr='CPU jobs on POWER9 nodes', access=['--partition=pbatch'],
                  features=['remote', 'slurm', 'corespec', 'mpibind'], use_gpus=False, **common),
        partition(nt, 'pgpu', descr='GPU jobs on POWER9 + V100 nodes', access=['--partition=pbatch'],
                  features=['remote', 'slurm', 'corespec', 'mpibind'], **common),
    ])

