"""SW4 solve-phase time (geodynamics/sw4 master prints 'time stepping phase', the RAJA branch
'solver phase'; both parsed by stackproof.benchparse.parse_sw4).

Input decks are a parameter: $SW4_DECKS (comma-separated paths) or the small deck shipped in
sw4-inputs/. Binary: the stack's `sw4` benchmark (stack file; built against the stack's own
BLAS/LAPACK, `blas_lapack`); skipped with the reason when the stack has none. Launched in blocks
(StackCheck): each launch reads its own copy of the deck in its directory.

Sized by time (`make acceptance`): with `time_target=T` the deck's `time steps=N` is scaled so that the
time stepping takes about T seconds here (the cost per step is fixed by the grid; STEP_SECONDS is the
small deck's step measured on this machine, docs/performance.md); `size_scale` multiplies the steps.
"""
import os
import re

import reframe as rfm
from reframe.core.builtins import parameter, run_after, variable
from reframe.core.exceptions import SanityError

from stackproof.reframe.check import StackCheck, blocks

STEP_SECONDS = 0.007     # one time step of halfspace-small on 2 ranks (measured: docs/performance.md)
INPUTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'sw4-inputs')
DECKS = [os.path.abspath(d) for d in os.environ.get('SW4_DECKS', '').split(',') if d] or \
        [os.path.join(INPUTS, 'halfspace-small.in')]


@rfm.simple_test
class SW4Benchmark(StackCheck, rfm.RunOnlyRegressionTest):
    block_index = blocks()
    deck = parameter(DECKS, loggable=True,
                     fmt=lambda path: os.path.splitext(os.path.basename(path))[0])
    #: nodes and ranks per node (0: one per core)
    nodes = variable(int, value=1)
    tasks_per_node = variable(int, value=0)
    #: seconds the time stepping of one launch should take (0: the deck's own steps)
    time_target = variable(float, value=0.0, loggable=True)
    #: multiplies the steps chosen for time_target
    size_scale = variable(float, value=1.0, loggable=True)
    #: direction of each performance variable (the report never guesses it from the name)
    perf_better = {'solve_time': 'lower', 'startup_time': 'lower'}
    perf_headline = ['solve_time']
    valid_systems = ['*']
    valid_prog_environs = ['+mpi']
    env_vars = {'OMP_NUM_THREADS': '1'}
    reference_file = 'sw4.yaml'
    records_identity = True
    time_limit = '30m'
    tags = {'acceptance', 'sw4', 'apps'}

    @run_after('setup')
    def set_launch(self):
        self.executable = self.stack_binary('sw4')
        self.num_tasks_per_node = self.tasks_per_node or self.current_partition.extras['cores_per_node']
        self.num_tasks = self.nodes * self.num_tasks_per_node
        self.executable_opts = [os.path.basename(self.deck)]

    def prepare_launch_dir(self, path):
        """The deck, next to the launch so its output directory lands there; with time_target its
        `time steps=` scaled to fill it."""
        with open(self.deck, errors='replace') as fh:
            text = fh.read()
        if self.time_target > 0:
            steps = max(5, min(100000, round(self.time_target / STEP_SECONDS * self.size_scale)))
            text = re.sub(r'(?m)^time steps=[0-9]*', f'time steps={steps}', text)
        with open(os.path.join(path, os.path.basename(self.deck)), 'w') as fh:
            fh.write(text)

    def figures(self):
        return {'solve_time': 's', 'startup_time': 's'}

    def verify(self, launch):
        self.parse_output('sw4', launch)
        with open(launch.path(), errors='replace') as fh:
            if 'program sw4 finished' not in fh.read():
                raise SanityError(f'{launch.path()}: expected "program sw4 finished" at the end')
        return True

    def measure(self, launch):
        result = self.parse_output('sw4', launch)
        return {'solve_time': result.solve_s, 'startup_time': result.startup_s}
