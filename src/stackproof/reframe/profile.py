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
from pathlib import Path

from stackproof.cluster import Cluster
from stackproof.errors import StackproofError
from stackproof.nodes.nodetype import load
from stackproof.nodes.profiles import plan, profile_names, read_profile_env
from stackproof.nodes.slurmconf import Site, render, write_tree
from stackproof.reframe.stack import launcher_name


class ProfileUnavailable(StackproofError):
    """The partition does not run the profile (or noise daemon) a check measures: the check skips
    itself with this message (StackCheck.skip, so the reason is kept in the JSON report)."""


def render_profile(nodetype, profile, outdir):
    """Render a profile for a node type into `outdir` with the functions `stackproof slurm render`
    and the test cluster use, and return its profile.env values; used where no live profile exists
    (dry runs, real sites). RuntimeError, one line, for a node type or profile that does not render."""
    try:
        nt = load(nodetype)
        files = render(nt, plan(nt, profile), Site(cluster_name=nt.name, nodes=[f"{nt.name}1"]))
        write_tree(files, Path(outdir))
    except (StackproofError, OSError) as exc:
        raise RuntimeError(f'rendering profile {profile!r} for node type {nodetype!r} failed: {exc}') from None
    return read_profile_env(os.path.join(outdir, 'etc/stackproof/profile.env'))


def known_profiles():
    """The profiles a check may be measured under: the catalog's (slurm-conf/profiles.yaml) and, while
    the test cluster runs with `--profile-file` (a noise hunt's proposal), that file's too. A check
    parameterised by them has a case for the profile the cluster runs, whatever it is."""
    st = Cluster().load_state()
    extra = (st.settings.get('profile_file') or None) if st else None
    try:
        return profile_names(extra)
    except StackproofError:           # the file went away: the catalog still holds
        return profile_names()


def app_core_cpus(env):
    """The CPUs of each application core of a profile (profile.env's srun --cpu-bind masks, one per
    core), in the order the profile lists the cores."""
    text = env['STACKPROOF_SRUN_CPU_BIND']
    kind, _, masks = text.partition(':')
    cores = []
    for mask in masks.split(','):
        try:
            value = int(mask, 16) if kind == 'mask_cpu' and mask.startswith('0x') else 0
        except ValueError:
            value = 0
        if value <= 0:
            raise ValueError(f'STACKPROOF_SRUN_CPU_BIND={text!r}: expected mask_cpu:0xMASK,...')
        cores.append({i for i in range(value.bit_length()) if value >> i & 1})
    return cores


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
