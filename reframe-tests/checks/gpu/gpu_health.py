"""GPU health beyond a device query (partitions with `+gpu +cuda`): a verified kernel on every GPU
and a verified copy between every ordered GPU pair (peer-to-peer where supported), with the
copy bandwidth as performance variables. Built from our source with the stack's nvcc."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..', 'lib'))

import reframe as rfm                                   # noqa: E402
import reframe.utility.sanity as sn                     # noqa: E402
from reframe.core.builtins import (performance_function, run_after,   # noqa: E402
                                   sanity_function, variable)

from stackproof_rfm import StackproofMixin              # noqa: E402

COPY = r'^copy (\d+)->(\d+) p2p (yes|no) (ok|FAIL) GB/s (\S+)$'


@rfm.simple_test
class GPUHealth(StackproofMixin, rfm.RegressionTest):
    #: bytes per copy, in MiB
    copy_mib = variable(int, value=64)
    valid_systems = ['+gpu +cuda']
    valid_prog_environs = ['+cuda']
    sourcepath = 'gpu_health.cu'
    build_system = 'SingleSource'
    num_tasks = 1
    num_tasks_per_node = 1
    time_limit = '10m'
    tags = {'acceptance', 'gpu', 'health'}

    @run_after('setup')
    def set_build(self):
        gpu = self.current_partition.select_devices('gpu')[0]
        self.num_devices = gpu.num_devices
        self.num_gpus_per_node = gpu.num_devices
        self.build_system.cxxflags = ['-O2'] + ([f'-arch={gpu.arch}'] if gpu.arch else [])
        self.executable_opts = [str(self.copy_mib)]

    @sanity_function
    def validate(self):
        n = self.num_devices
        pairs = sn.extractall(COPY, self.stdout, tag=(1, 2, 4))
        return sn.all([
            sn.assert_eq(sn.extractsingle(r'^gpu_health: devices (\d+)', self.stdout, 1, int), n,
                         msg=f'{self.stage_file()}: expected {{1}} GPUs visible, the job saw {{0}}'),
            sn.assert_eq(sn.count(sn.extractall(r'^kernel device \d+ ok', self.stdout)), n,
                         msg=f'{self.stage_file()}: expected a verified kernel on each of the {n} GPUs'),
            sn.assert_eq(sn.count(sn.filter(lambda p: p[2] == 'ok', pairs)), n * (n - 1),
                         msg=f'{self.stage_file()}: expected {n * (n - 1)} verified GPU-to-GPU copies'),
            sn.assert_found(r'^gpu_health: PASS$', self.stdout,
                            msg=f'{self.stage_file()}: expected "gpu_health: PASS"'),
        ])

    @performance_function('GB/s')
    def min_copy_bw(self):
        return sn.min(sn.extractall(COPY, self.stdout, 5, float))

    @performance_function('GB/s')
    def max_copy_bw(self):
        return sn.max(sn.extractall(COPY, self.stdout, 5, float))
