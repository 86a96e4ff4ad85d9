"""Shared pieces of the stackproof ReFrame checks.

- StackproofMixin: which stack the test measures (its environment's `extras.stack`, described in
  reframe-tests/stacks/<name>.yaml): the stack's own launcher, its binaries (one resolver: the stack
  file's `benchmarks`, skip naming the stack and the fix when absent; in --dry-run the expected path
  is used so the job script can still be inspected), the identity probe run with the same launcher
  (each rank's MPI library, checked against the stack), external references per stack, and parsing
  of benchmark output with failures that name the file.
- Repeated: performance checks repeat STACKPROOF_REPEAT times (default 5) as separate launches.
- dims_create: MPI_Dims_create-style process grids (AMG's -P).
- profile_env: the core-specialization profile a node runs (etc/stackproof/profile.env).
"""
import os
import re
import subprocess
import sys

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.core.runtime as rt
from reframe.core.exceptions import SanityError
from reframe.core.builtins import parameter, run_after, run_before, variable
from reframe.core.launchers import JobLauncher

from stackproof.benchparse import BenchParseError, parse_file
from stackproof.paths import REPO
from stackproof.profiles import read_profile_env
from stackproof.stacks import StackError, load_stack, view_var
from stackproof.stacks.preflight import REQUIRED

SUITE = REPO / 'reframe-tests'
REFERENCES = SUITE / 'references'


def stackproof_cmd(*args):
    """The stackproof CLI of the running Python (ReFrame runs inside the project venv)."""
    return [sys.executable, '-m', 'stackproof.cli', *args]


def dims_create(nprocs, ndims=3):
    """Balanced factorisation like MPI_Dims_create: 320 -> [8, 8, 5], 2 -> [2, 1, 1]."""
    factors = []
    n, f = nprocs, 2
    while n > 1:
        while n % f == 0:
            factors.append(f)
            n //= f
        f += 1
    dims = [1] * ndims
    for f in sorted(factors, reverse=True):
        dims[dims.index(min(dims))] *= f
    return sorted(dims, reverse=True)


def read_env_file(path):
    return read_profile_env(path)


def render_profile(nodetype, profile, outdir):
    """Render a profile with `stackproof slurm render` (the same machinery the cluster uses) and
    return its profile.env values; used where no live profile exists (dry runs, real sites)."""
    proc = subprocess.run(stackproof_cmd('slurm', 'render', '--nodetype', nodetype, '--profile', profile,
                                         '-o', str(outdir)), capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f'stackproof slurm render --nodetype {nodetype} --profile {profile} failed: '
                           f'{proc.stderr.strip()}')
    return read_env_file(os.path.join(outdir, 'etc/stackproof/profile.env'))


class StackLauncher(JobLauncher):
    """The stack's own launcher (stack file `launcher.<kind>`). On Slurm partitions `[srun, --mpi=X]` is
    appended to ReFrame's srun command (which keeps its task options); any other command gets `-np N`
    (mpirun / mpiexec of Open MPI, MPICH Hydra and Intel MPI)."""

    def __init__(self, base, argv):
        super().__init__()
        self.base, self.argv = base, list(argv)
        self.options = list(base.options)

    def command(self, job):
        if os.path.basename(self.argv[0]) == 'srun' and type(self.base).__name__ == 'SrunLauncher':
            return self.base.command(job) + self.argv[1:]
        return self.argv + ['-np', str(job.num_tasks)]


IDENTITY_LINE = r'^identity rank=(\d+) host=(\S+) library=(\S+) version=(.*)$'


def repeat_count():
    """STACKPROOF_REPEAT (default 5): how many separate launches each performance check makes."""
    value = os.environ.get('STACKPROOF_REPEAT', '5')
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f'STACKPROOF_REPEAT={value!r}: expected a positive integer')
    return int(value)


class Repeated(rfm.RegressionTestPlugin):
    """Performance checks are repeated as separate launches (a repetition is a separate job; ReFrame
    runs each repetition for every stack before the next one, so the stacks interleave)."""
    repeat_index = parameter(range(repeat_count()), loggable=True)


def system_checks_stack():
    """STACKPROOF_NOISE_STACK: the one stack that runs the system checks (profile x noise matrix,
    core specialization, binding), which measure the nodes, not the stack; unset: every stack."""
    name = os.environ.get('STACKPROOF_NOISE_STACK')
    return [f'+stack-{name}'] if name else None


