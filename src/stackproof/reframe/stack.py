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
