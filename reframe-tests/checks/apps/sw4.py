"""SW4 solve-phase time (geodynamics/sw4 master prints 'time stepping phase', the RAJA branch
'solver phase'; both parsed by stackproof.benchparse.parse_sw4).

Input decks are a parameter: $SW4_DECKS (comma-separated paths) or the small deck shipped in
sw4-inputs/. Binary: the stack's `sw4` benchmark (stack file; built against the stack's own
BLAS/LAPACK, `blas_lapack`); skipped with the reason when the stack has none. Repeated
STACKPROOF_REPEAT times.

Sized by time (`make acceptance`): with `time_target=T` the deck's `time steps=N` is scaled so that the
time stepping takes about T seconds here (the cost per step is fixed by the grid; STEP_SECONDS is the
small deck's step measured on this machine, docs/performance.md); `size_scale` multiplies the steps.
"""
import os

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import parameter, run_after, variable

from stackproof.reframe.check import StackCheck, repeats

STEP_SECONDS = 0.007     # one time step of halfspace-small on 2 ranks here: 60 steps in 0.38-0.48 s (measured)
INPUTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'sw4-inputs')
DECKS = [os.path.abspath(d) for d in os.environ.get('SW4_DECKS', '').split(',') if d] or \
        [os.path.join(INPUTS, 'halfspace-small.in')]


@rfm.simple_test
class SW4Benchmark(StackCheck, rfm.RunOnlyRegressionTest):
    repeat_index = repeats()
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
        # the deck is copied next to the job so its output directory lands in the stage dir
        self.prerun_cmds = [f'cp {self.deck} .']
        if self.time_target > 0:
            steps = max(5, min(100000, round(self.time_target / STEP_SECONDS * self.size_scale)))
            self.prerun_cmds.append(f"sed -i 's/^time steps=[0-9]*/time steps={steps}/' "
                                    f"{os.path.basename(self.deck)}")
        self.executable_opts = [os.path.basename(self.deck)]

    def verify(self):
        self.parse_output('sw4')
        return sn.assert_found(r'program sw4 finished', self.stdout,
                               msg=f'{self.stage_file()}: expected "program sw4 finished" at the end')

    def measure(self):
        result = self.parse_output('sw4')
        return {'solve_time': (result.solve_s, 's'), 'startup_time': (result.startup_s, 's')}
