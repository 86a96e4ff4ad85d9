"""StackCheck, the base of every stackproof check. A check says what it runs (its own setup hook:
executable, tasks, options), what its figures are (`figures`: name -> unit, known at init, so
`reframe --describe` and `-l` list them), what it requires of one launch's output (`verify`) and
what it measures in it (`measure`); the base does the rest, in this order:

  after init (declare_figures, the last init hook)
    0. the performance variables, one per figure (per stack of the block when it holds several);
  after setup (setup_stack; the base's hooks run before the check's own)
    1. the stack(s): `self.stack`; one that is not installed skips the check with the command that
       installs it; its own launcher (stack file) wraps the partition's;
    2. the profile (`under_profile`): the core-specialization profile the partition runs, its values
       in `self.profile_env`; a check for another profile (or noise daemon) is skipped, saying how to
       bring the nodes up in it (stackproof.reframe.profile);
    3. the references: references/<stack>/<reference_file> when the check names one;
  before run (prepare_launch, the last pre-run hook)
    4. the partition: a job larger than the partition is skipped, never left pending;
    5. the identity probe (`records_identity`): the stack's probe runs first, with the benchmark's
       launcher; a check of blocks writes its block file here (below);
  sanity (validate, the @sanity_function)
    6. every launch ran; the identity probe's ranks all ran the stack's own MPI (mpi_library*);
    7. the check's own conditions on each launch: `verify(launch)`;
  before performance (record_launches)
    8. each launch's figures, `measure(launch)`, into `launches` (and launches.json): the performance
       variables are the medians of a stack's launches in the job.

Blocks of launches (`block_index = blocks()` in a check's body): each test case is one block, a job
running `block_launches` separate launches per stack (each its own srun / mpirun and process start,
in its own directory launch-NN-STACK/), the stacks of `block_stacks` alternating A,B,B,A / B,A,A,B
(stackproof.reframe.block). With several stacks the test case runs under the first one's environment
and each launch under its own stack's (stackproof.reframe.launch); its performance variables are
`<figure>@<stack>`; with one stack (the default: the test case's own) they are the figures' names.
ReFrame judges each stack's median against that stack's references, so one slow launch does not fail
the run; every launch's values stay in `launches` (stack, block, position, pair) for the comparison.

What a check may declare, as plain class variables: `perf_better` (the direction of each performance
variable, read by the report), `perf_headline` (its headline metrics: the verdict's first table),
`perf_margin` (equivalence margins beside the direction), `perf_curve` (variables that form a curve
over message size: drawn, judged only where headline), `reference_file`, `records_identity`,
`under_profile`, `noise_daemon`. Every skip (the base's and the check's own `self.skip(...)`) keeps
its message as `skip_reason` in the JSON report.
"""
import json
import os
import shlex
import statistics
import sys
from dataclasses import dataclass

import reframe as rfm
import reframe.core.runtime as rt
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
import yaml
from reframe.core.backends import getlauncher
from reframe.core.builtins import parameter, run_after, run_before, sanity_function, variable
from reframe.core.exceptions import SanityError
from reframe.core.pipeline import RegressionTestDict

from stackproof import files
from stackproof.benchparse import PARSERS, BenchParseError
from stackproof.paths import REPO
from stackproof.reframe.block import BLOCK_FILE, COMPARE_TAG, RECORD, check_names, block_file, order
from stackproof.reframe.identity import check_identity, identity_rows
from stackproof.reframe.layout import nodes_needed
from stackproof.reframe.profile import ProfileUnavailable, profile_values
from stackproof.reframe.stack import StackLauncher, launch_prefix, launcher_name, not_ready, stack_of
from stackproof.stacks import StackError, load_stack, view_var

REFERENCES = REPO / 'reframe-tests' / 'references'


def _env_int(name, default, least):
    value = os.environ.get(name, '') or str(default)
    if not value.isdigit() or int(value) < least:
        raise ValueError(f'{name}={value!r}: expected an integer >= {least}')
    return int(value)


def blocks():
    """`block_index = blocks()` in a check's body: STACKPROOF_BLOCKS blocks of launches (default 1),
    numbered from STACKPROOF_FIRST_BLOCK (default 0; a later look's blocks follow the earlier ones),
    each a test case of its own. Declared first, it comes first in the test's name."""
    first = _env_int('STACKPROOF_FIRST_BLOCK', 0, 0)
    return parameter(range(first, first + _env_int('STACKPROOF_BLOCKS', 1, 1)), loggable=True)


