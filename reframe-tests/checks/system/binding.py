"""Binding: each task's CPUs and GPUs equal what mpibind predicts for the node type.

Tasks are launched with `srun --mpibind=on` (the mpibind SPANK plugin) and print their
Cpus_allowed_list and GPU list; the prediction is `mpibind --json --topology XML --ntasks N`
(the CLI: $STACKPROOF_MPIBIND, else build/mpibind/bin/mpibind, else PATH) on the node type's
hwloc XML (partition extras `topology_xml`) or, without one, the node's own `lstopo` output,
restricted to the profile's application CPUs. Under every profile (core specialization is part of
the binding): no task on a reserved (CpuSpecList) or freed core, every application core used. The
plugin keeps to the step's cores by itself; a freed core (freecore profiles: no system change) is
kept out by the profile's MPIBIND_RESTRICT in the job's environment, as an application would.
"""
import json
import os
import shutil
import subprocess

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import parameter, run_after, run_before, variable
from reframe.core.exceptions import SanityError

from stackproof.cpulist import format_list, parse_list
from stackproof.paths import REPO
from stackproof.reframe.check import StackCheck
from stackproof.reframe.profile import app_core_cpus, known_profiles
from stackproof.reframe.stack import system_checks_stack

TASK_LINE = r'^binding task=(\d+) local=(\d+) host=(\S+) cpus=(\S+) gpus=(\S*)$'


def mpibind_cli():
    explicit = os.environ.get('STACKPROOF_MPIBIND')
    for path in ([explicit] if explicit else [str(REPO / 'build/mpibind/bin/mpibind'), shutil.which('mpibind')]):
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


@rfm.simple_test
class MpibindBinding(StackCheck, rfm.RunOnlyRegressionTest):
    #: tasks per node (0: one per application core of the profile)
    tasks_per_node = variable(int, value=0)
    #: every profile (a noise hunt's proposal too, while the test cluster runs it)
    profile = parameter(known_profiles(), loggable=True)
    valid_systems = ['+mpibind']
    valid_prog_environs = ['*']
    executable = 'sh'
    time_limit = '5m'
    exclusive_access = True      # whole nodes, like an application run
    tags = {'acceptance', 'binding', 'mpibind', 'ci'}

    @run_after('init')
    def one_stack(self):
        self.valid_prog_environs = system_checks_stack() or self.valid_prog_environs

    @run_after('setup')
    def set_launch(self):
        self.mpibind = mpibind_cli()
        if not self.mpibind and not self.is_dry_run():
            self.skip('mpibind CLI not found: set STACKPROOF_MPIBIND (or build it: make mpibind-build)')
        extras = self.current_partition.extras
        self.num_tasks_per_node = self.tasks_per_node or int(self.profile_env['STACKPROOF_APP_CORES'])
        self.num_tasks = self.num_tasks_per_node
        self.gpu_var = extras.get('gpu_visible_devices_var') or 'CUDA_VISIBLE_DEVICES'
        self.job.launcher.options = ['--mpibind=on']
        self.env_vars.update({k: self.profile_env[k] for k in ('MPIBIND_RESTRICT', 'MPIBIND_RESTRICT_TYPE')
                              if self.profile_env.get(k)})
        self.app_cores = app_core_cpus(self.profile_env)
        self.executable_opts = [
            "-c", f"'echo binding task=$SLURM_PROCID local=$SLURM_LOCALID host=$(hostname) "
                  f"cpus=$(awk \"/^Cpus_allowed_list:/ {{print \\$2}}\" /proc/self/status) gpus=${{{self.gpu_var}:-}}'"]
        self.topology = extras.get('topology_xml') or 'topology.xml'
        if not extras.get('topology_xml'):
            self.prerun_cmds = ['lstopo-no-graphics --of xml > topology.xml']

    @run_before('sanity')
    def predict(self):
        """mpibind's prediction for this run (computed once, before sanity; a failure of the CLI is
        kept as the reason sanity fails with)."""
        self.prediction, self.prediction_problem = None, ''
        if self.is_dry_run():
            return
        topo = self.topology if os.path.isabs(self.topology) else self.stage_file(self.topology)
        cmd = [self.mpibind, '--json', '--topology', topo, '--ntasks', str(self.num_tasks_per_node)]
        if self.profile_env.get('MPIBIND_RESTRICT'):   # the plugin honours the profile's restriction; so must the prediction
            cmd += ['--restrict', self.profile_env['MPIBIND_RESTRICT'],
                    '--restrict-type', self.profile_env.get('MPIBIND_RESTRICT_TYPE') or 'cpu']
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            self.prediction_problem = f'mpibind --json --topology {topo} failed: {proc.stderr.strip()}'
            return
        try:
            self.prediction = {t['task']: t for t in json.loads(proc.stdout)['tasks']}
        except (ValueError, KeyError, TypeError):
            self.prediction_problem = f'mpibind --json: expected {{"tasks": [...]}}, got {proc.stdout[:120]!r}'

    def predicted(self):
        if self.prediction is None:
            raise SanityError(self.prediction_problem or 'no mpibind prediction')
        return self.prediction

    @sn.deferrable
    def matches_prediction(self, tasks):
        want = self.predicted()
        for rank, local, host, cpus, gpus in tasks:
            pred = want.get(int(local))
            if pred is None:
                raise SanityError(f'mpibind predicted no task {local} for {self.num_tasks_per_node} tasks per node')
            pred_cpus = parse_list(pred['cpus']) if isinstance(pred['cpus'], str) else set(pred['cpus'])
            if parse_list(cpus) != pred_cpus:
                raise SanityError(f'{self.stage_file()}: task {rank} on {host} runs on CPUs {cpus}, '
                                  f'mpibind predicts {format_list(pred_cpus)}')
            pred_gpus = [str(g) for g in pred.get('gpus') or []]
            got_gpus = [g for g in gpus.split(',') if g]
            if got_gpus != pred_gpus:
                raise SanityError(f'{self.stage_file()}: task {rank} on {host} sees GPUs {got_gpus} '
                                  f'({self.gpu_var}), mpibind predicts {pred_gpus}')
        return True

    @sn.deferrable
    def on_application_cores(self, tasks):
        """No task on a CPU outside the profile's application cores, every application core used by a
        task on each node."""
        app = set().union(*self.app_cores)
        used = {}
        for rank, local, host, cpus, gpus in tasks:
            outside = parse_list(cpus) - app
            if outside:
                raise SanityError(f'{self.stage_file()}: task {rank} on {host} runs on CPUs {format_list(outside)}, '
                                  f'outside the application CPUs {format_list(app)} of profile {self.profile}')
            used.setdefault(host, set()).update(parse_list(cpus))
        for host, cpus in used.items():
            idle = [format_list(core) for core in self.app_cores if not core & cpus]
            if idle:
                raise SanityError(f'{self.stage_file()}: no task on {host} uses application core(s) '
                                  f'{"; ".join(idle)} of profile {self.profile}')
        return True

    def verify(self, launch):
        tasks = sn.extractall(TASK_LINE, self.stdout, tag=(1, 2, 3, 4, 5))
        return sn.all([
            sn.assert_eq(sn.count(tasks), self.num_tasks,
                         msg=f'{self.stage_file()}: expected {self.num_tasks} "binding task=" lines, got {{0}}'),
            self.on_application_cores(tasks),
            self.matches_prediction(tasks),
        ])
