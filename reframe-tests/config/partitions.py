"""Build ReFrame partitions and stack environments from stackproof node types.

Every hardware fact in a partition (sockets, CPUs, SMT, NUMA, GPUs) comes from a node type
(`stackproof.nodes.nodetype.load(...)`), never from this directory: a new site adds a node type and one
small systems/<site>.py that says how jobs are submitted.

Stacks: one ReFrame environment per software stack under test, generated from its stack file
(reframe-tests/stacks/<name>.yaml, read by stackproof.stacks): compilers, environment, modules,
launcher and benchmark paths all come from there ($STACKPROOF_<STACK>_VIEW overrides a stack's
view; see docs/acceptance.md).
"""
import os
import sys

from reframe.core.exceptions import ConfigError

from stackproof.cpulist import format_mask
from stackproof.errors import StackproofError
from stackproof.gpus.health import cuda_arch   # the one CUDA-arch/peak table: stackproof/data/gpu_models.yaml
from stackproof.nodes.nodetype import NodeType, load
from stackproof.stacks import StackError, load_stack, stack_names, view_var


class SiteConfigError(ConfigError, RuntimeError):
    """This site's configuration cannot be built here (no test cluster up, a broken stack file, ...).
    ReFrame prints a ConfigError raised while loading the configuration as one line ("failed to load
    configuration: ..."), not a traceback; still a RuntimeError for code that catches those."""


def run_order(stacks):
    """The stacks in the order ReFrame runs a test's environments: those named in
    STACKPROOF_STACK_ORDER first, in that order (stackproof.reframe.session sets it from the stacks
    of the session, so `make acceptance` can launch a pair B A as well as A B), then the rest."""
    asked = [s for s in os.environ.get('STACKPROOF_STACK_ORDER', '').split(',') if s in stacks]
    return tuple(dict.fromkeys(asked + list(stacks)))


# Every stack file (reframe-tests/stacks/*.yaml and $STACKPROOF_STACKS_DIR): one environment each.
STACKS = run_order(stack_names())



def _hexmask(cpus):
    return '0x' + format_mask(cpus).replace(',', '')


def _host_caches():
    """This host's caches in ReFrame's format (its own detection); [] when it cannot tell."""
    try:
        from reframe.utility.cpuinfo import cpuinfo
        return cpuinfo().get('topology', {}).get('caches') or []
    except Exception:      # detection is best effort: a partition without caches still works
        return []


def processor(nt: NodeType):
    """ReFrame's processor description; caches (read by e.g. cscs StreamTest) for node types of
    this host (`local`: the test cluster's nodes too), else none known."""
    return {
        'arch': nt.arch,
        'model': nt.cpu_model,
        'num_cpus': nt.num_cpus,
        'num_cpus_per_core': nt.threads_per_core,
        'num_sockets': len(nt.sockets),
        'num_cpus_per_socket': nt.num_cpus // len(nt.sockets),
        'topology': {
            'numa_nodes': [_hexmask(n.cpus) for n in nt.numa if n.cpus],
            'sockets': [_hexmask({pu for core in sock for pu in core}) for sock in nt.sockets],
            'cores': [_hexmask(core) for sock in nt.sockets for core in sock],
            'caches': _host_caches() if nt.name == 'local' else [],
        },
    }


def devices(nt: NodeType, fake_gpus=0):
    if fake_gpus:
        return [{'type': 'gpu', 'model': 'fake', 'num_devices': fake_gpus}]
    if not nt.gpus:
        return []
    model = nt.gpus[0].model
    dev = {'type': 'gpu', 'model': model, 'num_devices': len(nt.gpus)}
    arch = cuda_arch(model) if nt.gpu_vendor == 'nvidia' else None
    if arch:
        dev['arch'] = arch
    return [dev]


def gpu_features(nt: NodeType, fake_gpus=0):
    if fake_gpus:
        return ['gpu', 'fakegpu']
    if not nt.gpus:
        return []
    return ['gpu', 'cuda', 'nvgpu'] if nt.gpu_vendor == 'nvidia' else ['gpu', f'{nt.gpu_vendor}gpu']


