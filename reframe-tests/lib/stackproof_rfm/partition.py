"""FitsPartition: a job that needs more nodes than the partition has is skipped before it is
submitted (it would pend forever: Slurm's `PartitionConfig`); the partition's node count is its
`extras.nodes` (on the test cluster: the running cluster's)."""
import reframe as rfm
from reframe.core.builtins import run_before


def nodes_needed(num_tasks, num_tasks_per_node):
    if not num_tasks or num_tasks <= 0:
        return 1
    per_node = num_tasks_per_node or 1
    return -(-num_tasks // per_node)


class FitsPartition(rfm.RegressionTestPlugin):
    @run_before('run')
    def _fits_partition(self):
        have = self.current_partition.extras.get('nodes')
        need = nodes_needed(self.num_tasks, self.num_tasks_per_node)
        if have and need > have:
            self.skip(f'needs {need} nodes ({self.num_tasks} tasks, {self.num_tasks_per_node} per node); '
                      f'{self.current_partition.fullname} has {have}')
