"""The stack a check measures (its environment's `extras.stack`, described in
reframe-tests/stacks/<name>.yaml).

- StackEnvironment: the stack's description, its own launcher and its benchmark binaries;
- StackReady: a stack that is not installed (no compilers, or its required benchmarks not built)
  skips the check in setup with the command that installs it, instead of failing every check.
An environment that is no stack (`builtin`, `default` on a site without stacks) is left alone.
"""
import os
import shutil

import reframe as rfm
from reframe.core.builtins import run_after, variable
from reframe.core.launchers import JobLauncher

from stackproof.stacks import StackError, load_stack, view_var
from stackproof.stacks.preflight import REQUIRED


def launcher_name(test):
    return test.current_partition.launcher_type.registered_name


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


def stack_of(environ):
    """The stack name of a ReFrame environment, or None for an environment that is no stack."""
    return environ.extras.get('stack')


def not_ready(st):
    """Why stack `st` cannot run here (not installed, benchmarks not built), or None. Cheap: files
    only (`stackproof stack check` also checks the linkage)."""
    env = st.run_env()
    for key, cmd in (('cc', st.cc), ('cxx', st.cxx)):
        found = shutil.which(cmd, path=env.get('PATH')) if '/' not in cmd else os.access(cmd, os.X_OK)
        if not found:
            return f'stack {st.name} is not installed here (compiler {key}={cmd} not found): ' \
                   f'run `stackproof stack install {st.name}` then `stackproof stack build {st.name}`'
    missing = [name for name in REQUIRED if name in st.benchmarks and not st.benchmark(name).exists()]
    if missing:
        return (f'stack {st.name}: benchmarks {", ".join(missing)} not built (looked in {st.bench_dir()}): '
                f'run `stackproof stack build {st.name}`')
    return None


class StackEnvironment(rfm.RegressionTestPlugin):
    #: the stack under test (its environment's name for an environment that is no stack)
    stack = variable(str, value='', loggable=True)

    @property
    def stack_spec(self):
        """The stack's description (stackproof.stacks.Stack) read from its stack file."""
        cache = self.__dict__
        if '_stack_spec' not in cache:
            cache['_stack_spec'] = load_stack(stack_of(self.current_environ) or self.current_environ.name)
        return cache['_stack_spec']

    @property
    def stack_bin_dirs(self):
        """Where the stack's programs live: its PATH additions, its view's and its prefix's bin/."""
        st = self.stack_spec
        dirs = list(st.path) + [os.path.join(str(root), 'bin') for root in (st.view, st.prefix) if root]
        return list(dict.fromkeys(dirs))

    @run_after('setup')
    def _stack_launcher(self):
        self.stack = stack_of(self.current_environ) or self.current_environ.name
        if stack_of(self.current_environ) is None:
            return
        kind = 'slurm' if launcher_name(self) == 'srun' else 'local'
        try:
            argv = self.stack_spec.launch_command(kind)
        except StackError as exc:
            self.skip(f'{exc}: this check cannot launch on {self.current_partition.fullname}')
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
        self.skip(f'stack {st.name} provides no {name} ({what} not found): build it with `stackproof stack build '
                  f'{st.name}` (OSU/AMG/SW4 need their sources: upstream or STACKPROOF_SOURCE_MIRROR), or point benchmarks.{name} / '
                  f'{view_var(st.name)} at a build ({st.file})')


class StackReady(rfm.RegressionTestPlugin):
    """Skip (in setup, with the install command) when the environment's stack is not installed."""

    @run_after('setup')
    def _stack_ready(self):
        name = stack_of(self.current_environ)
        if name is None or self.is_dry_run():
            return
        try:
            why = not_ready(load_stack(name))
        except StackError as exc:
            why = str(exc)
        if why:
            self.skip(why)
