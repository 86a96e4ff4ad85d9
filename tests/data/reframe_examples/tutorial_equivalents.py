# Checks written the way ReFrame 4.10's tutorial writes them, for the tutorial checks the
# reframe-hpc wheel cannot run here: its MPI example (examples/tutorial/mpi/osu.py) downloads the OSU
# benchmarks from the internet, and its reference example (examples/howto/reference_index.py) holds
# bandwidths of CSCS hardware. Nothing here knows about stackproof: only `*` systems, `+mpi`,
# `+openmp`, `omp_flag` and the partition's processor info, as a third-party check would.
import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import performance_function, run_before, sanity_function


@rfm.simple_test
class hello_any_environ(rfm.RunOnlyRegressionTest):
    valid_systems = ['*']
    valid_prog_environs = ['*']
    executable = 'echo'
    executable_opts = ['Hello, World!']

    @sanity_function
    def validate(self):
        return sn.assert_found(r'Hello, World!', self.stdout)


@rfm.simple_test
class mpi_hello_check(rfm.RegressionTest):
    valid_systems = ['*']
    valid_prog_environs = ['+mpi']
    build_system = 'SingleSource'
    sourcepath = 'mpi_hello.c'
    num_tasks = 2

    @sanity_function
    def validate(self):
        ranks = sn.extractall(r'Hello from rank (\d+) of 2', self.stdout, 1, int)
        return sn.assert_eq(sorted(ranks), [0, 1])


@rfm.simple_test
class openmp_threads_check(rfm.RegressionTest):
    """OpenMP via the environment's `omp_flag`: as many threads as the partition has cores."""
    valid_systems = ['*']
    valid_prog_environs = ['+openmp']
    build_system = 'SingleSource'
    sourcepath = 'omp_threads.c'

    @run_before('compile')
    def set_omp_flag(self):
        self.build_system.cflags = ['-O2', self.current_environ.extras['omp_flag']]

    @run_before('run')
    def set_threads(self):
        self.skip_if_no_procinfo()
        self.num_cpus_per_task = self.current_partition.processor.num_cores
        self.env_vars['OMP_NUM_THREADS'] = self.num_cpus_per_task

    @sanity_function
    def validate(self):
        return sn.assert_eq(sn.extractsingle(r'threads: (\d+)', self.stdout, 1, int), self.num_cpus_per_task)


@rfm.simple_test
class mpi_ranks_perf_check(rfm.RegressionTest):
    """A performance check with references: the tutorial's form (`reference` per system:partition,
    `@performance_function`). The value is the number of ranks that answered: a reference that a
    configuration error fails and machine noise cannot."""
    valid_systems = ['*']
    valid_prog_environs = ['+mpi']
    build_system = 'SingleSource'
    sourcepath = 'mpi_hello.c'
    num_tasks = 2
    reference = {'*': {'ranks': (2, 0, 0, 'ranks')}}

    @sanity_function
    def validate(self):
        return sn.assert_found(r'Hello from rank', self.stdout)

    @performance_function('ranks')
    def ranks(self):
        return sn.count(sn.findall(r'Hello from rank \d+ of 2', self.stdout))
