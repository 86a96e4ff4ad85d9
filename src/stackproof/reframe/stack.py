"""The stack a check measures (its ReFrame environment's `extras.stack`, described in
reframe-tests/stacks/<name>.yaml): whether it is installed, its own launcher, where its programs are.
An environment that is no stack (`builtin`, `default` on a site without stacks) is left alone."""
import os
import shutil

from reframe.core.launchers import JobLauncher

from stackproof.stacks.preflight import REQUIRED


def launcher_name(test):
    """The partition's launcher (srun, mpirun, local)."""
    return test.current_partition.launcher_type.registered_name


def stack_of(environ):
    """The stack name of a ReFrame environment, or None for an environment that is no stack."""
    return environ.extras.get('stack')


def system_checks_stack():
    """STACKPROOF_NOISE_STACK: the one stack that runs the node checks (profile x noise matrix, core
    specialization, binding), which measure the nodes, not the stack, as `valid_prog_environs`;
    unset: None (every stack)."""
    name = os.environ.get('STACKPROOF_NOISE_STACK')
    return [f'+stack-{name}'] if name else None


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


def launch_prefix(base, argv, job):
    """The tokens in front of a program started with a stack's launcher `argv` (stack file
    `launcher.<kind>`) on a partition whose launcher is `base`: on srun partitions, when the stack
    launches with srun, ReFrame's srun command (with the job's task options) and the stack's srun
    options (`--mpi=X`); any other command gets `-np N` (mpirun / mpiexec of Open MPI, MPICH Hydra and
    Intel MPI). The one place a stack's launcher meets a partition's: StackLauncher and the blocks of
    launches both use it."""
    if type(base).registered_name == 'srun' and os.path.basename(argv[0]) == 'srun':
        return list(base.command(job)) + list(argv[1:])
    return list(argv) + ['-np', str(job.num_tasks)]


class StackLauncher(JobLauncher):
    """The partition's launcher started as the stack's own (launch_prefix)."""

    def __init__(self, base, argv):
        super().__init__()
        self.base, self.argv = base, list(argv)
        self.options = list(base.options)

    def command(self, job):
        return launch_prefix(self.base, self.argv, job)
