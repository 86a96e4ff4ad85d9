"""StackCheck, the base of every stackproof check. A check says what it runs (its own setup hook:
executable, tasks, options), what it requires of the output (`verify`) and what it measures
(`measure`); the base does the rest, in this order, in one setup hook, one pre-run hook and the
sanity function:

  after setup (setup_stack; the base's hooks run before the check's own)
    1. the stack: `self.stack`; one that is not installed skips the check with the command that
       installs it; its own launcher (stack file) wraps the partition's;
    2. the profile (`under_profile`): the core-specialization profile the partition runs, its values
       in `self.profile_env`; a check for another profile (or noise daemon) is skipped, saying how to
       bring the nodes up in it (stackproof.reframe.profile);
    3. the references: references/<stack>/<reference_file> when the check names one;
  before run (prepare_launch)
    4. the partition: a job larger than the partition is skipped, never left pending;
    5. the identity probe (`records_identity`): the stack's probe runs first, with the benchmark's
       launcher;
  sanity (validate)
    6. the identity probe's ranks all ran the stack's own MPI (recorded as mpi_library*);
    7. the check's own conditions: `verify()`;
    8. the numbers `measure()` returns become the performance variables.

What a check may declare, as plain class variables: `perf_better` (the direction of each performance
variable, read by the report), `perf_headline` (its headline metrics: the verdict's first table),
`perf_margin` (equivalence margins beside the direction), `reference_file`, `records_identity`, `under_profile`, `noise_daemon`;
a performance check repeated as separate launches declares `repeat_index = repeats()`. Every skip
(the base's and the check's own `self.skip(...)`) keeps its message as `skip_reason` in the JSON report.
"""
import os

import reframe as rfm
import reframe.core.runtime as rt
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import parameter, run_after, run_before, sanity_function, variable
from reframe.core.exceptions import SanityError

from stackproof import files
from stackproof.benchparse import PARSERS, BenchParseError
from stackproof.paths import REPO
from stackproof.reframe.identity import check_identity, identity_rows
from stackproof.reframe.layout import nodes_needed
from stackproof.reframe.profile import profile_values
from stackproof.reframe.stack import StackLauncher, launcher_name, not_ready, stack_of
from stackproof.stacks import StackError, load_stack, view_var

REFERENCES = REPO / 'reframe-tests' / 'references'


def repeat_count():
    """STACKPROOF_REPEAT (default 5): how many separate launches each performance check makes."""
    value = os.environ.get('STACKPROOF_REPEAT', '5')
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f'STACKPROOF_REPEAT={value!r}: expected a positive integer')
    return int(value)


def repeats():
    """`repeat_index = repeats()` in a check's body: STACKPROOF_REPEAT separate launches, each a test
    case of its own (ReFrame runs each repetition for every stack before the next one, so the stacks
    interleave). Declared first, it comes first in the test's name, as the results database has it."""
    return parameter(range(repeat_count()), loggable=True)


