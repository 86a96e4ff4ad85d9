"""FWQ-MPI noise per core-specialization configuration (TOSS-2020 Table III), optionally with an
injected noise signature:
  `10Hz-2500us`         fwq-noise inside the job, on the application CPUs: noise no profile can move
                        (like an application's own helper threads); proves the measurement sees it;
  `daemon-10Hz-2500us`  a noise daemon on the node (test cluster: `stackproof cluster up
                        --noise-daemon`), which the profile treats like snmpd or irqbalance: left to the
                        OS under baseline/freecore, bound to the system cores under corespec/clean.
                        The profiles' mitigation shows in these rows.

The profile (and the noise daemon) is the partition's: the test cluster runs what `stackproof
cluster up --profile P [--noise-daemon SIG]` started, a real site what its node image runs; rows for
another profile are skipped with that reason (reframe-tests/run.py brings the cluster up in each
profile in turn). One rank runs on each application core of the profile (profile.env:
STACKPROOF_APP_CPUS, STACKPROOF_SRUN_CPU_BIND). After the run the trace is reduced
(stackproof.noise: fwq-stats.json); performance variables come from the most affected core.
Profiles are the ones slurm-conf/profiles.yaml defines. Binaries: the stack's `fwq` benchmark (fwq-mpi
built against that stack's MPI) and fwq-noise (no MPI: $STACKPROOF_FWQ_NOISE, else the project's
build/fwq/). The stack comparison row (baseline, no signature) runs for every stack, the profile x
signature matrix once (with STACKPROOF_NOISE_STACK's stack); ReFrame's --repeat repeats them.
"""
import json
import os
import re

import reframe as rfm
from reframe.core.builtins import parameter, run_after, run_before, variable
from reframe.core.exceptions import SanityError

from stackproof.cpulist import parse_list
from stackproof.nodes.profiles import profile_names
from stackproof.noise import TraceError, load, stats_json
from stackproof.noise.tableiv import SAMPLES as TABLE_IV_SAMPLES, WORK as TABLE_IV_WORK
from stackproof.paths import REPO
from stackproof.reframe.check import StackCheck
from stackproof.reframe.profile import cpu_bind_options
from stackproof.reframe.stack import launcher_name, system_checks_stack
from stackproof.report.outcome import injector_not_measured

PROFILES = profile_names()
# injected signatures: <frequency>Hz-<duration> (seed signatures of the paper: long/rare, short/frequent)
SIGNATURES = ['none', '10Hz-2500us', 'daemon-10Hz-2500us']