def partition(nt: NodeType, name, *, descr, scheduler, launcher, access=(), features=(),
              extras=None, env_vars=(), max_jobs=1, time_limit='20m', fake_gpus=0, nodes=1,
              stackproof_root='/', topology_xml=None, stacks=STACKS, use_gpus=True):
    """A partition of nodes of type `nt`. `extras` carry what checks need beyond ReFrame's
    fields: the node type, the node count, where the stackproof profile files are rendered.
    use_gpus=False describes CPU-only jobs on GPU nodes (no GPU devices, features or gres)."""
    kind = 'gpu' if ((nt.gpus and use_gpus) or fake_gpus) else 'cpu'
    part = {
        'name': name,
        'descr': f'{descr} (node type {nt.name})',
        'scheduler': scheduler,
        'launcher': launcher,
        'access': list(access),
        'environs': list(CONVENTIONAL) + list(stacks),
        'max_jobs': max_jobs,
        'time_limit': time_limit,
        'processor': processor(nt),
        'devices': devices(nt, fake_gpus) if kind == 'gpu' else [],
        'features': sorted(set(features) | set(gpu_features(nt, fake_gpus) if kind == 'gpu' else []) | {kind}),
        'env_vars': [list(kv) for kv in env_vars],
        'extras': {
            'nodetype': nt.name,
            'kind': kind,
            'nodes': nodes,
            'cores_per_node': nt.num_cores,
            'stackproof_root': stackproof_root,
            'topology_xml': topology_xml or '',
            'gpu_visible_devices_var': {'nvidia': 'CUDA_VISIBLE_DEVICES',
                                        'amd': 'ROCR_VISIBLE_DEVICES'}.get(nt.gpu_vendor or '', ''),
            **(extras or {}),
        },
    }
    if part['devices'] and scheduler != 'local':
        part['resources'] = [{'name': '_rfm_gpu', 'options': ['--gpus-per-node={num_gpus_per_node}']}]
    return part


def _mpirun_shim(st):
    """A directory whose `mpirun` runs the stack's own local launcher (stack file `launcher.local`,
    options included): ReFrame's `mpirun` launcher emits a bare `mpirun -np N`, which would otherwise
    be whichever MPI the host's alternatives picked, not this stack's. Written once, atomically."""
    import shlex
    cmd = st.launcher.get('local')
    if not cmd:
        return None
    directory = os.path.join(default_prefix(), 'launchers', st.name)
    path = os.path.join(directory, 'mpirun')
    text = f'#!/bin/sh\n# stackproof: the {st.name} stack\'s local launcher ({st.file})\n' \
           f'exec {shlex.join(cmd)} "$@"\n'
    try:
        with open(path) as fh:
            if fh.read() == text:
                return directory
    except OSError:
        pass
    os.makedirs(directory, exist_ok=True)
    tmp = f'{path}.{os.getpid()}'
    with open(tmp, 'w') as fh:
        fh.write(text)
    os.chmod(tmp, 0o755)
    os.replace(tmp, path)
    return directory


def _launcher_env(st, part, env):
    """Make the partition's launcher start this stack's MPI: `mpirun` partitions get the stack's
    launcher first on PATH; `srun` partitions get SLURM_MPI_TYPE from the stack's `srun --mpi=X`."""
    env = dict(env)
    if part['launcher'] == 'mpirun':
        shim = _mpirun_shim(st)
        if shim:
            env['PATH'] = f"{shim}:{env.get('PATH', '$PATH')}"
    elif part['launcher'] == 'srun':
        mpi = [a.split('=', 1)[1] for a in st.launcher.get('slurm', ()) if a.startswith('--mpi=')]
        if mpi:
            env['SLURM_MPI_TYPE'] = mpi[-1]
    return env


def stack_environments(system, part):
    """One environment per stack for this partition, generated from its stack file: compilers,
    modules, environment variables (PATH / LD_LIBRARY_PATH prepends with other stacks' entries
    removed), features `mpi`, `stack-<name>`, `openmp`, the MPI family (and `cuda` on NVIDIA
    partitions), extras `stack` and `omp_flag` (what third-party checks read)."""
    cuda = 'cuda' in part['features']
    envs = []
    for name in part['environs']:
        if name in CONVENTIONAL:
            continue
        try:
            st = load_stack(name)
        except StackError as exc:
            raise SiteConfigError(str(exc)) from None
        env = {
            'name': name,
            'target_systems': [f"{system}:{part['name']}"],
            'features': ['mpi', f'stack-{name}', 'openmp', st.mpi_family] + (['cuda'] if cuda else []),
            'cc': st.cc, 'cxx': st.cxx, 'ftn': st.fc or '',
            'modules': list(st.modules),
            'env_vars': [[k, v] for k, v in _launcher_env(st, part, st.env_changes()).items()],
            'extras': {'stack': name, 'omp_flag': '-fopenmp', 'mpi_family': st.mpi_family,
                       'blas_lapack': st.blas_lapack, 'view_var': view_var(name)},
        }
        if cuda:
            env['nvcc'] = 'nvcc'
        envs.append(env)
    return envs


#: environments public suites expect on every partition: `builtin` (the system compilers) and
#: `default` (the site's chosen stack's compilers, without its MPI feature so that stack checks do
#: not run twice). Both put a Python with numpy (this venv's) first on PATH.
CONVENTIONAL = ('builtin', 'default')
DEFAULT_STACK = os.environ.get('STACKPROOF_DEFAULT_STACK') or 'commodity'


