"""NodeProfile: the core-specialization profile (slurm-conf/profiles.yaml) is a property of the
partition, never an action of a check. A check names the profile it measures (its `profile`
parameter; a stack benchmark without one is measured under `baseline`) and reads the profile's
values (profile.env: application cores, system CPUs, srun binding) from `self.profile_env`.

- partitions with feature `profiles` (the test cluster): the profile the running cluster was
  started with (<stackproof_root>/etc/stackproof/profile.env, `stackproof cluster up --profile P`).
  A check for another profile is skipped, saying how to bring the cluster up in it; so is a check
  measured without a noise daemon while the cluster runs one (`cluster up --noise-daemon`), and the
  reverse (`noise_daemon` below);
- partitions with `corespec` (real sites): the node image's /etc/stackproof/profile.env, same rule;
- anything else (and --dry-run): `baseline` (or the check's profile) rendered for the node type.
"""
import os
import subprocess

import reframe as rfm
from reframe.core.builtins import run_after

from stackproof.nodes.profiles import read_profile_env

from .stack import launcher_name
from .util import stackproof_cmd


def read_env_file(path):
    return read_profile_env(path)


def render_profile(nodetype, profile, outdir):
    """Render a profile with `stackproof slurm render` (the same machinery the cluster uses) and
    return its profile.env values; used where no live profile exists (dry runs, real sites)."""
    proc = subprocess.run(stackproof_cmd('slurm', 'render', '--nodetype', nodetype, '--profile', profile,
                                         '-o', str(outdir)), capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f'stackproof slurm render --nodetype {nodetype} --profile {profile} failed: '
                           f'{proc.stderr.strip()}')
    return read_env_file(os.path.join(outdir, 'etc/stackproof/profile.env'))


class NodeProfile(rfm.RegressionTestPlugin):
    #: the noise daemon the nodes must run ('' none; FWQ's daemon rows name theirs)
    noise_daemon = ''

    def wanted_profile(self):
        """(whether this check depends on the nodes' profile, the profile it measures or None for
        the node image's own)."""
        profile = getattr(self, 'profile', None)
        if isinstance(profile, str) and profile:
            return True, profile
        return bool(getattr(self, 'records_identity', False)), None

    @run_after('setup')
    def _node_profile(self):
        active, profile = self.wanted_profile()
        if not active:
            return
        part = self.current_partition
        switchable = 'profiles' in part.features
        fixed = 'corespec' in part.features and not switchable
        if profile is None and not (fixed and not self.is_dry_run()):
            profile = 'baseline'
        if self.is_dry_run() or not (switchable or fixed):
            try:
                self.profile_env = render_profile(part.extras['nodetype'], profile,
                                                  os.path.join(self.stagedir, 'profile-render'))
            except RuntimeError as exc:
                self.skip(str(exc))
            return
        installed = os.path.join(part.extras.get('stackproof_root', '/'), 'etc/stackproof/profile.env')
        if not os.path.isfile(installed):
            self.skip(f'{installed} not found: the nodes run no stackproof profile ' +
                      ('(`stackproof cluster up`)' if switchable else
                       '(render one with `stackproof slurm render` into the node image)'))
        values = read_env_file(installed)
        running = values.get('STACKPROOF_PROFILE')
        if profile is not None and running != profile:
            how = f'`stackproof cluster up --profile {profile}`' if switchable else \
                'boot the nodes with that profile'
            self.skip(f'{part.fullname} runs profile {running!r}; this check measures {profile!r}: {how}')
        daemon = part.extras.get('noise_daemon') or ''
        if switchable and daemon != self.noise_daemon:
            self.skip(f'{part.fullname} runs ' + (f'noise daemon {daemon}' if daemon else 'no noise daemon') +
                      '; this check measures ' +
                      (f'noise daemon {self.noise_daemon}' if self.noise_daemon else 'without one') +
                      f': `stackproof cluster up --profile {running} --noise-daemon {self.noise_daemon or "none"}`')
        self.profile_env = values


def cpu_bind_options(test, env):
    """Launcher options placing one rank on each application core of the profile: srun's
    --cpu-bind map, or the stack's own local-launcher dialect (stack file `launcher.local_bind`)."""
    if launcher_name(test) == 'srun':
        # The mpibind plugin (TOSS's default binding) would override an explicit --cpu-bind.
        off = ['--mpibind=off'] if 'mpibind' in test.current_partition.features else []
        return off + [f"--cpu-bind={env['STACKPROOF_SRUN_CPU_BIND']}"]
    return test.stack_spec.bind_options(env['STACKPROOF_APP_CORE_FIRST_PUS'])
