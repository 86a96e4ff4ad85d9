# What public suites expect of a site (hpctestlib's numpy check, cscs StreamTest): environments
# `builtin` and `default`, a `python` with numpy in them, partitions with processor caches.
import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import sanity_function


@rfm.simple_test
class site_conventions_check(rfm.RunOnlyRegressionTest):
    valid_systems = ['*']
    valid_prog_environs = ['builtin', 'default']
    executable = 'python'
    executable_opts = ['-c', '"import numpy; print(\'numpy\', numpy.__version__)"']

    @sanity_function
    def validate(self):
        proc = self.current_partition.processor
        return sn.all([sn.assert_found(r'numpy \d', self.stdout),
                       sn.assert_true(proc.topology.get('caches'), msg='partition processor has no caches'),
                       sn.assert_true(proc.num_cpus, msg='partition processor has no num_cpus')])
