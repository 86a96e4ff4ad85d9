"""OSU micro-benchmarks of the stack under test (our own run-only library: hpctestlib's OSU is not
in ReFrame 4.10 and downloads OSU 5.9 instead of measuring the stack's build).

Binaries: the stack's `osu` benchmark directory (stack file; e.g. <bench>/libexec/osu-micro-benchmarks/mpi,
searched recursively for osu_*, so the 5.x and 7.x layouts both work); skipped, with the reason, when
the stack has no OSU build. Repeated STACKPROOF_REPEAT times.
One performance variable per message size: lat_<size>B (us) or bw_<size>B (MB/s).
Output of OSU 5.x and 7.x is parsed by stackproof.benchparse.parse_osu.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..', 'lib'))

import reframe as rfm                                   # noqa: E402
import reframe.utility.sanity as sn                     # noqa: E402
import reframe.utility.typecheck as typ                 # noqa: E402
from reframe.core.builtins import (parameter, run_after, run_before,   # noqa: E402
                                   sanity_function, variable)
from reframe.core.exceptions import SanityError         # noqa: E402

from stackproof.cuda_aware import cuda_aware           # noqa: E402
from stackproof_rfm import Repeated, StackproofMixin    # noqa: E402

# buffer kind -> (collective options, point-to-point positional buffer arguments)
BUFFERS = {
    'host': ([], []),
    'cuda-device': (['-d', 'cuda'], ['D', 'D']),
    'cuda-managed': (['-d', 'managed'], ['M', 'M']),
}
# the benchmark's title as printed ('# OSU MPI <title> Test vX.Y')
TITLES = {'osu_latency': 'MPI Latency Test', 'osu_bibw': 'MPI Bi-Directional Bandwidth Test',
          'osu_allreduce': 'MPI Allreduce Latency Test', 'osu_allgather': 'MPI Allgather Latency Test'}
COLLECTIVES = ('osu_allgather', 'osu_allreduce')
PT2PT_MAX_SIZE = 4194304     # osu_latency / osu_bibw default range ends at 4 MiB


@rfm.simple_test
class OSUBenchmark(StackproofMixin, Repeated, rfm.RunOnlyRegressionTest):
    benchmark = parameter(['osu_latency', 'osu_bibw', 'osu_allreduce', 'osu_allgather'], loggable=True)
    buffers = parameter(list(BUFFERS), loggable=True)
    #: options of the collectives (the paper's runs)
    collective_opts = variable(typ.List[str], value=['-m', '2:4194304', '-x', '20', '-f'], loggable=True)
    #: options of osu_latency / osu_bibw (e.g. -i 1000 -x 100: fewer iterations for a short run)
    pt2pt_opts = variable(typ.List[str], value=[], loggable=True)
    #: nodes and tasks per node of the collectives (0: every node / one task per core)
    collective_nodes = variable(int, value=0)
    collective_tasks_per_node = variable(int, value=0)
    valid_systems = ['*']
    valid_prog_environs = ['+mpi']
    reference_file = 'osu.yaml'
    records_identity = True
    time_limit = '20m'
    tags = {'acceptance', 'osu', 'microbenchmarks'}

    @run_after('init')
    def gate_gpu_buffers(self):
        if self.buffers != 'host':
            self.valid_systems = ['+gpu +cuda']
            self.valid_prog_environs = ['+mpi +cuda']
            self.tags |= {'gpu'}

    @run_after('setup')
    def set_launch(self):
        self.executable = self.stack_binary('osu', pattern=self.benchmark)
        extras = self.current_partition.extras
        collective_opts, pt2pt_buffers = BUFFERS[self.buffers]
        if self.benchmark in COLLECTIVES:
            self.num_tasks_per_node = self.collective_tasks_per_node or extras['cores_per_node']
            self.num_tasks = (self.collective_nodes or extras['nodes']) * self.num_tasks_per_node
            self.executable_opts = list(self.collective_opts) + collective_opts
        else:
            # two ranks on two nodes (the network) when the partition has them, else on one node
            self.num_tasks = 2
            self.num_tasks_per_node = 1 if extras['nodes'] >= 2 else 2
            self.executable_opts = list(self.pt2pt_opts) + pt2pt_buffers
        if self.buffers != 'host':
            gpus = self.current_partition.select_devices('gpu')
            self.num_gpus_per_node = min(self.num_tasks_per_node, gpus[0].num_devices if gpus else 1)

    @run_after('setup')
    def need_cuda_aware_mpi(self):
        """Device and managed buffers run only when the stack's MPI is CUDA-aware; else skip saying why."""
        if self.buffers == 'host' or self.is_dry_run():
            return
        aware, why = cuda_aware(self.stack, os.pathsep.join(self.stack_bin_dirs))
        self.skip_if(not aware, why)

    def expected_max_size(self):
        if self.benchmark in COLLECTIVES and '-m' in self.collective_opts:
            return int(self.collective_opts[self.collective_opts.index('-m') + 1].split(':')[-1])
        return PT2PT_MAX_SIZE

    @sn.deferrable
    def output_matches(self):
        result = self.parse_output('osu')
        path = self.stage_file()
        if result.benchmark != TITLES[self.benchmark]:
            raise SanityError(f'{path}: expected the output of {self.benchmark} (title '
                              f'{TITLES[self.benchmark]!r}), got {result.benchmark!r}')
        last = max(result.rows)
        if last != self.expected_max_size():
            raise SanityError(f'{path}: expected message sizes up to {self.expected_max_size()} B, '
                              f'the last row is {last} B (truncated run?)')
        return True

    @sanity_function
    def validate(self):
        return sn.all([self.identity_sanity(), self.output_matches()])

    @run_before('performance')
    def set_perf_variables(self):
        """One performance variable per message size found in the output."""
        if self.is_dry_run():
            return
        result = self.parse_output('osu')
        prefix = 'bw' if result.metric == 'bandwidth' else 'lat'
        self.set_perf_values({f'{prefix}_{size}B': (value, result.unit) for size, value in result.values().items()})