def _env_stacks():
    return [s for s in os.environ.get('STACKPROOF_BLOCK_STACKS', '').split(',') if s]


def reference_path(stack, reference_file):
    """(path on disk, value for `reference = {'$ref': ...}`) of a stack's reference file, under
    RFM_REFERENCE_PREFIX when set (a site's own references/<stack>/*.yaml), else the project's."""
    prefix = rt.runtime().get_option('general/0/reference_prefix')
    rel = os.path.join(stack, reference_file)
    return os.path.join(prefix or str(REFERENCES), rel), (rel if prefix else os.path.join(str(REFERENCES), rel))


class NotMeasured(Exception):
    """A figure no launch of the stack printed: ReFrame leaves the performance variable out (with a
    warning) instead of reporting a value that was not measured."""


@dataclass(frozen=True)
class Launch:
    """One launch of a check: its stack, its directory (`stage`/`rel`) and output file, its place in
    the block (position, pair, block: None for a check that is not run in blocks)."""
    stack: str
    stage: str
    rel: str                  # its directory below the stage directory ('' for the job itself)
    stdout: str
    position: int = 0
    pair: int | None = None
    block: int | None = None

    @property
    def dir(self):
        return os.path.join(self.stage, self.rel) if self.rel else self.stage

    def path(self, name=None):
        """Absolute path of a file the launch wrote (default: its standard output)."""
        return os.path.join(self.dir, name or self.stdout)

    def read(self, name=None, cap=files.MAX_OUTPUT):
        """A file the launch wrote, as text: the job wrote it (on the virtual cluster, a node on its
        share), so it is read through stackproof.files (no link followed, a regular file, capped)."""
        rel = os.path.join(self.rel, name or self.stdout) if self.rel else (name or self.stdout)
        return files.read_in(self.stage, rel, cap).decode(errors='replace')


