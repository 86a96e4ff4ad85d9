"""MPI start-up with each stack's own hello (built by `stackproof stack build`) and launcher: every
rank reports once, the world size is right and an allreduce over all ranks adds up; the identity
probe, run with the same launcher, proves each rank used the stack's own MPI library (version and
resolved path, from the stack file). Binding-free, so it runs on any system (the local one included)."""
import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import run_after

from stackproof.reframe.check import StackCheck


@rfm.simple_test
class MPIHello(StackCheck, rfm.RunOnlyRegressionTest):
    valid_systems = ['*']
    valid_prog_environs = ['+mpi']
    records_identity = True
    time_limit = '5m'
    tags = {'acceptance', 'mpi', 'ci', 'stacks'}

    @run_after('setup')
    def one_rank_per_core(self):
        self.executable = self.stack_binary('hello')
        self.num_tasks_per_node = int(self.profile_env['STACKPROOF_APP_CORES'])
        self.num_tasks = self.num_tasks_per_node

    def verify(self, launch):
        line = r'^rank (\d+) of (\d+) on \S+ cpu \d+ sum (\d+)$'
        ranks = sn.extractall(line, self.stdout, 1, int)
        sizes = sn.extractall(line, self.stdout, 2, int)
        sums = sn.extractall(line, self.stdout, 3, int)
        return sn.all([
            sn.assert_eq(sn.sorted(ranks), list(range(self.num_tasks)),
                         msg=f'{self.stage_file()}: expected one line from each rank 0..{self.num_tasks - 1}'),
            sn.assert_eq(sn.count(sn.filter(lambda s: s != self.num_tasks, sizes)), 0,
                         msg=f'{self.stage_file()}: expected world size {self.num_tasks} on every rank'),
            sn.assert_eq(sn.count(sn.filter(lambda s: s != self.num_tasks, sums)), 0,
                         msg=f'{self.stage_file()}: expected the allreduce sum {self.num_tasks} on every rank'),
        ])
