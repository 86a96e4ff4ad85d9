"""On-node memory-copy bandwidth, measured in the same session as the MPI benchmarks: what an on-node
MPI bandwidth is compared with. One rank per core on each node, each copying its own buffer
(src/memcopy.c, built with the stack's compiler) at two sizes: 64 MiB (`copy_bw`, beyond the caches:
the DRAM copy, for large messages) and 1 MiB (`copy_bw_1MiB`, the size of the verdict's bandwidth
messages, cache-resident like them). MB/s with read + write bytes counted, like STREAM Copy; the
smallest node's sum. Launched in blocks (StackCheck): each stack of a block compiles memcopy.c with
its own compiler in its setup (setup-STACK/memcopy), inside the job."""
import os

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import run_after, variable

from stackproof.reframe.check import StackCheck, blocks

LINE = r'^memcopy host=(\S+) ranks=(\d+) bytes=(\d+) MBps=(\S+) check=(\d)$'
SMALL_KIB = 1024      # the cache-resident copy: the size of the verdict's bandwidth messages (1 MiB)


@rfm.simple_test
class MemoryBandwidth(StackCheck, rfm.RunOnlyRegressionTest):
    block_index = blocks()
    #: direction of each performance variable (the report never guesses it from the name)
    perf_better = {'copy_bw*': 'higher'}
    mib = variable(int, value=64, loggable=True)
    iterations = variable(int, value=10, loggable=True)
    #: nodes (0: every node of the partition)
    nodes = variable(int, value=0)
    valid_systems = ['*']
    valid_prog_environs = ['+mpi']
    records_identity = True
    #: the program, compiled by each stack of a block in its setup
    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'src', 'memcopy.c')
    time_limit = '5m'
    tags = {'acceptance', 'memory', 'ci', 'stacks'}

    @run_after('setup')
    def set_launch(self):
        extras = self.current_partition.extras
        self.executable = self.block_executable(self.stack)
        self.num_tasks_per_node = extras['cores_per_node']
        self.num_tasks = (self.nodes or extras['nodes']) * self.num_tasks_per_node
        self.executable_opts = [str(self.mib), str(self.iterations), str(SMALL_KIB)]

    def block_executable(self, stack):
        return os.path.join(self.stagedir, f'setup-{stack}', 'memcopy')

    def block_setup(self, stack, prefix):
        """memcopy.c compiled with the stack's own compiler, where the job runs."""
        return [{'argv': [self.spec_of(stack).cc, '-O2', '-o', 'memcopy', self.source],
                 'stdout': 'build.out', 'stderr': 'build.out'}]

    def figures(self):
        return {'copy_bw': 'MB/s', 'copy_bw_1MiB': 'MB/s'}

    def verify(self, launch):
        nodes = self.num_tasks // self.num_tasks_per_node
        hosts = sn.extractall(LINE, launch.path(), 1)
        checks = sn.extractall(LINE, launch.path(), 5, int)
        return sn.all([
            sn.assert_eq(sn.count(hosts), 2 * nodes,
                         msg=f'{launch.path()}: expected one "memcopy host=" line per node and size '
                             f'({nodes} nodes)'),
            sn.assert_eq(sn.count(sn.filter(lambda c: c != 1, checks)), 0,
                         msg=f'{launch.path()}: a copy came out wrong (check=0)'),
        ])

    def copy_at(self, launch, nbytes):
        """The smallest node's copy bandwidth at this buffer size."""
        return sn.evaluate(sn.min(sn.extractall(
            rf'^memcopy host=\S+ ranks=\d+ bytes={nbytes} MBps=(\S+) check=\d$', launch.path(), 1, float)))

    def measure(self, launch):
        """The smallest node's copy bandwidth at each size: DRAM-sized and cache-resident."""
        return {'copy_bw': self.copy_at(launch, self.mib << 20), 'copy_bw_1MiB': self.copy_at(launch, SMALL_KIB << 10)}