def conventional_environments(system):
    python_bin = os.path.dirname(sys.executable)
    common = {'target_systems': [system], 'features': ['serial', 'openmp', 'numpy', 'prgenv'],
              'env_vars': [['PATH', f'{python_bin}:$PATH']], 'extras': {'omp_flag': '-fopenmp'}}
    envs = [dict(common, name='builtin', cc='gcc', cxx='g++', ftn='gfortran')]
    try:
        st = load_stack(DEFAULT_STACK)
        envs.append(dict(common, name='default', cc=st.cc, cxx=st.cxx, ftn=st.fc or '',
                         extras={'omp_flag': '-fopenmp', 'default_stack': st.name}))
    except StackError:
        envs.append(dict(common, name='default', cc='gcc', cxx='g++', ftn='gfortran'))
    return envs


def system(name, *, descr, hostnames, partitions, prefix=None, modules_system='nomod'):
    """A system entry plus its per-partition stack environments (`modules_system`: lmod, tmod4...
    on a site whose stacks name modules)."""
    sysconf = {'name': name, 'descr': descr, 'hostnames': list(hostnames),
               'modules_system': modules_system, 'partitions': partitions}
    if prefix:
        sysconf['prefix'] = prefix
    envs = [e for p in partitions for e in stack_environments(name, p)]
    # System-level copies of the first partition's environments: ReFrame 4.10 looks environments up
    # by system name when a partition is selected with `--system sys:part`.
    envs = [dict(e, target_systems=[name]) for e in stack_environments(name, partitions[0])] + envs
    return {'systems': [sysconf], 'environments': conventional_environments(name) + envs}


def default_prefix():
    """Where stage/output/perflog directories go: $STACKPROOF_RFM_PREFIX or <work dir>/build/reframe
    (the checkout; ~/.local/state/stackproof for an installed package: stackproof.paths.work_dir)."""
    from stackproof.paths import work_dir
    return os.environ.get('STACKPROOF_RFM_PREFIX') or str(work_dir() / 'build' / 'reframe')


def topology_file(nt: NodeType):
    """The hwloc XML a node type was derived from (for mpibind predictions), shipped beside the node
    types (slurm-conf/nodetypes/topologies/) and checked against the sha256 the node type records;
    None without it (the binding check then reads the node's own `lstopo`)."""
    import hashlib
    from stackproof.paths import nodetypes_dir
    source = nt.source or {}
    name = source.get('file')
    if not name or os.path.basename(name) != name:
        return None
    path = nodetypes_dir() / 'topologies' / name
    if not path.is_file():
        return None
    if source.get('sha256') and hashlib.sha256(path.read_bytes()).hexdigest() != source['sha256']:
        raise SiteConfigError(f'{path}: sha256 differs from the one node type {nt.name} was generated from '
                           f'({source["sha256"]}): regenerate it with `stackproof nodetype from-xml`')
    return str(path)


# ---- which systems this configuration declares -------------------------------------------------------
#: systems left out of this configuration, and why (run.py reports it when one is asked for)
UNAVAILABLE = {}


def requested_system(argv=None):
    """The system named by `--system S[:PART]` on the command line (reframe's or run.py's) or by
    RFM_SYSTEM, else None (ReFrame then picks one by hostname)."""
    argv = sys.argv if argv is None else argv
    value = os.environ.get('RFM_SYSTEM')
    for i, arg in enumerate(argv):       # the last one wins, as in ReFrame's option parsing
        if arg == '--system' and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith('--system='):
            value = arg.split('=', 1)[1]
    return value.split(':')[0] if value else None


def nodetype_for(system, name):
    """The node type `name` for `system`, read only when this run may use that system: when another
    system is requested on the command line nothing is read (so a Slurm site's login node needs
    no lstopo for the `local` node type). None when not needed or unavailable; the reason is kept
    in UNAVAILABLE."""
    wanted = requested_system()
    if wanted is not None and wanted != system:
        UNAVAILABLE[system] = f'not loaded: --system {wanted} was requested'
        return None
    try:
        return load(name)
    except StackproofError as exc:
        UNAVAILABLE[system] = f'node type {name!r} unavailable: {exc}'
        return None


def testcluster_fake_gpus(run_dir):
    """Fake GPUs per node of the test cluster in `run_dir`: $STACKPROOF_FAKE_GPUS, else what its
    cluster.json says (`stackproof cluster up --fake-gpus N`), else 0: no gpu partition, so
    third-party `valid_systems=['*']` checks are not sent to a Slurm partition that is not there."""
    value = os.environ.get('STACKPROOF_FAKE_GPUS')
    if value not in (None, ''):
        return int(value)
    import json
    try:
        with open(os.path.join(run_dir, 'cluster.json')) as fh:
            state = json.load(fh)
        return int(state.get('settings', {}).get('fake_gpus') or 0)
    except (OSError, ValueError, TypeError, AttributeError):
        return 0
