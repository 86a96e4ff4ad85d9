"""`x86gpu`: an example real site, an x86 + NVIDIA GPU cluster (the H100 site of the issue).
The node type is $STACKPROOF_X86GPU_NODETYPE: on an H100 site run
`stackproof nodetype from-host --name h100 -o slurm-conf/nodetypes/h100.yaml` on a compute node and
set STACKPROOF_X86GPU_NODETYPE=h100. Without it the shipped `pascal` node type (x86 + P100)
stands in, so the configuration is still complete and dry-runs work anywhere."""
import os

from stackproof.nodes.nodetype import load

from partitions import default_prefix, partition, system, topology_file

nt = load(os.environ.get('STACKPROOF_X86GPU_NODETYPE', 'pascal'))
common = dict(scheduler='squeue', launcher='srun', max_jobs=8, nodes=2, time_limit='30m',
              topology_xml=topology_file(nt), stacks=('commodity', 'vendor'),
              env_vars=[('SLURM_MPI_TYPE', 'pmix')])

site_configuration = system(
    'x86gpu', descr=f'x86 + NVIDIA GPU cluster (node type {nt.name})', hostnames=[r'^x86gpu-login\d*$'],
    prefix=default_prefix(),
    partitions=[
        partition(nt, 'gpu', descr='x86 + NVIDIA GPU nodes', access=['--partition=gpu'],
                  features=['remote', 'slurm', 'corespec', 'mpibind'], **common),
    ])