class StackproofMixin(rfm.RegressionTestPlugin):
    #: file name under references/<stack>/ holding this test's references (None: no references)
    reference_file = None
    #: run the stack's identity probe with the same launcher before the benchmark and check it
    records_identity = False
    #: the stack under test (its environment), and the MPI library each rank really ran with
    stack = variable(str, value='', loggable=True)
    mpi_library = variable(str, value='', loggable=True)
    mpi_library_path = variable(str, value='', loggable=True)

    def set_perf_values(self, values):
        """Performance variables from already parsed numbers: {name: (value, unit)}; a None value
        (a quantity this output does not print) is left out."""
        self.perf_variables = {name: sn.make_performance_function(lambda v=v: v, unit)
                               for name, (v, unit) in values.items() if v is not None}

    @property
    def stack_spec(self):
        """The stack's description (stackproof.stacks.Stack) read from its stack file."""
        cache = self.__dict__
        if '_stack_spec' not in cache:
            cache['_stack_spec'] = load_stack(self.current_environ.extras.get('stack', self.current_environ.name))
        return cache['_stack_spec']

    @property
    def stack_bin_dirs(self):
        """Where the stack's programs live: its PATH additions, its view's and its prefix's bin/."""
        st = self.stack_spec
        dirs = list(st.path) + [os.path.join(str(root), 'bin') for root in (st.view, st.prefix) if root]
        return list(dict.fromkeys(dirs))

    @run_after('setup')
    def _own_profile(self):
        """A stack benchmark that chooses no profile runs under `baseline`, switched here: no check
        depends on the profile an earlier one left on the test cluster. Where the node image fixes the
        profile (`corespec` partitions), it runs under that one instead of being skipped."""
        if self.records_identity and not hasattr(self, 'profile'):
            try:
                self.profile_env = activate_profile(self, None)
            except RuntimeError as exc:
                raise SanityError(str(exc)) from None

    @run_after('setup')
    def _stack_setup(self):
        self.stack = self.current_environ.extras.get('stack', self.current_environ.name)
        if 'stack' not in self.current_environ.extras:
            return              # an environment that is no stack (e.g. builtin)
        kind = 'slurm' if launcher_name(self) == 'srun' else 'local'
        try:
            argv = self.stack_spec.launch_command(kind)
        except StackError as exc:
            raise SanityError(str(exc)) from None
        self.job.launcher = StackLauncher(self.job.launcher, argv)

    def stack_binary(self, name, pattern=None):
        """Absolute path of benchmark `name` of the stack under test (a file, or with `pattern` the
        first file matching it under the benchmark's directory). Skips the test, naming the stack and
        how to provide it, when the stack has none."""
        st = self.stack_spec
        try:
            path = st.benchmark(name)
        except StackError as exc:
            self.skip(f'{exc}: this check does not apply to it')
        found = path if pattern is None else next(iter(sorted(path.rglob(pattern))), None) if path.is_dir() else None
        if found is not None and found.is_file() and os.access(found, os.X_OK):
            return str(found)
        if self.is_dry_run():
            return str(path if pattern is None else path / pattern)
        what = f'{pattern} under {path}' if pattern else str(path)
        msg = (f'stack {st.name} provides no {name} ({what} not found): build it with `stackproof stack build '
               f'{st.name}` (OSU/AMG/SW4 need STACKPROOF_BENCH_SOURCES), or point benchmarks.{name} / '
               f'{view_var(st.name)} at a build ({st.file})')
        if name in REQUIRED:      # every stack must have these: a set-up error, not a skip
            raise SanityError(msg)
        self.skip(msg)

    @run_before('run')
    def _identity_probe(self):
        """Run the stack's identity probe (rank, MPI_Get_library_version, resolved libmpi path) with
        exactly the benchmark's launcher before the benchmark itself."""
        if not self.records_identity:
            return
        probe = self.stack_binary('probe')
        self.job.num_tasks = self.num_tasks      # ReFrame copies it only when the job is prepared
        launch = self.job.launcher.run_command(self.job)
        self.prerun_cmds = [f'{launch} {probe} > identity.out 2>&1'] + list(self.prerun_cmds)

    @run_after('run')
    def _record_identity(self):
        if not self.records_identity or self.is_dry_run():
            return
        path = self.stage_file('identity.out')
        rows = identity_rows(path)
        if rows:
            first = rows[min(rows)]
            self.mpi_library, self.mpi_library_path = first['version'], first['library']

    def identity_sanity(self):
        """Deferred: every rank of the probe ran with the stack's own MPI (version and library path)."""
        return _identity_ok(self.stage_file('identity.out'), self.stack_spec, self.num_tasks)

    @run_after('setup')
    def _stack_references(self):
        """references/<stack>/<reference_file>; RFM_REFERENCE_PREFIX moves the references root
        (e.g. a site's own repository holding <stack>/*.yaml)."""
        if not self.reference_file:
            return
        prefix = rt.runtime().get_option('general/0/reference_prefix')
        rel = os.path.join(self.stack, self.reference_file)
        path = os.path.join(prefix or str(REFERENCES), rel)
        if os.path.isfile(path):
            self.reference = {'$ref': rel if prefix else path}

    def stage_file(self, name=None):
        """Absolute path of a file in the stage directory (default: the job's stdout)."""
        return os.path.join(self.stagedir, name or self.job.stdout)

    def parse_output(self, kind, name=None):
        """Parse benchmark output with stackproof.benchparse; malformed output fails sanity with
        the file and what was expected. Cached per file."""
        path = self.stage_file(name)
        cache = self.__dict__.setdefault('_stackproof_parsed', {})
        if path not in cache:
            try:
                cache[path] = parse_file(kind, path)
            except BenchParseError as exc:
                raise SanityError(str(exc)) from None
        return cache[path]

    @sn.deferrable
    def parsed_ok(self, kind, name=None):
        """Deferred: the output parses (the parser's error, naming the file, is the failure reason)."""
        self.parse_output(kind, name)
        return True


