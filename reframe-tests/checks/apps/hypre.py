"""hypre 2.26 BoomerAMG (the `ij` driver): algebraic multigrid setup and solve of a 3-D 7-point
Laplacian, the kernel the AMG benchmark wraps. Built per stack by `stackproof stack build` from
Debian's source archive with the stack's MPI and BLAS/LAPACK (stack benchmark `hypre_ij`).

Sizes: `size` picks the grid per rank from `grid_per_rank` (the global grid is that times the process
grid -P, MPI_Dims_create-style); `ci` (64^3 points per rank) gives the solve and the setup a timed
share well above the launch's start (the times at 40^3: docs/performance.md);
ij has no inner repetitions. Performance: setup and solve
wall-clock times (s) and the iteration count; the final relative residual must reach the tolerance.
Output parsed by stackproof.benchparse.parse_hypre_ij. Launched in blocks (StackCheck).
"""
import reframe as rfm
import reframe.utility.typecheck as typ
from reframe.core.builtins import parameter, run_after, variable
from reframe.core.exceptions import SanityError

from stackproof.reframe.check import StackCheck, blocks
from stackproof.reframe.layout import dims_create


@rfm.simple_test
class HypreBoomerAMG(StackCheck, rfm.RunOnlyRegressionTest):
    block_index = blocks()
    size = parameter(['ci'], loggable=True)
    #: grid points per rank (x, y, z) for each size
    grid_per_rank = variable(typ.Dict[str, typ.List[int]], value={'ci': [64, 64, 64], 'node': [100, 100, 100]})
    tolerance = variable(float, value=1e-8, loggable=True)
    nodes = variable(int, value=1)
    tasks_per_node = variable(int, value=0)
    valid_systems = ['*']
    valid_prog_environs = ['+mpi']
    env_vars = {'OMP_NUM_THREADS': '1', 'OPENBLAS_NUM_THREADS': '1', 'MKL_NUM_THREADS': '1'}
    reference_file = 'hypre.yaml'
    records_identity = True
    time_limit = '20m'
    tags = {'acceptance', 'hypre', 'amg', 'apps'}
    perf_better = {'setup_time': 'lower', 'solve_time': 'lower', 'iterations': 'lower'}
    perf_headline = ['solve_time']

    @run_after('setup')
    def set_launch(self):
        self.executable = self.stack_binary('hypre_ij')
        self.num_tasks_per_node = self.tasks_per_node or self.current_partition.extras['cores_per_node']
        self.num_tasks = self.nodes * self.num_tasks_per_node
        procs = dims_create(self.num_tasks)
        local = self.grid_per_rank[self.size]
        grid = [n * p for n, p in zip(local, procs)]
        self.executable_opts = (['-laplacian', '-n'] + [str(g) for g in grid] + ['-P'] + [str(p) for p in procs] +
                                ['-solver', '0', '-tol', str(self.tolerance)])

    def figures(self):
        return {'setup_time': 's', 'solve_time': 's', 'iterations': ''}

    def verify(self, launch):
        result = self.parse_output('hypre', launch)
        if result.residual > self.tolerance:
            raise SanityError(f'{launch.path()}: final relative residual {result.residual:g} above the '
                              f'tolerance {self.tolerance:g} (BoomerAMG did not converge)')
        return True

    def measure(self, launch):
        result = self.parse_output('hypre', launch)
        return {'setup_time': result.setup_s, 'solve_time': result.solve_s, 'iterations': result.iterations}
