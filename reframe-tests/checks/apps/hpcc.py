"""HPC Challenge 1.5.0 (HPL, DGEMM, STREAM, PTRANS, RandomAccess, FFT, b_eff), built per stack by
`stackproof stack build` from Debian's source archive with the stack's MPI and BLAS/LAPACK (MKL for
the vendor stack, OpenBLAS for the commodity one), so the comparison measures the math library too.

Sizes: `size` picks the HPL matrix order from `hpl_n` (HPCC derives the other tests' sizes from it:
RandomAccess's table, PTRANS, FFT, STREAM and DGEMM grow with N); `ci` (N = 1000) is solved
`hpl_repeat` (12) times in the launch and reported as the median run, so one daemon wake-up does not
make the figure; N is small enough that a comparison in blocks can pay its launch 16 times (the
measured launch times at N = 1000, 1500, 2000 and 4000, most of them MPIRandomAccess's:
docs/performance.md, "Blocks of launches").
StarDGEMM and STREAM have no repetition knob: DGEMM is one call sized from the same memory, STREAM the
best of its own 10 passes. The input file hpccinf.txt is written into the
directory of each launch (P x Q: the most square grid of the ranks). Output: hpccoutf.txt in the
launch's directory, parsed by stackproof.benchparse.parse_hpcc. Binary: the stack's `hpcc` benchmark
(skipped, saying how to build it, when the stack has none). Launched in blocks (StackCheck).
"""

import reframe as rfm
import reframe.utility.typecheck as typ
from reframe.core.builtins import parameter, run_after, variable
from reframe.core.exceptions import SanityError

from stackproof import files
from stackproof.benchparse import HPCC_METRICS
from stackproof.reframe.check import StackCheck, blocks
from stackproof.reframe.layout import dims_create
from stackproof.stacks.hpccinput import hpcc_input

#: the performance variables reported (of HPCC_METRICS) and which way is better
PERF_BETTER = {'hpl': 'higher', 'dgemm_star': 'higher', 'dgemm_single': 'higher',
               'stream_triad_star': 'higher', 'stream_triad_single': 'higher', 'ptrans': 'higher',
               'randomaccess_mpi': 'higher', 'fft_mpi': 'higher', 'beff_latency': 'lower',
               'beff_bandwidth': 'higher', 'ring_bandwidth': 'higher'}


def process_grid(ntasks):
    """HPL's P x Q: the most square factorisation with P <= Q."""
    dims = dims_create(ntasks, 2)
    return min(dims), max(dims)


@rfm.simple_test
class HPCCBenchmark(StackCheck, rfm.RunOnlyRegressionTest):
    block_index = blocks()
    size = parameter(['ci'], loggable=True)
    #: HPL matrix order per size (HPCC sizes PTRANS, STREAM, RandomAccess and FFT from the same memory)
    hpl_n = variable(typ.Dict[str, int], value={'ci': 1000, 'node': 20000})
    #: HPL runs of the same problem in one launch (inner repetitions; `hpl` is their median)
    hpl_repeat = variable(int, value=12, loggable=True)
    block = variable(int, value=96, loggable=True)
    #: nodes and ranks per node (0: one per core)
    nodes = variable(int, value=1)
    tasks_per_node = variable(int, value=0)
    valid_systems = ['*']
    valid_prog_environs = ['+mpi']
    # one thread per rank: the ranks already fill the cores (threaded BLAS would oversubscribe them)
    env_vars = {'OMP_NUM_THREADS': '1', 'OPENBLAS_NUM_THREADS': '1', 'MKL_NUM_THREADS': '1'}
    reference_file = 'hpcc.yaml'
    records_identity = True
    time_limit = '20m'
    tags = {'acceptance', 'hpcc', 'apps'}
    perf_better = PERF_BETTER
    perf_headline = ['hpl', 'dgemm_star', 'stream_triad_star']

    @run_after('setup')
    def set_launch(self):
        self.executable = self.stack_binary('hpcc')
        self.num_tasks_per_node = self.tasks_per_node or self.current_partition.extras['cores_per_node']
        self.num_tasks = self.nodes * self.num_tasks_per_node
        if self.size not in self.hpl_n:
            self.skip(f'size {self.size!r} has no HPL order in hpl_n ({sorted(self.hpl_n)})')

    def prepare_launch_dir(self, path):
        p, q = process_grid(self.num_tasks)
        # the stage directory may be on a share the nodes write: a new file renamed into place (files)
        with files.Staging(path) as stage:
            stage.write('hpccinf.txt', hpcc_input(self.hpl_n[self.size], self.block, p, q,
                                                  "written by stackproof's hpcc check", self.hpl_repeat).encode())
            stage.commit('hpccinf.txt', mode=0o644)

    def figures(self):
        units = {name: unit for name, unit, _factor in HPCC_METRICS.values()}
        return {name: units[name] for name in PERF_BETTER}

    def verify(self, launch):
        result = self.parse_output('hpcc', launch, 'hpccoutf.txt')
        if not result.success:
            raise SanityError(f"{launch.path('hpccoutf.txt')}: HPCC reports failure (Success=0 or an HPL "
                              'residual check failed): the numbers are not valid')
        if result.procs != self.num_tasks:
            raise SanityError(f"{launch.path('hpccoutf.txt')}: {result.procs} ranks ran, "
                              f'{self.num_tasks} were launched')
        return True

    def measure(self, launch):
        result = self.parse_output('hpcc', launch, 'hpccoutf.txt')
        return {name: result.values.get(name) for name in PERF_BETTER}
