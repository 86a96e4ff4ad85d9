"""`local`: this machine (laptop, CI runner). Local scheduler, mpirun launcher, one partition
derived from the live host's node type. Matches any hostname, so it is the fallback system."""
from stackproof.nodetype import load

from partitions import default_prefix, partition, system

nt = load('local')

site_configuration = system(
    'local', descr='This machine: local scheduler, mpirun', hostnames=['.*'], prefix=default_prefix(),
    partitions=[partition(nt, 'default', descr='the local host', scheduler='local', launcher='mpirun',
                          features=['local', 'mpirun'], max_jobs=1, nodes=1)])
