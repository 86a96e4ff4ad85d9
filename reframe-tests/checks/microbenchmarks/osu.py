"""OSU micro-benchmarks of the stack under test (our own run-only library: hpctestlib's OSU is not
in ReFrame 4.10 and downloads OSU 5.9 instead of measuring the stack's build).

Binaries: the stack's `osu` benchmark directory (stack file; e.g. <bench>/libexec/osu-micro-benchmarks/mpi,
searched recursively for osu_*, so the 5.x and 7.x layouts both work); skipped, with the reason, when
the stack has no OSU build. Repeated STACKPROOF_REPEAT times.
One performance variable per message size: lat_<size>B (us) or bw_<size>B (MB/s), directions
declared in `perf_better`. Output of OSU 5.x and 7.x is parsed by stackproof.benchparse.parse_osu.

Sized by time (`make acceptance`): with `full_sweep=false` only the sizes the verdict uses run
(8 B latency and collectives, 1 MiB bandwidth); with `time_target=T` a short probe launch of the same
size measures one iteration and the timed run gets the iterations that fill T seconds (warm-up a
tenth), instead of OSU's fixed counts (10,000 latency iterations; bibw over every size to 4 MiB took
150 s per launch with Intel MPI here).

Nodes emulated on one host (partition feature `emulated`: the test cluster, the virtual cluster):
their nodes share the host's cores, so OSU's fixed counts measure the host's scheduler, not MPI (6
busy-polling allreduce ranks of 3 nodes on 2 CPUs: 15-20 ms per 2-byte call, hours per sweep). There,
unless set, `time_target` is `emulated_time_target` (1 s per launch) and the collectives start at
most one rank per host core in all (one per node over as many nodes as the host has cores) instead
of one per core on every node.
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

from stackproof.gpus.cuda_aware import cuda_aware           # noqa: E402
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
# the message size the verdict reads per benchmark (report: headline sizes 8 B and 1 MiB)
VERDICT_SIZE = {'osu_latency': 8, 'osu_bibw': 1 << 20, 'osu_allreduce': 8, 'osu_allgather': 8}
# probe: (timed, warm-up) iterations, and the awk expression for the seconds of one iteration from
# the probe's value v at size s (latency: a round trip is 2 v us; bibw: 64 messages each way per
# iteration at v MB/s counted over both directions; collectives: v us per call)
PROBE = {'osu_latency': (1000, 100, '2 * v / 1e6'), 'osu_bibw': (5, 1, '2 * 64 * s / (v * 1e6)'),
         'osu_allreduce': (100, 10, 'v / 1e6'), 'osu_allgather': (100, 10, 'v / 1e6')}


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
    #: every message size (the paper's sweep); false: only the size the verdict uses (VERDICT_SIZE)
    full_sweep = variable(typ.Bool, value=True, loggable=True)   # typ.Bool: -S full_sweep=false is False
    #: seconds one timed launch should take (0: OSU's own iteration counts); set by `make acceptance`
    time_target = variable(float, value=0.0, loggable=True)
    #: time_target on partitions whose nodes are emulated on one host (feature `emulated`) when
    #: time_target is 0 (0 here too: OSU's own counts)
    emulated_time_target = variable(float, value=1.0)
    #: where the ranks run: 'on-node' (shared memory) or 'across-nodes' (the network); the references
    #: are indexed on it (a value measured within a node says nothing about the network)
    placement = variable(str, value='', loggable=True)
    #: direction of each performance variable (the report never guesses it from the name)
    perf_better = {'lat_*': 'lower', 'bw_*': 'higher'}
    valid_systems = ['*']
    valid_prog_environs = ['+mpi']
    # references/<stack>/osu.yaml, indexed by benchmark, buffers, placement and partition: this
    # machine's measured medians for testcluster/local with bounds that catch a broken build or
    # transport; a site puts its own per partition (the verdict itself compares the stacks with each
    # other and needs none)
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
        emulated = 'emulated' in self.current_partition.features
        if emulated and self.time_target <= 0:
            self.time_target = self.emulated_time_target
        collective_opts, pt2pt_buffers = BUFFERS[self.buffers]
        size = VERDICT_SIZE[self.benchmark]
        if self.benchmark in COLLECTIVES:
            nodes, per_node = extras['nodes'], extras['cores_per_node']
            if emulated:
                # the emulated nodes share one host's cores: at most one rank per host core in all
                # (more busy-polling ranks than cores measure the scheduler: 3 ranks on 2 CPUs took
                # 4-6 ms per 8-byte allreduce), spread over as many nodes as there are cores
                nodes = min(nodes, per_node)
                per_node = max(1, per_node // nodes)
            nodes = self.collective_nodes or nodes
            self.num_tasks_per_node = self.collective_tasks_per_node or per_node
            self.num_tasks = nodes * self.num_tasks_per_node
            opts = list(self.collective_opts)
            if not self.full_sweep:
                opts = self._without(opts, '-m') + ['-m', f'{size}:{size}']
            self.executable_opts = opts + collective_opts
        else:
            # two ranks on two nodes (the network) when the partition has them, else on one node
            self.num_tasks = 2
            self.num_tasks_per_node = 1 if extras['nodes'] >= 2 else 2
            opts = list(self.pt2pt_opts)
            if not self.full_sweep:
                opts = self._without(opts, '-m') + ['-m', f'{size}:{size}']
            self.executable_opts = opts + pt2pt_buffers
        self.placement = 'on-node' if self.num_tasks <= self.num_tasks_per_node else 'across-nodes'
        if self.time_target > 0:
            # iterations from the probe (shell variables set by the probe's prerun command)
            self.executable_opts = (self._without(self._without(self.executable_opts, '-i'), '-x')
                                    + ['-i', '"$OSU_ITER"', '-x', '"$OSU_WARMUP"'])
        if self.buffers != 'host':
            gpus = self.current_partition.select_devices('gpu')
            self.num_gpus_per_node = min(self.num_tasks_per_node, gpus[0].num_devices if gpus else 1)

    @staticmethod
    def _without(opts, flag):
        """opts without `flag VALUE` (a later -m/-i/-x of ours replaces the user's)."""
        out, skip = [], False
        for o in opts:
            if skip:
                skip = False
            elif o == flag:
                skip = True
            else:
                out.append(o)
        return out

    @run_before('run')
    def probe_iterations(self):
        """A short launch of the same benchmark at the size the run measures (the largest one in a
        sweep), with the same launcher; its time per iteration gives the iterations that fill
        time_target (between 10 and 10^6)."""
        if self.time_target <= 0:
            return
        timed, warm, per_iter = PROBE[self.benchmark]
        size = VERDICT_SIZE[self.benchmark] if not self.full_sweep else self.expected_max_size()
        self.job.num_tasks = self.num_tasks      # ReFrame copies it only when the job is prepared
        launch = self.job.launcher.run_command(self.job)
        opts = ' '.join(self._without(self._without(self._without(list(self.executable_opts), '-m'), '-i'), '-x'))
        self.prerun_cmds = list(self.prerun_cmds) + [
            f'{launch} {self.executable} {opts} -m {size}:{size} -i {timed} -x {warm} > osu-probe.out 2>&1',
            f"OSU_ITER=$(awk -v s={size} -v t={self.time_target} '!/^#/ && $1 == s {{v = $2}} END "
            f"{{ if (v > 0) {{ n = int(t / ({per_iter})); if (n < 10) n = 10; if (n > 1000000) n = 1000000; "
            f"print n }} else print 100 }}' osu-probe.out)",
            'OSU_WARMUP=$(( OSU_ITER / 10 + 1 ))',
            'echo "osu probe: $OSU_ITER timed iterations, $OSU_WARMUP warm-up" >&2']

    @run_after('setup')
    def need_cuda_aware_mpi(self):
        """Device and managed buffers run only when the stack's MPI is CUDA-aware; else skip saying why."""
        if self.buffers == 'host' or self.is_dry_run():
            return
        aware, why = cuda_aware(self.stack, os.pathsep.join(self.stack_bin_dirs))
        self.skip_if(not aware, why)

    def expected_max_size(self):
        if not self.full_sweep:
            return VERDICT_SIZE[self.benchmark]
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
