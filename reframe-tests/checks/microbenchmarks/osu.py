"""OSU micro-benchmarks 5.x/7.x of the stack under test: osu_latency, osu_bibw, osu_allreduce,
osu_allgather, with host, CUDA device or managed buffers. Our own run-only check (hpctestlib's OSU is
not in ReFrame 4.10 and downloads OSU 5.9 instead of measuring the stack's build): the binaries are
the stack's `osu` benchmark directory, searched for osu_* (5.x and 7.x layouts); output parsed by
stackproof.benchparse.parse_osu; one performance variable per message size, lat_<size> (us) or
bw_<size> (MB/s), sizes named like NetPIPE's (lat_8B, bw_1MiB: benchparse.size_label). Launched in
blocks (StackCheck: each job runs every stack's launches in alternating order).

Sized by time (`make acceptance`): with `full_sweep=false` only the size the verdict uses runs (8 B
latency and collectives, 1 MiB bandwidth); with `time_target=T` a short probe launch at that size
(once per stack and block, before the block's launches) measures one iteration and the timed
launches get the iterations that fill T seconds, instead of OSU's
fixed counts (bibw over every size to 4 MiB took minutes per launch with Intel MPI: docs/performance.md).

Nodes emulated on one host (feature `emulated`: the test and virtual clusters) share its cores, so
OSU's fixed counts measure the host's scheduler (more busy-polling allreduce ranks than CPUs:
docs/performance.md): there `time_target` defaults to `emulated_time_target` and the collectives start at most
one rank per host core in all.
"""
import os

import reframe as rfm
import reframe.utility.typecheck as typ
from reframe.core.builtins import parameter, run_after, variable
from reframe.core.exceptions import SanityError

from stackproof.benchparse import size_label
from stackproof.gpus.cuda_aware import cuda_aware
from stackproof.reframe.check import StackCheck, blocks

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
PT2PT_SIZES = (1, 4194304)     # osu_latency / osu_bibw default range (OSU 5.x latency prints 0 too)
# the message size the verdict reads per benchmark (report: headline sizes 8 B and 1 MiB)
VERDICT_SIZE = {'osu_latency': 8, 'osu_bibw': 1 << 20, 'osu_allreduce': 8, 'osu_allgather': 8}
# probe: (timed, warm-up) iterations, and the awk expression for the seconds of one iteration from
# the probe's value v at size s (latency: a round trip is 2 v us; bibw: 64 messages each way per
# iteration at v MB/s counted over both directions; collectives: v us per call)
# The probe's iterations for time_target: n = t / (one iteration) within [10, 10^6] (100 when the probe
# printed nothing for the size), warm-up n / 10 + 1; printed as two words for the block launcher.
PROBE_AWK = ('!/^#/ && $1 == s {{ v = $2 }} END {{ if (v > 0) {{ n = int(t / ({per_iter})); if (n < 10) n = 10; '
             'if (n > 1000000) n = 1000000 }} else n = 100; print n, int(n / 10) + 1 }}')
PROBE = {'osu_latency': (1000, 100, '2 * v / 1e6'), 'osu_bibw': (5, 1, '2 * 64 * s / (v * 1e6)'),
         'osu_allreduce': (100, 10, 'v / 1e6'), 'osu_allgather': (100, 10, 'v / 1e6')}


def without(opts, flag):
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


