"""NetPIPE (NPmpi, Debian's netpipe source built for each stack by `stackproof stack build`):
latency and bandwidth over message sizes between two ranks (two nodes when the partition has them).

Performance variables: lat_8B (us, one-way time of 8 bytes) and bw_1MiB (MB/s at 1 MiB); the
whole curve of every launch is kept as netpipe-curve.csv (bytes, usec, MB/s) in its directory for
the report. Launched in blocks (StackCheck). Output parsed by stackproof.stacks.netpipe.
"""
import reframe as rfm
from reframe.core.builtins import run_after, run_before, variable
from reframe.core.exceptions import SanityError

from stackproof import files
from stackproof.reframe.check import StackCheck, blocks
from stackproof.stacks.netpipe import NetpipeError, curve, metrics, parse


@rfm.simple_test
class NetPIPE(StackCheck, rfm.RunOnlyRegressionTest):
    block_index = blocks()
    #: direction of each performance variable (the report never guesses it from the name)
    perf_better = {'lat_*': 'lower', 'bw_*': 'higher'}
    perf_headline = ['lat_8B', 'bw_1MiB']
    perf_curve = ['lat_*', 'bw_*']
    perf_curve_file = 'netpipe-curve.csv'       # each launch's whole curve (write_curve), drawn by the report
    #: smallest and largest message (bytes), repetitions per size (-n: a fixed count keeps the run short)
    lower = variable(int, value=8, loggable=True)
    upper = variable(int, value=1048576, loggable=True)
    repeats = variable(int, value=100, loggable=True)
    valid_systems = ['*']
    valid_prog_environs = ['+mpi']
    records_identity = True
    time_limit = '10m'
    tags = {'acceptance', 'netpipe', 'microbenchmarks', 'ci', 'stacks'}

    @run_after('setup')
    def set_launch(self):
        self.executable = self.stack_binary('netpipe')
        self.num_tasks = 2
        self.num_tasks_per_node = 1 if self.current_partition.extras['nodes'] >= 2 else 2
        # -p 0: no perturbed sizes (powers of two and their neighbours only)
        self.executable_opts = ['-l', str(self.lower), '-u', str(self.upper), '-p', '0',
                                '-n', str(self.repeats), '-o', 'np.out']

    def points(self, launch):
        cache = self.__dict__.setdefault('_np_points', {})
        if launch.dir not in cache:
            path = launch.path('np.out')
            try:        # the job wrote it: read through stackproof.files (Launch.read)
                cache[launch.dir] = parse(launch.read('np.out'))
            except (OSError, files.UnsafePath, NetpipeError) as exc:
                raise SanityError(f'{path}: expected NetPIPE data lines (bytes Mbps seconds): {exc}; '
                                  f'job output: {launch.path()}') from None
        return cache[launch.dir]

    def figures(self):
        return {'lat_8B': 'us', 'bw_1MiB': 'MB/s'}

    def verify(self, launch):
        sizes = [p.bytes for p in self.points(launch)]
        if max(sizes) < self.upper or min(sizes) > self.lower:
            raise SanityError(f"{launch.path('np.out')}: expected sizes {self.lower}..{self.upper} B, "
                              f'got {min(sizes)}..{max(sizes)} B (truncated run?)')
        return True

    @run_before('sanity')
    def write_curve(self):
        """Each launch's whole curve as netpipe-curve.csv for the report (output that does not parse
        writes none: sanity fails on it with the parser's reason)."""
        if self.is_dry_run():
            return
        for launch in self.launch_list():
            try:
                points = self.points(launch)
            except SanityError:
                continue
            text = 'bytes,usec,MBps\n' + ''.join(f'{b},{us:.4f},{mbs:.3f}\n' for b, us, mbs in curve(points))
            with files.Staging(launch.dir) as stage:      # a new file renamed into place (the job's directory)
                stage.write('netpipe-curve.csv', text.encode())
                stage.commit('netpipe-curve.csv', mode=0o644)

    def measure(self, launch):
        return metrics(self.points(launch))
