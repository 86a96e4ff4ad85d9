"""AMG figure of merit: LLNL AMG 1.2 (`amg`, AMG2013 line) and AMG2023 (`amg2023`).

Sizes: `paper` is the TOSS-2020 per-node problem (-n 200 100 100 per rank, -P from the rank count
like MPI_Dims_create: 8 nodes x 40 ranks -> -P 8 8 5), run on remote partitions only and skipped on
partitions whose nodes are emulated on one host (feature `emulated`: the test cluster, the virtual
cluster), where 2 million points per rank on every emulated core would share one host's CPUs and
memory (`-S AMGBenchmark.paper_on_emulated=true` runs it anyway); `ci` is a small problem
(-n 20 20 20 per rank) that finishes in seconds on one node.
Binaries: the stack's `amg` and `amg2023` benchmarks (stack file). A stack without AMG2023 skips
the amg2023 test with the reason (never an AMG 1.2 fallback); the code is recognised from its output,
so an AMG 1.2 binary given as amg2023 fails sanity naming both. Launched in blocks (StackCheck).

Sized by time (`make acceptance`): with `time_target=T` the `ci` grid per rank is scaled so that one
launch's setup + solve takes about T seconds here: the work grows with the points per rank, so the
edge grows with the cube root of T / CI_SECONDS (CI_SECONDS: the ci grid's setup + solve measured on
this machine, docs/performance.md); `size_scale` multiplies the points for a site's faster nodes.
"""
import reframe as rfm
import reframe.utility.typecheck as typ
from reframe.core.builtins import parameter, run_after, variable
from reframe.core.exceptions import SanityError

from stackproof.reframe.check import StackCheck, blocks
from stackproof.reframe.layout import dims_create

CI_SECONDS = 0.45       # setup + solve of the 20^3-per-rank ci grid, 2 ranks, on the 2-core build machine (measured)
CODES = {'amg': 'AMG 1.2 (Figure of Merit (FOM_N))', 'amg2023': 'AMG2023 (Figure of Merit (FOM): ...)'}


@rfm.simple_test
class AMGBenchmark(StackCheck, rfm.RunOnlyRegressionTest):
    block_index = blocks()
    code = parameter(list(CODES), loggable=True)
    size = parameter(['ci', 'paper'], loggable=True)
    #: -problem (AMG 1.2: 1 = AMG-PCG 27-point; AMG2023: 1 = AMG-GMRES 27-point, 2 = AMG-PCG 7-point)
    problem = variable(int, value=1, loggable=True)
    #: per-rank grids (-n)
    paper_grid = variable(typ.List[int], value=[200, 100, 100], loggable=True)
    ci_grid = variable(typ.List[int], value=[20, 20, 20], loggable=True)
    #: nodes (0: the partition's nodes for `paper`, 1 for `ci`) and ranks per node (0: one per core)
    nodes = variable(int, value=0)
    tasks_per_node = variable(int, value=0)
    #: run `paper` on partitions whose nodes are emulated on one host (feature `emulated`) too
    paper_on_emulated = variable(typ.Bool, value=False)
    #: seconds of setup + solve one `ci` launch should take (0: the ci grid as it is)
    time_target = variable(float, value=0.0, loggable=True)
    #: multiplies the points per rank chosen for time_target (a site's nodes are faster than this one)
    size_scale = variable(float, value=1.0, loggable=True)
    #: direction of each performance variable (the report never guesses it from the name)
    perf_better = {'fom': 'higher', 'fom_setup': 'higher', 'fom_solve': 'higher',
                                                      'setup_time': 'lower', 'solve_time': 'lower'}
    perf_headline = ['fom']
    valid_systems = ['*']
    valid_prog_environs = ['+mpi']
    env_vars = {'OMP_NUM_THREADS': '1'}
    # references/<stack>/amg.yaml: this machine's measured figure of merit (testcluster/local), a
    # floor that catches a broken build; a site puts its own per partition
    reference_file = 'amg.yaml'
    records_identity = True
    time_limit = '30m'
    tags = {'acceptance', 'amg', 'apps'}

    @run_after('init')
    def paper_size_on_clusters(self):
        if self.size == 'paper':
            self.valid_systems = ['+remote']

    @run_after('setup')
    def set_launch(self):
        part, extras = self.current_partition, self.current_partition.extras
        if self.size == 'paper' and 'emulated' in part.features and not (self.paper_on_emulated or self.is_dry_run()):
            points = self.paper_grid[0] * self.paper_grid[1] * self.paper_grid[2]
            self.skip(f'size=paper is the per-node problem of real nodes ({points:,} points on each of '
                      f"{extras['cores_per_node']} ranks per node); the {extras['nodes']} node(s) of "
                      f'{part.fullname} are emulated on one host and share its CPUs and memory: size=ci measures '
                      f'the stacks here (-S AMGBenchmark.paper_on_emulated=true runs it anyway)')
        self.executable = self.stack_binary(self.code)
        nodes = self.nodes or (extras['nodes'] if self.size == 'paper' else 1)
        self.num_tasks_per_node = self.tasks_per_node or extras['cores_per_node']
        self.num_tasks = nodes * self.num_tasks_per_node
        grid = self.paper_grid if self.size == 'paper' else self.sized_grid()
        self.executable_opts = (['-n'] + [str(n) for n in grid] + ['-P'] +
                                [str(p) for p in dims_create(self.num_tasks)] + ['-problem', str(self.problem)])

    def sized_grid(self):
        """The ci grid, scaled for time_target and size_scale (edge between 10 and 200 points)."""
        if self.time_target <= 0:
            return list(self.ci_grid)
        f = (self.time_target / CI_SECONDS * self.size_scale) ** (1 / 3)
        return [max(10, min(200, round(n * f))) for n in self.ci_grid]

    def figures(self):
        return {'fom': 'nnz*iter/s', 'fom_setup': 'nnz/s', 'fom_solve': 'nnz*iter/s', 'setup_time': 's',
                'solve_time': 's'}

    def verify(self, launch):
        result = self.parse_output('amg', launch)
        if result.code != self.code:
            raise SanityError(f'{launch.path()}: expected {CODES[self.code]} output, got '
                              f'{CODES[result.code]} output (wrong binary in benchmarks.{self.code}?)')
        return True

    def measure(self, launch):
        result = self.parse_output('amg', launch)
        return {'fom': result.fom, 'fom_setup': result.fom_setup, 'fom_solve': result.fom_solve,
                'setup_time': result.setup_s, 'solve_time': result.solve_s}
