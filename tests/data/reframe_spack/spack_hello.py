# A check in the style of public suites (ReFrame's tutorial "Spack build system", CSCS, EESSI):
# `build_system = 'Spack'`, `valid_prog_environs = ['default']`, `spack` taken from PATH.
# tests/test_reframe_spack.py runs it after `eval "$(stackproof spack env)"`.
import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import run_before, sanity_function


@rfm.simple_test
class spack_zlib_check(rfm.RegressionTest):
    descr = 'Build zlib with the site Spack from its offline mirror and run its example'
    valid_systems = ['*']
    valid_prog_environs = ['default']
    build_system = 'Spack'
    executable = 'sh'
    executable_opts = ['-c', '"ls $(spack location -i zlib)/lib/libz.so* && echo zlib-ok"']
    time_limit = '30m'

    @run_before('compile')
    def setup_build_system(self):
        self.build_system.specs = ['zlib']

    @sanity_function
    def validate(self):
        return sn.assert_found(r'zlib-ok', self.stdout)