def identity_rows(path):
    """rank -> {host, library, version} from the identity probe's output (missing file: {})."""
    rows = {}
    if os.path.isfile(path):
        with open(path, errors='replace') as fh:
            for line in fh:
                m = re.match(IDENTITY_LINE, line.strip())
                if m:
                    rows[int(m.group(1))] = {'host': m.group(2), 'library': m.group(3), 'version': m.group(4)}
    return rows


@sn.deferrable
def _identity_ok(path, st, ntasks):
    rows = identity_rows(path)
    if not rows:
        tail = ''
        if os.path.isfile(path):
            with open(path, errors='replace') as fh:
                tail = ' | '.join(fh.read().strip().splitlines()[-5:])
        raise SanityError(f'stack {st.name}: the identity probe printed no "identity rank=" line ({path}): '
                          f'{tail or "empty"}')
    missing = sorted(set(range(ntasks)) - set(rows))
    if missing:
        raise SanityError(f'stack {st.name}: identity probe: no line from ranks {missing} ({path})')
    fix = (f'rebuild with `stackproof stack build {st.name}` and check that no other stack\'s library is on '
           f'LD_LIBRARY_PATH ({st.file})')
    for rank, row in sorted(rows.items()):
        lib, version = row['library'], row['version']
        if not re.search(st.mpi_version, version):
            raise SanityError(f'stack {st.name}: rank {rank} ran with MPI {version!r} ({lib}), the stack file '
                              f'requires a version matching /{st.mpi_version}/: {fix}')
        if not re.search(st.mpi_library, os.path.basename(lib)) and not re.search(st.mpi_library, lib):
            raise SanityError(f'stack {st.name}: rank {rank} loaded {lib}, not /{st.mpi_library}/: {fix}')
        if st.mpi_library_dir and os.path.realpath(os.path.dirname(lib)) != os.path.realpath(st.mpi_library_dir):
            raise SanityError(f'stack {st.name}: rank {rank} loaded {lib}, outside {st.mpi_library_dir}: {fix}')
    return True


def activate_profile(test, profile, noise_daemon='none'):
    """Make the nodes of test's partition run core-specialization `profile` and return its
    profile.env values.

    - partitions with the `profiles` feature (the test cluster): `stackproof cluster up --profile P`
      (idempotent; reconfigures the running cluster), then <run dir>/etc/stackproof/profile.env;
    - partitions with `corespec` (real sites, profile set by the node image): the installed
      /etc/stackproof/profile.env; the test is skipped when the nodes run another profile;
    - anything else runs `baseline` only (rendered for the node type, nothing is changed).
    In --dry-run nothing is changed: the profile is rendered into the stage directory.
    profile=None: any profile will do (the check places its ranks by profile.env): the installed
    one on `corespec` partitions, else `baseline`."""
    part = test.current_partition
    fixed = 'corespec' in part.features and 'profiles' not in part.features
    if profile is None and not (fixed and not test.is_dry_run()):
        profile = 'baseline'
    root = part.extras.get('stackproof_root', '/')
    installed = os.path.join(root, 'etc/stackproof/profile.env')
    rendered = os.path.join(test.stagedir, 'profile-render')
    if test.is_dry_run() or not ({'profiles', 'corespec'} & set(part.features)):
        return render_profile(part.extras['nodetype'], profile, rendered)
    if 'profiles' in part.features:
        # noise_daemon: a daemon-like noise source on the node (e.g. 10Hz-2500us), bound by the profile
        # like the other daemons; 'none' stops one a previous check asked for.
        proc = subprocess.run(stackproof_cmd('cluster', 'up', '--profile', profile, '--noise-daemon', noise_daemon),
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f'stackproof cluster up --profile {profile} --noise-daemon {noise_daemon} failed: '
                               f'{proc.stderr.strip()}')
    if not os.path.isfile(installed):
        test.skip(f'{installed} not found: the nodes run no stackproof profile '
                  '(render one with `stackproof slurm render` into the node image)')
    values = read_env_file(installed)
    if profile is not None and values.get('STACKPROOF_PROFILE') != profile:
        test.skip(f'the nodes run profile {values.get("STACKPROOF_PROFILE")!r}, not {profile!r}: '
                  'boot the nodes with that profile to measure it')
    return values


def launcher_name(test):
    return test.current_partition.launcher_type.registered_name


def cpu_bind_options(test, env):
    """Launcher options placing one rank on each application core of the profile: srun's
    --cpu-bind map, or the stack's own local-launcher dialect (stack file `launcher.local_bind`)."""
    if launcher_name(test) == 'srun':
        # The mpibind plugin (TOSS's default binding) would override an explicit --cpu-bind.
        off = ['--mpibind=off'] if 'mpibind' in test.current_partition.features else []
        return off + [f"--cpu-bind={env['STACKPROOF_SRUN_CPU_BIND']}"]
    return test.stack_spec.bind_options(env['STACKPROOF_APP_CORE_FIRST_PUS'])
