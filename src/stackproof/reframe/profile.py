"""The core-specialization profile (slurm-conf/profiles.yaml) is a property of the partition, never
an action of a check. A check names the profile it measures (its `profile` parameter; a check without
one is measured under `baseline` on the test cluster and under the node image's own profile on a site)
and reads the profile's values (profile.env: application cores, system CPUs, srun binding).

- partitions with feature `profiles` (the test cluster): the profile the running cluster was
  started with (<stackproof_root>/etc/stackproof/profile.env, `stackproof cluster up --profile P`).
  A check for another profile is skipped, saying how to bring the cluster up in it; so is a check
  measured without a noise daemon while the cluster runs one (`cluster up --noise-daemon`), and the
  reverse;
- partitions with `corespec` (real sites): the node image's /etc/stackproof/profile.env, same rule;
- anything else (and --dry-run): the profile (default `baseline`) rendered for the node type.
"""
import os
import subprocess
import sys

from stackproof.errors import StackproofError
from stackproof.nodes.profiles import read_profile_env
from stackproof.reframe.stack import launcher_name


def stackproof_cmd(*args):
    """The stackproof CLI of the running Python (ReFrame runs inside the project venv)."""
    return [sys.executable, '-m', 'stackproof.cli', *args]


class ProfileUnavailable(StackproofError):
    """The partition does not run the profile (or noise daemon) a check measures: the check skips
    itself with this message (StackCheck.skip, so the reason is kept in the JSON report)."""


def render_profile(nodetype, profile, outdir):
    """Render a profile with `stackproof slurm render` (the same machinery the cluster uses) and
    return its profile.env values; used where no live profile exists (dry runs, real sites)."""
    proc = subprocess.run(stackproof_cmd('slurm', 'render', '--nodetype', nodetype, '--profile', profile,
                                         '-o', str(outdir)), capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f'stackproof slurm render --nodetype {nodetype} --profile {profile} failed: '
                           f'{proc.stderr.strip()}')
    return read_profile_env(os.path.join(outdir, 'etc/stackproof/profile.env'))


def profile_values(part, profile, stagedir, *, dry_run=False, noise_daemon=''):
    """The profile.env values a check measuring `profile` (None: whatever the node image runs) gets
    on partition `part`; ProfileUnavailable, with the command that provides it, where the partition runs
    another profile or another noise daemon (`noise_daemon`: the one the check measures, '' none)."""
    switchable = 'profiles' in part.features
    fixed = 'corespec' in part.features and not switchable
    if profile is None and not (fixed and not dry_run):
        profile = 'baseline'
    if dry_run or not (switchable or fixed):
        try:
            return render_profile(part.extras['nodetype'], profile, os.path.join(stagedir, 'profile-render'))
        except RuntimeError as exc:
            raise ProfileUnavailable(str(exc)) from None
    installed = os.path.join(part.extras.get('stackproof_root', '/'), 'etc/stackproof/profile.env')
    if not os.path.isfile(installed):
        raise ProfileUnavailable(f'{installed} not found: the nodes run no stackproof profile ' +
                            ('(`stackproof cluster up`)' if switchable else
                             '(render one with `stackproof slurm render` into the node image)'))
    values = read_profile_env(installed)
    running = values.get('STACKPROOF_PROFILE')
    if profile is not None and running != profile:
        how = f'`stackproof cluster up --profile {profile}`' if switchable else 'boot the nodes with that profile'
        raise ProfileUnavailable(f'{part.fullname} runs profile {running!r}; this check measures {profile!r}: {how}')
    daemon = part.extras.get('noise_daemon') or ''
    if switchable and daemon != noise_daemon:
        raise ProfileUnavailable(f'{part.fullname} runs ' + (f'noise daemon {daemon}' if daemon else 'no noise daemon') +
                            '; this check measures ' + (f'noise daemon {noise_daemon}' if noise_daemon else 'without one') +
                            f': `stackproof cluster up --profile {running} --noise-daemon {noise_daemon or "none"}`')
    return values


def cpu_bind_options(test, env):
    """Launcher options placing one rank on each application core of the profile: srun's
    --cpu-bind map, or the stack's own local-launcher dialect (stack file `launcher.local_bind`)."""
    if launcher_name(test) == 'srun':
        # The mpibind plugin (TOSS's default binding) would override an explicit --cpu-bind.
        off = ['--mpibind=off'] if 'mpibind' in test.current_partition.features else []
        return off + [f"--cpu-bind={env['STACKPROOF_SRUN_CPU_BIND']}"]
    return test.stack_spec.bind_options(env['STACKPROOF_APP_CORE_FIRST_PUS'])