def reference_path(stack, reference_file):
    """(path on disk, value for `reference = {'$ref': ...}`) of a stack's reference file, under
    RFM_REFERENCE_PREFIX when set (a site's own references/<stack>/*.yaml), else the project's."""
    prefix = rt.runtime().get_option('general/0/reference_prefix')
    rel = os.path.join(stack, reference_file)
    return os.path.join(prefix or str(REFERENCES), rel), (rel if prefix else os.path.join(str(REFERENCES), rel))


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

    # ---- what the base records -----------------------------------------------------------------------
    #: the stack under test (its environment's name for an environment that is no stack)
    stack = variable(str, value='', loggable=True)
    #: the MPI library each rank really ran with (rank 0's), from the identity probe
    mpi_library = variable(str, value='', loggable=True)
    mpi_library_path = variable(str, value='', loggable=True)
    #: why the check was skipped ('' when it was not), set by skip(): ReFrame prints a skip's message
    #: but keeps none in its JSON report, which the report (and anyone after the run) reads
    skip_reason = variable(str, value='', loggable=True)

    def verify(self):
        """The check's own sanity conditions, called after the identity probe's: True, a deferred
        expression (sn.assert_*), or a SanityError naming the file and what was expected."""
        return True

    def measure(self):
        """The performance variables from the output, {name: (value, unit)}; a value None (a quantity
        this output does not print) is left out."""
        return {}

    @run_after('setup')
    def setup_stack(self):
        """Steps 1-3: the stack, its launcher, the profile, the references."""
        name = stack_of(self.current_environ)
        self.stack = name or self.current_environ.name
        if name is not None:
            if not self.is_dry_run():
                try:
                    why = not_ready(load_stack(name))
                except StackError as exc:
                    why = str(exc)
                if why:
                    self.skip(why)
            kind = 'slurm' if launcher_name(self) == 'srun' else 'local'
            try:
                argv = self.stack_spec.launch_command(kind)
            except StackError as exc:
                self.skip(f'{exc}: this check cannot launch on {self.current_partition.fullname}')
            self.job.launcher = StackLauncher(self.job.launcher, argv)
        if self.under_profile:
            profile = getattr(self, 'profile', None)
            self.profile_env = profile_values(self.current_partition, profile if isinstance(profile, str) and profile
                                              else None, self.stagedir, dry_run=self.is_dry_run(),
                                              noise_daemon=self.noise_daemon)
        if self.reference_file and name:
            path, ref = reference_path(name, self.reference_file)
            if os.path.isfile(path):
                self.reference = {'$ref': ref}

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

    @run_before('run')
    def prepare_launch(self):
        """Steps 4-5: a job that fits the partition; the identity probe before the benchmark."""
        have = self.current_partition.extras.get('nodes')
        need = nodes_needed(self.num_tasks, self.num_tasks_per_node)
        if have and need > have:
            self.skip(f'needs {need} nodes ({self.num_tasks} tasks, {self.num_tasks_per_node} per node); '
                      f'{self.current_partition.fullname} has {have}')
        if self.records_identity:
            probe = self.stack_binary('probe')
            self.job.num_tasks = self.num_tasks      # ReFrame copies it only when the job is prepared
            launch = self.job.launcher.run_command(self.job)
            self.prerun_cmds = [f'{launch} {probe} > identity.out 2>&1'] + list(self.prerun_cmds)

    @sanity_function
    def validate(self):
        """Steps 6-8, in order: the identity probe, the check's own conditions, the measured values."""
        return sn.all([self._identity_ok(), self._verified(), self._measured()])

    @sn.deferrable
    def _identity_ok(self):
        if not self.records_identity:
            return True
        path = self.stage_file('identity.out')
        rows = identity_rows(path)
        if rows:
            first = rows[min(rows)]
            self.mpi_library, self.mpi_library_path = first['version'], first['library']
        check_identity(rows, path, self.stack_spec, self.num_tasks)
        return True

    @sn.deferrable
    def _verified(self):
        return sn.evaluate(self.verify())

    @sn.deferrable
    def _measured(self):
        values = {name: (v, unit) for name, (v, unit) in self.measure().items() if v is not None}
        if values:
            self.perf_variables = {name: sn.make_performance_function(lambda v=v: v, unit)
                                   for name, (v, unit) in values.items()}
        return True

    def skip(self, msg=None):
        """ReFrame's skip (also behind skip_if), keeping the message as the loggable `skip_reason`."""
        self.skip_reason = str(msg) if msg else f'{type(self).__name__} skipped itself without a message'
        super().skip(msg)

    # ---- for the check's own code ----------------------------------------------------------------------
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
                  f'{st.name}` (OSU/AMG/SW4 need their sources: upstream or STACKPROOF_SOURCE_MIRROR), or point '
                  f'benchmarks.{name} / {view_var(st.name)} at a build ({st.file})')

    def stage_file(self, name=None):
        """Absolute path of a file in the stage directory (default: the job's stdout)."""
        return os.path.join(self.stagedir, name or self.job.stdout)

    def parse_output(self, kind, name=None):
        """Benchmark output parsed by stackproof.benchparse (cached per file); malformed output fails
        sanity with the file and what was expected."""
        path = self.stage_file(name)
        cache = self.__dict__.setdefault('_stackproof_parsed', {})
        if path not in cache:
            try:        # the job (or a virtual cluster's node, on its share) wrote it: stackproof.files
                text = files.read_in(self.stagedir, name or self.job.stdout).decode(errors='replace')
                cache[path] = PARSERS[kind](text, path)
            except (OSError, files.UnsafePath) as exc:
                raise SanityError(f'{path}: cannot read benchmark output ({exc})') from None
            except BenchParseError as exc:
                raise SanityError(str(exc)) from None
        return cache[path]