@rfm.simple_test
class FWQNoise(StackCheck, rfm.RunOnlyRegressionTest):
    #: direction of each performance variable (the report never guesses it from the name)
    perf_better = {'min': 'lower', 'mean': 'lower', 'max': 'lower', 'std': 'lower', 'noise_fraction': 'lower'}
    perf_headline = ['noise_fraction']
    profile = parameter(PROFILES, loggable=True)
    signature = parameter(SIGNATURES, loggable=True)
    #: Table IV's sizing (stackproof.noise.tableiv: six periods of a 10 Hz daemon in 10 us quanta; its
    #: time here in docs/performance.md); the paper's own is -w 4096 (4.35 us there) x 100,000 samples
    samples = variable(int, value=TABLE_IV_SAMPLES, loggable=True)
    keep_files = ['fwq.dat']     # the raw trace: `stackproof report` plots it (Fig. 2 style)
    work = variable(int, value=TABLE_IV_WORK, loggable=True)     # -w loop iterations
    nodes = variable(int, value=1)
    noise_seconds = variable(int, value=60)                 # upper bound; the injector is stopped after FWQ
    #: with a signature, sample for at least this many signature periods (assuming quanta >= 1 us)
    signature_periods = variable(int, value=5)
    valid_systems = ['*']
    valid_prog_environs = ['+mpi']
    reference_file = 'fwq.yaml'
    records_identity = True
    time_limit = '15m'
    exclusive_access = True      # whole nodes: ranks are bound to the profile's application cores
    tags = {'acceptance', 'fwq', 'noise', 'ci'}

    @run_after('init')
    def profiles_need_switchable_nodes(self):
        if self.profile != 'baseline':
            self.valid_systems = ['+profiles', '+corespec']
        if (self.profile, self.signature) != ('baseline', 'none'):
            # the profile x noise matrix measures the nodes: once, with one stack when one is named
            self.valid_prog_environs = system_checks_stack() or self.valid_prog_environs
        if self.signature.startswith('daemon-'):
            self.noise_daemon = self.signature[len('daemon-'):]     # the partition must run it (StackCheck)

    def _fwq_noise(self):
        path = os.environ.get('STACKPROOF_FWQ_NOISE') or str(REPO / 'build' / 'fwq' / 'fwq-noise')
        if os.path.isfile(path) and os.access(path, os.X_OK) or self.is_dry_run():
            return path
        self.skip(f'fwq-noise not found at {path}: build it (make fwq-build) or set STACKPROOF_FWQ_NOISE')

    @run_after('setup')
    def set_launch(self):
        self.executable = self.stack_binary('fwq')
        daemon = self.signature.startswith('daemon-')
        signature = self.signature[len('daemon-'):] if daemon else self.signature
        if daemon and 'profiles' not in self.current_partition.features and not self.is_dry_run():
            self.skip('a node noise daemon needs a system whose profiles stackproof switches (the local '
                      'test cluster, feature "profiles"); on a site, run the daemon on the nodes yourself')
        noise = self._fwq_noise() if signature != 'none' and not daemon else None
        self.injector_report = 'noise-report.json' if noise else None
        self.app_cpus = parse_list(self.profile_env['STACKPROOF_APP_CPUS'])
        self.num_tasks_per_node = int(self.profile_env['STACKPROOF_APP_CORES'])
        self.num_tasks = self.nodes * self.num_tasks_per_node
        self.job.launcher.options = cpu_bind_options(self, self.profile_env)
        self.executable_opts = ['-n', str(self.samples), '-w', str(self.work), '-o', 'fwq.dat']
        if signature != 'none':
            freq, duration = re.fullmatch(r'(\d+)Hz-(\w+)', signature).groups()
            samples = max(self.samples, int(self.signature_periods / float(freq) * 1e6))
            self.executable_opts[1] = str(samples)
        if noise:
            inject = (f'{noise} --freq {freq} --duration {duration} --cpus {self.profile_env["STACKPROOF_APP_CPUS"]} '
                      f'--seconds {self.noise_seconds} -o noise-report.json')
            if launcher_name(self) == 'srun':
                # one injector per node beside the job's steps, owning every CPU jobs may use
                # (it pins its threads itself). -n is explicit: the step would otherwise inherit the
                # job's SLURM_NTASKS and ask for ntasks x usable CPUs, which Slurm refuses ("More
                # processors requested than permitted") - the injector then never ran.
                usable = self.current_partition.processor.num_cpus - \
                    len(parse_list(self.profile_env['STACKPROOF_SYSTEM_CPUS']))
                inject = (f'srun --overlap -N {self.nodes} -n {self.nodes} --ntasks-per-node=1 --cpus-per-task={usable} '
                          f'--cpu-bind=none {inject}')
            self.prerun_cmds = [f'{inject} &', 'NOISE_PID=$!', 'sleep 1']
            self.postrun_cmds = ['kill $NOISE_PID 2>/dev/null', 'wait $NOISE_PID']
            if launcher_name(self) == 'srun':
                # SIGTERM to the injector itself, on every node: it then writes its report and exits.
                # Killing the srun instead cancels the step and SIGKILLs the injector before it can.
                self.postrun_cmds = [f'srun --overlap -N {self.nodes} -n {self.nodes} --ntasks-per-node=1 '
                                     'pkill -TERM -x fwq-noise', 'wait $NOISE_PID']

    @run_before('sanity')
    def reduce_trace(self):
        """An injected signature whose SCHED_FIFO was refused (or that was not injected) is not the
        signature this row is about: the case is skipped as "not measured (reason)", never passed.
        Else the trace is reduced once (stackproof.noise), kept as fwq-stats.json; a missing or
        malformed trace is kept as the reason sanity fails with."""
        self.fwq_stats, self.fwq_problem = None, ''
        if self.is_dry_run():
            return
        why = injector_not_measured(self.stage_file(self.injector_report)) if self.injector_report else None
        if why:
            self.skip_not_measured(why)
        trace = self.stage_file('fwq.dat')
        if not os.path.isfile(trace):
            self.fwq_problem = f'{trace}: expected the fwq-mpi trace (-o fwq.dat); not written'
            return
        try:
            doc = stats_json(load(trace))
        except (TraceError, OSError, ValueError) as exc:
            self.fwq_problem = f'{trace}: cannot reduce the FWQ trace: {exc}'
            return
        with open(self.stage_file('fwq-stats.json'), 'w') as fh:
            json.dump(doc, fh, indent=1)
        self.fwq_stats = (doc['cores'], doc['most_affected'])

    def noise_stats(self):
        if self.fwq_stats is None:
            raise SanityError(self.fwq_problem or 'no FWQ statistics')
        return self.fwq_stats

    def figures(self):
        return {'min': 'us', 'mean': 'us', 'max': 'us', 'std': 'us', 'noise_fraction': ''}

    def verify(self, launch):
        """Every rank reported, each on its own application core of the profile."""
        cores, _ = self.noise_stats()
        trace = self.stage_file('fwq.dat')
        ranks = {c['rank'] for c in cores}
        missing = sorted(set(range(self.num_tasks)) - ranks)
        if missing:
            raise SanityError(f'{trace}: expected a report from every rank 0..{self.num_tasks - 1}, '
                              f'missing ranks {missing}')
        outside = sorted({c['cpu'] for c in cores} - self.app_cpus)
        if outside:
            raise SanityError(f'{trace}: expected ranks only on the application CPUs of profile '
                              f'{self.profile} ({self.profile_env["STACKPROOF_APP_CPUS"]}), found CPUs {outside}')
        if self.nodes == 1 and len({c['cpu'] for c in cores}) != self.num_tasks:
            raise SanityError(f'{trace}: expected one rank per application core, ranks share CPUs: '
                              f'{sorted(c["cpu"] for c in cores)}')
        return True

    def measure(self, launch):
        """The most affected core's statistics."""
        _, worst = self.noise_stats()
        return {name: worst.get(f'{name}_us' if name != 'noise_fraction' else name) for name in self.figures()}
