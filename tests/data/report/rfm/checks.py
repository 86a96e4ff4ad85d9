"""Tiny checks that follow the results contract (stack, mpi_library, mpi_library_path, repeat_index)
without MPI: each prints numbers scaled by the environment's FAKE_SCALE."""
import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import parameter, performance_function, run_after, sanity_function, variable


class _Contract(rfm.RunOnlyRegressionTest):
    valid_systems = ['*']
    valid_prog_environs = ['commodity', 'vendor']
    repeat_index = parameter(range(3), loggable=True)
    stack = variable(str, value='', loggable=True)
    mpi_library = variable(str, value='', loggable=True)
    mpi_library_path = variable(str, value='', loggable=True)
    executable = 'sh'

    @run_after('setup')
    def _identity(self):
        self.stack = self.current_environ.name
        self.mpi_library = {'commodity': 'Open MPI v4.1.4, package: Debian OpenMPI',
                            'vendor': 'Intel(R) MPI Library 2021.17 for Linux* OS'}[self.stack]
        self.mpi_library_path = f'/opt/{self.stack}/lib/libmpi.so'


@rfm.simple_test
class NetPIPEFake(_Contract):
    @run_after('init')
    def _cmd(self):
        # latency 5 us x scale (+ a little per repeat), bandwidth 9000 MB/s / scale
        self.executable_opts = ['-c', f'"echo lat_8B $(echo "5 * $FAKE_SCALE + 0.1 * {self.repeat_index}" | bc); '
                                f'echo bw_1MiB $(echo "9000 / $FAKE_SCALE + {self.repeat_index}" | bc)"']

    @sanity_function
    def ok(self):
        return sn.assert_found(r'^lat_8B', self.stdout)

    @performance_function('us')
    def lat_8B(self):
        return sn.extractsingle(r'^lat_8B\s+(\S+)', self.stdout, 1, float)

    @performance_function('MB/s')
    def bw_1MiB(self):
        return sn.extractsingle(r'^bw_1MiB\s+(\S+)', self.stdout, 1, float)


@rfm.simple_test
class SkippedFake(_Contract):
    repeat_index = parameter([0], loggable=True)

    @run_after('setup')
    def _skip(self):
        self.skip(f'osu_latency not found for stack {self.current_environ.name!r}: set OSU_BIN_DIR')

    @sanity_function
    def ok(self):
        return True


@rfm.simple_test
class FailingFake(_Contract):
    repeat_index = parameter([0], loggable=True)
    executable_opts = ['-c', '"echo started; echo mpirun noticed that process rank 1 exited >&2; exit 3"']

    @sanity_function
    def ok(self):
        return sn.assert_found(r'^result', self.stdout, msg='expected a result line in rfm_job.out')
