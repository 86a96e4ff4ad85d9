"""Core specialization: the profile's daemons run on the system cores
(`usr/local/sbin/stackproof-corespec check`, rendered with the profile) and job steps never get
the system CPUs (each task prints its Cpus_allowed_list). The profile is the partition's (the test
cluster's `stackproof cluster up --profile P`); rows for other profiles are skipped."""
import os

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import parameter, run_after
from reframe.core.exceptions import SanityError

from stackproof.cpulist import format_list, parse_list
from stackproof.nodes.profiles import load_catalog
from stackproof.reframe.check import StackCheck
from stackproof.reframe.stack import system_checks_stack


@rfm.simple_test
class CoreSpecCheck(StackCheck, rfm.RunOnlyRegressionTest):
    #: the profiles that reserve system cores (slurm-conf/profiles.yaml: `reserve: true`)
    profile = parameter([n for n, p in load_catalog()['profiles'].items() if p.get('reserve')], loggable=True)
    valid_systems = ['+profiles', '+corespec']
    valid_prog_environs = ['*']
    executable = 'grep'
    executable_opts = ['Cpus_allowed_list', '/proc/self/status']
    time_limit = '5m'
    exclusive_access = True      # whole nodes, like an application run
    tags = {'acceptance', 'corespec', 'ci'}

    @run_after('init')
    def one_stack(self):
        self.valid_prog_environs = system_checks_stack() or self.valid_prog_environs

    @run_after('setup')
    def set_launch(self):
        self.system_cpus = parse_list(self.profile_env['STACKPROOF_SYSTEM_CPUS'])
        self.num_tasks_per_node = int(self.profile_env['STACKPROOF_APP_CORES'])
        self.num_tasks = self.num_tasks_per_node
        root = self.current_partition.extras.get('stackproof_root', '/')
        script = os.path.join(root, 'usr/local/sbin/stackproof-corespec')
        self.prerun_cmds = [f'{script} check > corespec-check.txt 2>&1; echo "corespec-check-rc=$?"']

    @sn.deferrable
    def daemons_on_system_cpus(self):
        rc = sn.evaluate(sn.extractsingle(r'corespec-check-rc=(\d+)', self.stdout, 1, int))
        if rc != 0:
            with open(self.stage_file('corespec-check.txt')) as fh:
                detail = fh.read().strip()
            raise SanityError(f"{self.stage_file('corespec-check.txt')}: expected every daemon of profile "
                              f'{self.profile} on the system CPUs {format_list(self.system_cpus)}: {detail}')
        return True

    @sn.deferrable
    def steps_off_system_cpus(self):
        for text in sn.evaluate(sn.extractall(r'^Cpus_allowed_list:\s*(\S+)', self.stdout, 1)):
            overlap = parse_list(text) & self.system_cpus
            if overlap:
                raise SanityError(f'{self.stage_file()}: a job step got system CPUs {format_list(overlap)} '
                                  f'(Cpus_allowed_list {text}; system CPUs {format_list(self.system_cpus)})')
        return True

    def verify(self, launch):
        lists = sn.extractall(r'^Cpus_allowed_list:\s*(\S+)', self.stdout, 1)
        return sn.all([
            self.daemons_on_system_cpus(),
            sn.assert_eq(sn.count(lists), self.num_tasks,
                         msg=f'{self.stage_file()}: expected {self.num_tasks} Cpus_allowed_list lines (one per task)'),
            self.steps_off_system_cpus(),
        ])
