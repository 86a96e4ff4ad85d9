"""Shared pieces of the stackproof ReFrame checks.

- StackproofMixin: which stack the test measures (its environment's `extras.stack`), binaries
  resolved from that stack's Spack view or an override variable (skip naming the variable when
  absent; in --dry-run the expected path is used so the job script can still be inspected),
  external references per stack, and parsing of benchmark output with failures that name the file.
- dims_create: MPI_Dims_create-style process grids (AMG's -P).
- profile_env: the core-specialization profile a node runs (etc/stackproof/profile.env).
"""
import os
import subprocess
import sys

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.core.runtime as rt
from reframe.core.exceptions import SanityError
from reframe.core.builtins import run_after

from stackproof.benchparse import BenchParseError, parse_file
from stackproof.paths import REPO

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
    values = {}
    with open(path) as fh:
        for line in fh:
            line = line.strip()
            if line and not line.startswith('#') and '=' in line:
                key, value = line.split('=', 1)
                values[key] = value
    return values


def render_profile(nodetype, profile, outdir):
    """Render a profile with `stackproof slurm render` (the same machinery the cluster uses) and
    return its profile.env values; used where no live profile exists (dry runs, real sites)."""
    proc = subprocess.run(stackproof_cmd('slurm', 'render', '--nodetype', nodetype, '--profile', profile,
                                         '-o', str(outdir)), capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f'stackproof slurm render --nodetype {nodetype} --profile {profile} failed: '
                           f'{proc.stderr.strip()}')
    return read_env_file(os.path.join(outdir, 'etc/stackproof/profile.env'))


class StackproofMixin(rfm.RegressionTestPlugin):
    #: file name under references/<stack>/ holding this test's references (None: no references)
    reference_file = None

    def set_perf_values(self, values):
        """Performance variables from already parsed numbers: {name: (value, unit)}; a None value
        (a quantity this output does not print) is left out."""
        self.perf_variables = {name: sn.make_performance_function(lambda v=v: v, unit)
                               for name, (v, unit) in values.items() if v is not None}

    @property
    def stack(self):
        return self.current_environ.extras.get('stack', self.current_environ.name)

    @property
    def stack_view(self):
        return self.current_environ.extras.get('view', '')

    @property
    def view_var(self):
        return self.current_environ.extras.get('view_var', 'the stack view variable')

    def resolve_binary(self, name, override_var, subdirs=('bin',), override_is_dir=False, view_names=None):
        """Path of `name` for the stack under test: $override_var (a file, or a directory when
        override_is_dir), else <stack view>/<subdir>/<name or one of view_names>. Skips the test
        when absent, naming the variables to set."""
        override = os.environ.get(override_var)
        if override and override_is_dir:
            candidates = [os.path.join(override, name)] + [os.path.join(override, d, name) for d in subdirs]
        elif override:
            candidates = [override]
        else:
            candidates = [os.path.join(self.stack_view, d, n) for n in (view_names or [name]) for d in subdirs]
        for path in candidates:
            if os.path.isfile(path) and os.access(path, os.X_OK):
                return path
        if self.is_dry_run():
            return candidates[0]        # show what would run
        where = f'${override_var}={override}' if override else f'${self.view_var}={self.stack_view}'
        self.skip(f'{name} not found for stack {self.stack!r} (looked in {where}): set {override_var} '
                  f'or {self.view_var}')

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


def activate_profile(test, profile, noise_daemon='none'):
    """Make the nodes of test's partition run core-specialization `profile` and return its
    profile.env values.

    - partitions with the `profiles` feature (the test cluster): `stackproof cluster up --profile P`
      (idempotent; reconfigures the running cluster), then <run dir>/etc/stackproof/profile.env;
    - partitions with `corespec` (real sites, profile set by the node image): the installed
      /etc/stackproof/profile.env; the test is skipped when the nodes run another profile;
    - anything else runs `baseline` only (rendered for the node type, nothing is changed).
    In --dry-run nothing is changed: the profile is rendered into the stage directory."""
    part = test.current_partition
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
    if values.get('STACKPROOF_PROFILE') != profile:
        test.skip(f'the nodes run profile {values.get("STACKPROOF_PROFILE")!r}, not {profile!r}: '
                  'boot the nodes with that profile to measure it')
    return values


def launcher_name(test):
    return test.current_partition.launcher_type.registered_name


def cpu_bind_options(test, env):
    """Launcher options placing one rank on each application core of the profile."""
    if launcher_name(test) == 'srun':
        # The mpibind plugin (TOSS's default binding) would override an explicit --cpu-bind.
        off = ['--mpibind=off'] if 'mpibind' in test.current_partition.features else []
        return off + [f"--cpu-bind={env['STACKPROOF_SRUN_CPU_BIND']}"]
    if launcher_name(test) == 'mpirun':
        # Open MPI 4.1: rank i on the i-th listed CPU (--cpu-set + --bind-to core leaves ranks unbound)
        return ['--cpu-list', env['STACKPROOF_APP_CORE_FIRST_PUS'], '--bind-to', 'cpu-list:ordered']
    return []
