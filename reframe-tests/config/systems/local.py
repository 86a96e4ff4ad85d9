"""`local`: this machine (laptop, GPU workstation, single GPU node, CI runner). Local scheduler,
mpirun launcher. Partition `default` (CPU jobs) always, and `gpu` when the node type has GPUs, so a
GPU node without Slurm has a GPU path. Matches any hostname, so it is the fallback system.

The node type is $STACKPROOF_LOCAL_NODETYPE (a name or a YAML path), else
slurm-conf/nodetypes/local.yaml when present, else derived from the live host
(lstopo), and only read when this run may use `local` (see partitions.nodetype_for): a Slurm
site's login node without lstopo loads the configuration for its own system."""
import os

from partitions import default_prefix, nodetype_for, partition, system

source = os.environ.get('STACKPROOF_LOCAL_NODETYPE') or 'local'
nt = nodetype_for('local', source)
site_configuration = {}
if nt is not None:
    # a YAML path stays a path for `stackproof slurm render` (its name is not in slurm-conf/nodetypes/)
    path_extras = {'nodetype': source} if (os.sep in source or source.endswith('.yaml')) else None
    # the host's mpirun as root (CI, containers) for environments that are no stack (builtin, default)
    local = dict(scheduler='local', launcher='mpirun', max_jobs=1, nodes=1, extras=path_extras,
                 env_vars=[('OMPI_ALLOW_RUN_AS_ROOT', '1'), ('OMPI_ALLOW_RUN_AS_ROOT_CONFIRM', '1')])
    parts = [partition(nt, 'default', descr='the local host', features=['local', 'mpirun'], use_gpus=False,
                       **local)]
    if nt.gpus:
        parts.append(partition(nt, 'gpu', descr="the local host's GPUs", features=['local', 'mpirun'], **local))
    site_configuration = system('local', descr='This machine: local scheduler, mpirun', hostnames=['.*'],
                                prefix=default_prefix(), partitions=parts)