@rfm.simple_test
class OSUBenchmark(StackCheck, rfm.RunOnlyRegressionTest):
    block_index = blocks()
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
    perf_headline = ['lat_8B', 'bw_1MiB']
    perf_curve = ['lat_*', 'bw_*']
    valid_systems = ['*']
    valid_prog_environs = ['+mpi']
    # references/<stack>/osu.yaml, by benchmark, buffers, placement and partition: bounds that catch a
    # broken build or transport (the verdict compares the stacks with each other and needs none)
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
        if self.buffers != 'host' and not self.is_dry_run():
            # device and managed buffers run only when the stack's MPI is CUDA-aware
            aware, why = cuda_aware(self.stack, os.pathsep.join(self.stack_bin_dirs))
            self.skip_if(not aware, why)
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
                # (more busy-polling ranks than cores measure the scheduler, docs/performance.md),
                # spread over as many nodes as there are cores
                nodes = min(nodes, per_node)
                per_node = max(1, per_node // nodes)
            self.num_tasks_per_node = self.collective_tasks_per_node or per_node
            self.num_tasks = (self.collective_nodes or nodes) * self.num_tasks_per_node
            opts, buffer_opts = list(self.collective_opts), collective_opts
        else:
            # two ranks on two nodes (the network) when the partition has them, else on one node
            self.num_tasks = 2
            self.num_tasks_per_node = 1 if extras['nodes'] >= 2 else 2
            opts, buffer_opts = list(self.pt2pt_opts), pt2pt_buffers
        if not self.full_sweep:
            opts = without(opts, '-m') + ['-m', f'{size}:{size}']
        self.executable_opts = opts + buffer_opts
        self.placement = 'on-node' if self.num_tasks <= self.num_tasks_per_node else 'across-nodes'
        if self.time_target > 0:
            # iterations from the probe (block_setup: the block launcher's values of this stack)
            self.executable_opts = (without(without(self.executable_opts, '-i'), '-x')
                                    + ['-i', '{OSU_ITER}', '-x', '{OSU_WARMUP}'])
        if self.buffers != 'host':
            gpus = self.current_partition.select_devices('gpu')
            self.num_gpus_per_node = min(self.num_tasks_per_node, gpus[0].num_devices if gpus else 1)

    def block_setup(self, stack, prefix):
        """A short launch of the same benchmark at the size the run measures (the largest one in a
        sweep), with the stack's launcher; its time per iteration gives the iterations that fill
        time_target (PROBE_AWK), for every launch of the stack in the block."""
        if self.time_target <= 0:
            return []
        timed, warm, per_iter = PROBE[self.benchmark]
        size = self.sizes()[-1]
        exe = self.executable if stack == self.stack else self.block_executable(stack)
        opts = without(without(without(list(self.executable_opts), '-m'), '-i'), '-x')
        return [{'argv': prefix + [exe, *opts, '-m', f'{size}:{size}', '-i', str(timed), '-x', str(warm)],
                 'stdout': 'osu-probe.out', 'stderr': 'osu-probe.out'},
                {'argv': ['awk', '-v', f's={size}', '-v', f't={self.time_target:g}',
                          PROBE_AWK.format(per_iter=per_iter), 'osu-probe.out'],
                 'capture': ['OSU_ITER', 'OSU_WARMUP'], 'stderr': 'osu-probe.err'}]

    def sizes(self):
        """The message sizes a launch measures: the verdict's, or every power of two of the sweep."""
        if not self.full_sweep:
            return [VERDICT_SIZE[self.benchmark]]
        opts = self.collective_opts if self.benchmark in COLLECTIVES else self.pt2pt_opts
        lo, hi = (2, 4194304) if self.benchmark in COLLECTIVES else PT2PT_SIZES
        if '-m' in opts and opts.index('-m') + 1 < len(opts):
            bounds = opts[opts.index('-m') + 1].split(':')
            lo, hi = (int(bounds[0]) if len(bounds) > 1 and bounds[0] else lo), int(bounds[-1])
        return [1 << k for k in range(max(lo, 1).bit_length() - 1, hi.bit_length()) if lo <= 1 << k <= hi]

    def figures(self):
        bandwidth = self.benchmark == 'osu_bibw'
        return {f"{'bw' if bandwidth else 'lat'}_{size_label(s)}": 'MB/s' if bandwidth else 'us' for s in self.sizes()}

    def verify(self, launch):
        result = self.parse_output('osu', launch)
        path = launch.path()
        if result.benchmark != TITLES[self.benchmark]:
            raise SanityError(f'{path}: expected the output of {self.benchmark} (title '
                              f'{TITLES[self.benchmark]!r}), got {result.benchmark!r}')
        last = max(result.rows)
        if last != self.sizes()[-1]:
            raise SanityError(f'{path}: expected message sizes up to {self.sizes()[-1]} B, '
                              f'the last row is {last} B (truncated run?)')
        return True

    def measure(self, launch):
        """One figure per message size found in the output."""
        result = self.parse_output('osu', launch)
        prefix = 'bw' if result.metric == 'bandwidth' else 'lat'
        return {f'{prefix}_{size_label(size)}': value for size, value in result.values().items()}
