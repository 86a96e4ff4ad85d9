"""Tiny checks that follow the results contract (stack, mpi_library, mpi_library_path, repeat_index,
skip_reason) without MPI: each prints numbers scaled by the environment's FAKE_SCALE. They predate
blocks of launches: one launch per test case, as reports of plain ReFrame checks are read."""
import reframe as rfm
import reframe.utility.typecheck as typ
import reframe.utility.sanity as sn
from reframe.core.builtins import parameter, performance_function, run_after, sanity_function, variable


class _Contract(rfm.RunOnlyRegressionTest):
    valid_systems = ['*']
    valid_prog_environs = ['commodity', 'vendor']
    repeat_index = parameter(range(5), loggable=True)     # 5 + 5 launches: p = 2/252 reaches 5 % over the report
    stack = variable(str, value='', loggable=True)
    mpi_library = variable(str, value='', loggable=True)
    mpi_library_path = variable(str, value='', loggable=True)
    #: why the case skipped itself (ReFrame's JSON keeps no skip message)
    skip_reason = variable(str, value='', loggable=True)
    #: the direction of each performance variable, declared by the check (the report never guesses it)
    perf_better = variable(typ.Dict[str, str], value={}, loggable=True)
    #: the curve roles (StackCheck's contract): per-size variables, and a file with the whole curve
    perf_curve = variable(typ.List[str], value=[], loggable=True)
    perf_curve_file = variable(str, value='', loggable=True)
    executable = 'sh'

    @run_after('setup')
    def _identity(self):
        self.stack = self.current_environ.name
        self.mpi_library = {'commodity': 'Open MPI v4.1.4, package: Debian OpenMPI',
                            'vendor': 'Intel(R) MPI Library 2021.17 for Linux* OS'}[self.stack]
        self.mpi_library_path = f'/opt/{self.stack}/lib/libmpi.so'


@rfm.simple_test
class NetPIPEFake(_Contract):
    perf_better = {'lat_*': 'lower', 'bw_*': 'higher'}
    """Latency 5 us x scale (+0.1 us per repeat), bandwidth 9000 MB/s / scale (+1 per repeat); the
    whole curve in netpipe-curve.csv as the NetPIPE check writes it (bytes,usec,MBps)."""
    keep_files = ['netpipe-curve.csv']
    perf_curve = ['lat_*', 'bw_*']
    perf_curve_file = 'netpipe-curve.csv'

    @run_after('init')
    def _cmd(self):
        r = self.repeat_index
        self.executable = 'awk'
        self.executable_opts = [
            f"'BEGIN {{ s = ENVIRON[\"FAKE_SCALE\"]; r = {r};"
            ' printf "lat_8B %.3f\\nbw_1MiB %.3f\\n", 5 * s + 0.1 * r, 9000 / s + r;'
            ' print "bytes,usec,MBps" > "netpipe-curve.csv";'
            ' for (b = 1; b <= 1048576; b *= 4) {'
            '   t = (5 * s + 0.1 * r + b / (9000 / s + r)) * 1e-6;'
            '   printf "%d,%.4f,%.3f\\n", b, t * 1e6, b / t / 1e6 > "netpipe-curve.csv" } }\'']

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
class MemoryBandwidth(_Contract):
    perf_better = {'copy_bw': 'higher'}
    """The node's memory-copy bandwidth: 20000 MB/s whatever the stack."""
    executable_opts = ['-c', '"echo copy_bw 20000"']

    @sanity_function
    def ok(self):
        return sn.assert_found(r'^copy_bw', self.stdout)

    @performance_function('MB/s')
    def copy_bw(self):
        return sn.extractsingle(r'^copy_bw\s+(\S+)', self.stdout, 1, float)


@rfm.simple_test
class SkippedFake(_Contract):
    repeat_index = parameter([0], loggable=True)

    @run_after('setup')
    def _skip(self):
        self.skip_reason = f'osu_latency not found for stack {self.current_environ.name!r}: set OSU_BIN_DIR'
        self.skip(self.skip_reason)

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