class StackCheck(rfm.RegressionTestPlugin):
    """The base of a check that measures a stack (or the nodes) on a partition: combine it with the
    kind of test, `class OSUBenchmark(StackCheck, rfm.RunOnlyRegressionTest)`."""

    # ---- what a check declares -----------------------------------------------------------------------
    #: direction of each performance variable, {name or fnmatch pattern: 'higher' | 'lower'}: logged
    #: with the results so the report reads it from the check and never guesses it from the name
    perf_better = variable(typ.Dict[str, str], value={}, loggable=True)
    #: the benchmark's headline metric(s), names or fnmatch patterns: the verdict's first table; the
    #: other metrics follow as secondary, under the same error control (docs/performance.md)
    perf_headline = variable(typ.List[str], value=[], loggable=True)
    #: equivalence margin per variable (name or pattern -> fraction): "no difference" when the ratio's
    #: interval lies inside +-margin; a variable not named gets the run's (--margin, default 0.05)
    perf_margin = variable(typ.Dict[str, float], value={}, loggable=True)
    #: the variables that form a curve over message size (names or fnmatch patterns, the size in the
    #: name: lat_8B, bw_1MiB): the report draws them; the verdict judges only the headline ones
    perf_curve = variable(typ.List[str], value=[], loggable=True)
    #: a file each launch writes with its whole curve over message size (CSV: bytes,usec,MBps), which
    #: the report draws ('' none)
    perf_curve_file = variable(str, value='', loggable=True)
    #: file under references/<stack>/ holding this check's references (None: no references; ReFrame
    #: then logs the values without judging them)
    reference_file = None
    #: run the stack's identity probe before the benchmark and require every rank on the stack's MPI
    records_identity = False
    #: the check runs under the partition's core-specialization profile and reads its values: the
    #: one its `profile` parameter names, else baseline on the test cluster and the node image's own
    #: on a site (False: it does not depend on the profile, e.g. GPU health)
    under_profile = True
    #: the noise daemon the nodes must run ('' none; FWQ's daemon rows name theirs)
    noise_daemon = ''

    # ---- blocks of launches (a check declaring `block_index = blocks()`) ---------------------------------
    #: launches of each stack in one block (STACKPROOF_BLOCK_LAUNCHES, default 2: A,B,B,A)
    block_launches = variable(int, value=_env_int('STACKPROOF_BLOCK_LAUNCHES', 2, 1), loggable=True)
    #: the stacks a block compares, baseline first (STACKPROOF_BLOCK_STACKS=A,B); empty: the test
    #: case's own stack alone
    block_stacks = variable(typ.List[str], value=_env_stacks(), loggable=True)

    # ---- what the base records -----------------------------------------------------------------------
    #: the stack under test (its environment's name for an environment that is no stack)
    stack = variable(str, value='', loggable=True)
    #: the MPI library each rank really ran with (rank 0's), from the identity probe
    mpi_library = variable(str, value='', loggable=True)
    mpi_library_path = variable(str, value='', loggable=True)
    #: every stack of the case (a block runs several): {stack: {'version', 'library'}} of rank 0
    mpi_libraries = variable(typ.Dict[str, typ.Dict[str, str]], value={}, loggable=True)
    #: why the check was skipped ('' when it was not), set by skip(): ReFrame prints a skip's message
    #: but keeps none in its JSON report, which the report (and anyone after the run) reads
    skip_reason = variable(str, value='', loggable=True)
    #: True when the check ran but could not measure what it is about (skip_not_measured): the report
    #: says "not measured" with skip_reason, as data, never a prefix to parse
    not_measured = variable(bool, value=False, loggable=True)
    #: every launch: {stack, dir, block, position, pair, rc, start, end, values {figure: value}}
    launches = variable(typ.List[typ.Dict[str, object]], value=[], loggable=True)

    # ---- what a check implements -----------------------------------------------------------------------
    def figures(self):
        """{figure name: unit} this check measures (known at init: its parameters may shape it)."""
        return {}

    def verify(self, launch):
        """The check's own sanity conditions on one launch (a Launch): True, a deferred expression
        (sn.assert_*), or a SanityError naming the file and what was expected."""
        return True

    def measure(self, launch):
        """The figures of one launch, {name: value}; a value None (a quantity this output does not
        print) is left out."""
        return {}

    def prepare_launch_dir(self, path):
        """Write what one launch reads into its directory `path` (input decks), before the job runs."""

    def block_setup(self, stack, prefix):
        """Extra setup steps of `stack` in a block, after its identity probe, {argv, stdout, stderr,
        capture} each (stackproof.reframe.launch); `prefix`: its launch command's tokens."""
        return []

    # ---- the base's hooks --------------------------------------------------------------------------------
    @property
    def in_blocks(self):
        """Whether the check runs its launches in blocks (it declares `block_index = blocks()`)."""
        return hasattr(self, 'block_index')

    def block_stack_names(self):
        """The stacks of this test case's launches: `block_stacks` for a check of blocks (when set),
        else its own."""
        if self.in_blocks and self.block_stacks:
            return check_names(self.block_stacks)
        return [self.stack]

    @run_after('init', always_last=True)
    def declare_figures(self):
        """Step 0: one performance variable per figure, `<figure>@<stack>` for each stack of a block
        that holds several; a block of several stacks runs under the first one's environment; a check
        of blocks is tagged `compare`."""
        stacks = check_names(self.block_stacks) if self.in_blocks and self.block_stacks else []
        if self.in_blocks:
            self.tags = set(self.tags) | {COMPARE_TAG}
        if len(stacks) > 1:
            self.valid_prog_environs = [f'{spec} +stack-{stacks[0]}' if spec.startswith('+') else f'+stack-{stacks[0]}'
                                        for spec in self.valid_prog_environs]
        for name, unit in self.figures().items():
            for st in (stacks if len(stacks) > 1 else [None]):
                var = f'{name}@{st}' if st else name
                self.perf_variables[var] = sn.make_performance_function(self._figure(st, name), unit)

    @sn.deferrable
    def _figure(self, stack, name):
        """The median of `name` over the stack's launches in this job (its own stack when None)."""
        stack = stack or self.stack
        values = [ln['values'][name] for ln in self.launches if ln['stack'] == stack and name in ln.get('values', {})]
        if not values:
            raise NotMeasured(f'no launch of stack {stack} printed {name}')
        return statistics.median(values)

    @run_after('setup')
    def setup_stack(self):
        """Steps 1-3: the stack(s), the launcher, the profile, the references."""
        name = stack_of(self.current_environ)
        self.stack = name or self.current_environ.name
        stacks = self.block_stack_names()
        if self.in_blocks and name is None:
            self.skip(f'a block of launches needs a stack environment; {self.current_environ.name} is none')
        if name is not None:
            for st in stacks:
                if not self.is_dry_run():
                    try:
                        why = not_ready(self.spec_of(st))
                    except StackError as exc:
                        why = str(exc)
                    if why:
                        self.skip(why)
                try:
                    self.spec_of(st).launch_command(self.launch_kind)
                except StackError as exc:
                    self.skip(f'{exc}: this check cannot launch on {self.current_partition.fullname}')
            self.job.launcher = StackLauncher(self.job.launcher, self.stack_spec.launch_command(self.launch_kind))
        if self.under_profile:
            profile = getattr(self, 'profile', None)
            try:
                self.profile_env = profile_values(self.current_partition, profile if isinstance(profile, str) and profile
                                                  else None, self.stagedir, dry_run=self.is_dry_run(),
                                                  noise_daemon=self.noise_daemon)
            except ProfileUnavailable as exc:
                self.skip(str(exc))
        if self.in_blocks:
            self.keep_files = list(self.keep_files) + ['launch-*', 'setup-*', RECORD, BLOCK_FILE]
        if self.reference_file and name and len(stacks) == 1:
            path, ref = reference_path(name, self.reference_file)
            if os.path.isfile(path):
                self.reference = {'$ref': ref}

    def _block_references(self, stacks):
        """Each stack's references for this test case (its references/<stack>/ file, looked up by
        ReFrame's own index rules on the test as it ran), as `<figure>@<stack>`."""
        out = {}
        for st in stacks:
            path, _ = reference_path(st, self.reference_file)
            try:
                with open(path) as fh:
                    entry = (yaml.safe_load(fh) or {}).get(type(self).__name__)
            except OSError:
                continue
            if not isinstance(entry, dict):
                continue
            try:
                found = RegressionTestDict(dict(entry))[self] if '$index' in entry else entry
            except KeyError:
                continue
            out.update({f'{var}@{st}': tuple(ref) for var, ref in (found or {}).items() if isinstance(ref, list)})
        return out

    @run_before('cleanup')
    def drop_links_before_the_copy(self):
        """ReFrame copies the job's files and keep_files from the stage directory to the output
        directory with shutil.copy, which follows links: a job (on the virtual cluster, a node writing
        its share) could make root copy any file of the head there. Links, FIFOs and devices in the
        stage directory are removed first (stackproof.files, nothing followed)."""
        if self.is_dry_run():
            return
        try:
            removed = files.remove_specials(self.stagedir)
        except (OSError, files.UnsafePath) as exc:
            self.logger.warning(f'stage directory not checked before the copy to the output directory: {exc}')
            return
        for name in removed:
            self.logger.warning(f'{self.stagedir}/{name}: not a regular file: removed before the copy')

    @run_before('run', always_last=True)
    def prepare_launch(self):
        """Steps 4-5: a job that fits the partition; the identity probe before the benchmark (or the
        block file)."""
        have = self.current_partition.extras.get('nodes')
        need = nodes_needed(self.num_tasks, self.num_tasks_per_node)
        if have and need > have:
            self.skip(f'needs {need} nodes ({self.num_tasks} tasks, {self.num_tasks_per_node} per node); '
                      f'{self.current_partition.fullname} has {have}')
        self.job.num_tasks = self.num_tasks      # ReFrame copies it only when the job is prepared
        if self.in_blocks:
            self._write_block()
        elif self.records_identity:
            probe = self.stack_binary('probe')
            launch = self.job.launcher.run_command(self.job)
            self.prerun_cmds = [f'{launch} {shlex.quote(probe)} > identity.out 2>&1'] + list(self.prerun_cmds)

    def _write_block(self):
        """The block file (stackproof.reframe.block) and each launch's directory; the job runs the
        block launcher on it."""
        base = self.job.launcher.base if isinstance(self.job.launcher, StackLauncher) else self.job.launcher
        options = list(self.job.launcher.options)
        commands, stacks = {}, {}
        for st in self.block_stack_names():
            spec = self.spec_of(st)
            prefix = launch_prefix(base, spec.launch_command(self.launch_kind), self.job) + options
            exe = self.executable if st == self.stack else self.block_executable(st)
            commands[st] = prefix + [exe] + [str(o) for o in self.executable_opts]
            setup = []
            if self.records_identity:
                setup.append({'argv': prefix + [self.stack_binary('probe', stack=st)],
                              'stdout': 'identity.out', 'stderr': 'identity.out'})
            setup += self.block_setup(st, prefix)
            stacks[st] = {'env': spec.env_recipe(), 'modules': list(spec.modules), 'setup': setup}
        slots = order(self.block_stack_names(), self.block_index, self.block_launches)
        doc = block_file(slots, stacks, lambda s: [{'argv': commands[s.stack], 'stdout': 'stdout', 'stderr': 'stderr'}])
        for s in slots:
            path = os.path.join(self.stagedir, s.dir)
            os.mkdir(path, 0o755)
            self.prepare_launch_dir(path)
        _write_new(self.stagedir, BLOCK_FILE, doc)
        self.job.launcher = getlauncher('local')()
        self.executable = shlex.quote(sys.executable)
        self.executable_opts = ['-m', 'stackproof.reframe.launch', BLOCK_FILE]

    def block_executable(self, stack):
        """The benchmark of another stack of the block: the same stack_binary request the check made."""
        request = self.__dict__.get('_binary_request')
        if request is None:
            raise SanityError(f'{type(self).__name__}: runs in blocks but never called stack_binary()')
        return self.stack_binary(*request, stack=stack)

    # ---- sanity and performance ---------------------------------------------------------------------------
    def launch_list(self):
        """The launches of this test case (Launch): the block's, else the job itself."""
        if not self.in_blocks:
            return [Launch(self.stack, self.stagedir, '', self.job.stdout)]
        return [Launch(s.stack, self.stagedir, s.dir, 'stdout', s.position, s.pair, s.block)
                for s in order(self.block_stack_names(), self.block_index, self.block_launches)]

    @sanity_function
    def validate(self):
        """Steps 6-7, in order: every launch ran, the identity probe, the check's own conditions."""
        return sn.all([self._launched(), self._identity_ok(), self._verified()])

    def _record(self):
        try:        # the block launcher wrote it inside the job: read through stackproof.files
            doc = json.loads(files.read_in(self.stagedir, RECORD, files.MAX_RECORD))
            return {r['dir']: r for r in doc['launches'] if isinstance(r, dict) and isinstance(r.get('dir'), str)}
        except (OSError, ValueError, KeyError, TypeError, files.UnsafePath) as exc:
            raise SanityError(f'{os.path.join(self.stagedir, RECORD)}: the block launcher left no record ({exc}); '
                              f'job output: {self.stage_file()}') from None

    @sn.deferrable
    def _launched(self):
        if not self.in_blocks:
            return True
        record = self._record()
        for ln in self.launch_list():
            name = os.path.basename(ln.dir)
            if name not in record:
                raise SanityError(f'{ln.dir}: launch {ln.position} (stack {ln.stack}) never ran; '
                                  f'the job ended first ({self.stage_file()})')
            if record[name].get('rc') != 0:
                err = _tail(ln, 'stderr') or _tail(ln)
                raise SanityError(f'{ln.dir}: launch {ln.position} (stack {ln.stack}, block {ln.block}) exited '
                                  f'{record[name].get("rc")}: {err or "no output"}')
        return True

    @sn.deferrable
    def _identity_ok(self):
        if not self.records_identity:
            return True
        for st in self.block_stack_names():
            path = (self.stage_file(os.path.join(f'setup-{st}', 'identity.out')) if self.in_blocks
                    else self.stage_file('identity.out'))
            rows = identity_rows(path)
            if rows:
                first = rows[min(rows)]
                self.mpi_libraries = {**self.mpi_libraries,
                                      st: {'version': str(first['version']), 'library': str(first['library'])}}
                if st == self.stack:
                    self.mpi_library, self.mpi_library_path = first['version'], first['library']
            check_identity(rows, path, self.spec_of(st), self.num_tasks)
        return True

    @sn.deferrable
    def _verified(self):
        for ln in self.launch_list():
            sn.evaluate(self.verify(ln))
        return True

    @run_before('performance')
    def record_launches(self):
        """Step 8: each launch's figures into `launches` and launches.json (kept with the output)."""
        if self.is_dry_run():
            return
        record = self._record() if self.in_blocks else {}
        out = []
        for ln in self.launch_list():
            entry = dict(record.get(os.path.basename(ln.dir), {}))
            entry.update(stack=ln.stack, dir=os.path.relpath(ln.dir, self.stagedir), block=ln.block,
                         position=ln.position, pair=ln.pair,
                         values={k: float(v) for k, v in self.measure(ln).items() if v is not None})
            out.append(entry)
        self.launches = out
        stacks = self.block_stack_names()
        if self.reference_file and len(stacks) > 1:
            self.reference = {self.current_partition.fullname: self._block_references(stacks)}
        _write_new(self.stagedir, RECORD, {'launches': out, 'units': self.figures()})

    def skip(self, msg=None):
        """ReFrame's skip (also behind skip_if), keeping the message as the loggable `skip_reason`."""
        self.skip_reason = str(msg) if msg else f'{type(self).__name__} skipped itself without a message'
        super().skip(msg)

    def skip_not_measured(self, why):
        """The check ran but what it is about was not measured (`why`): a skip the report shows as
        "not measured: why", never a pass."""
        self.not_measured = True
        self.skip(f'not measured: {why}')

    # ---- for the check's own code ----------------------------------------------------------------------
    @property
    def launch_kind(self):
        """The stack file's launcher key for this partition: `slurm` on srun partitions, else `local`."""
        return 'slurm' if launcher_name(self) == 'srun' else 'local'

    def spec_of(self, name):
        """Stack `name`'s description (stackproof.stacks.Stack) read from its stack file (cached)."""
        cache = self.__dict__.setdefault('_stack_specs', {})
        if name not in cache:
            cache[name] = load_stack(name)
        return cache[name]

    @property
    def stack_spec(self):
        """The description of the test case's stack (stackproof.stacks.Stack)."""
        return self.spec_of(stack_of(self.current_environ) or self.current_environ.name)

    @property
    def stack_bin_dirs(self):
        """Where the stack's programs live: its PATH additions, its view's and its prefix's bin/."""
        st = self.stack_spec
        dirs = list(st.path) + [os.path.join(str(root), 'bin') for root in (st.view, st.prefix) if root]
        return list(dict.fromkeys(dirs))

    def stack_binary(self, name, pattern=None, stack=None):
        """Absolute path of benchmark `name` of the stack under test (or of `stack`): a file, or with
        `pattern` the first file matching it under the benchmark's directory. Skips the test, naming
        the stack and how to provide it, when the stack has none."""
        if stack is None and name != 'probe':
            self.__dict__['_binary_request'] = (name, pattern)
        st = self.spec_of(stack) if stack else self.stack_spec
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
                  f'{st.name}` (OSU/AMG/SW4 need their sources: upstream or STACKPROOF_SOURCE_MIRROR), or point '
                  f'benchmarks.{name} / {view_var(st.name)} at a build ({st.file})')

    def stage_file(self, name=None):
        """Absolute path of a file in the stage directory (default: the job's stdout)."""
        return os.path.join(self.stagedir, name or self.job.stdout)

    def parse_output(self, kind, launch, name=None):
        """A launch's output parsed by stackproof.benchparse (cached per file); malformed output fails
        sanity with the file and what was expected."""
        path = launch.path(name)
        cache = self.__dict__.setdefault('_stackproof_parsed', {})
        if path not in cache:
            try:        # the job (or a virtual cluster's node, on its share) wrote it: stackproof.files
                cache[path] = PARSERS[kind](launch.read(name), path)
            except (OSError, files.UnsafePath) as exc:
                raise SanityError(f'{path}: cannot read benchmark output ({exc})') from None
            except BenchParseError as exc:
                raise SanityError(str(exc)) from None
        return cache[path]


def _tail(launch, name=None, lines=5):
    try:
        return ' | '.join(launch.read(name).strip().splitlines()[-lines:])
    except (OSError, files.UnsafePath):
        return ''


def _write_new(directory, name, doc):
    """A JSON file of ours in the stage directory, created new and renamed into place (stackproof.files:
    a link the job planted at `name` is replaced, never written through)."""
    with files.Staging(directory) as stage:
        stage.write(name, json.dumps(doc, indent=1).encode())
        stage.commit(name, mode=0o644)
