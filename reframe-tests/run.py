#!/usr/bin/env python3
"""Run the stackproof acceptance suite with ReFrame for one system and one or more stacks.

  python reframe-tests/run.py --system local --stack laptop [-- EXTRA REFRAME ARGS]
  python reframe-tests/run.py --system testcluster --stack commodity --stack vendor --dry-run
  python reframe-tests/run.py --system testcluster --stack commodity --profile all \
      [--noise-daemon 10Hz-2500us] [-- --report-file R.json]

Profiles (test cluster): the core-specialization profile is a property of the partition, so with
--profile P (repeatable, or `all`: every profile of slurm-conf/profiles.yaml this node type can
run) the test cluster is brought up in P (`stackproof cluster up --profile P --noise-daemon none`,
its other settings kept) and one ReFrame session runs the checks; checks for other profiles skip.
Each --noise-daemon SIG adds, per profile, a session with that daemon on the node running only
FWQNoise (its `daemon-SIG` rows). The sessions' reports are merged into one (--report-file).

Before anything runs: the system and stack names are checked against the configuration (ReFrame
itself would run zero tests for an unknown stack) and every stack must pass `stackproof stack check
NAME --kind local|slurm` (stack file, launcher, binaries, MPI linkage, vendor environment): one
error naming the stack and the fix, exit 2. Then the session is tagged with the stacks and
`reframe -C reframe-tests/config/site.py --system S -p '^(STACKS)$' -r` runs; exit status is
ReFrame's, except that a run that measured nothing fails (stackproof.report.outcome): 0 test cases
selected, or a GPU partition whose GPU checks were all skipped. Environment: STACKPROOF_RFM_PREFIX,
STACKPROOF_RESULTS_DB, RFM_REFERENCE_PREFIX, STACKPROOF_STACKS_ROOT, STACKPROOF_STACKS_DIR,
STACKPROOF_<STACK>_VIEW, STACKPROOF_REPEAT (docs/acceptance.md).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
CONFIG = HERE / 'config' / 'site.py'


def load_config():
    sys.path.insert(0, str(HERE / 'config'))
    from reframe.utility import import_module_from_file
    return import_module_from_file(str(CONFIG)).site_configuration


def stacks_of(config, system):
    """The stacks (environments other than the conventional `builtin`/`default`) of a system."""
    import partitions
    for sysconf in config['systems']:
        if sysconf['name'] == system.split(':')[0]:
            return sorted({env for part in sysconf['partitions'] for env in part['environs']
                           if env not in partitions.CONVENTIONAL})
    return None


def switchable(config, system):
    """Whether stackproof switches the system's profiles (the test cluster: feature `profiles`)."""
    return any('profiles' in p.get('features', []) for s in config['systems'] if s['name'] == system.split(':')[0]
               for p in s['partitions'])


def profiles_to_run(requested):
    """The profiles of --profile (`all`: every catalog profile the local node type can run)."""
    from stackproof.errors import StackproofError
    from stackproof.nodes.nodetype import from_host
    from stackproof.nodes.profiles import plan, profile_names
    known = profile_names()
    if 'all' in requested:
        nt = from_host('local')
        out = []
        for name in known:
            try:
                plan(nt, name)
            except StackproofError:
                continue
            out.append(name)
        return out
    unknown = [p for p in requested if p not in known]
    if unknown:
        sys.exit(f'run.py: error: unknown profile {", ".join(unknown)} (known: {", ".join(known)}, all)')
    return list(dict.fromkeys(requested))


def system_kind(config, system):
    """`slurm` when the system's partitions launch with srun, else `local` (stack file launcher keys)."""
    for sysconf in config['systems']:
        if sysconf['name'] == system:
            launchers = {part['launcher'] for part in sysconf['partitions']}
            return 'slurm' if 'srun' in launchers else 'local'
    return 'local'


def preflight(stacks, kind):
    """`stackproof stack check` for every stack; a message naming each problem, or None."""
    from stackproof.stacks import StackError
    from stackproof.stacks.preflight import ensure_ready
    try:
        ensure_ready(stacks, kind)
    except StackError as exc:
        return str(exc)
    return None


def reframe_command(args, extra):
    reframe = shutil.which('reframe', path=os.path.dirname(sys.executable)) or shutil.which('reframe')
    if reframe is None:
        sys.exit('run.py: error: reframe not found: run `make venv` (reframe-hpc is pinned in requirements-lock.txt)')
    cmd = [reframe, '-C', str(CONFIG), '--system', args.system,
           '-p', '^(' + '|'.join(args.stack) + ')$',
           '--session-extras', f"stack={'+'.join(args.stack)}",
           '--exec-policy=serial']
    if args.tag:
        cmd += ['-t', args.tag]
    cmd += ['--dry-run'] if args.dry_run else ['-r']
    return cmd + extra


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = []
    if '--' in argv:
        extra = argv[argv.index('--') + 1:]
        argv = argv[:argv.index('--')]
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--system', required=True, help='local, testcluster, or a site system (config/systems/)')
    parser.add_argument('--stack', action='append', required=True,
                        help='a stack file name: commodity, vendor, commodity-next, mpich (repeatable)')
    parser.add_argument('--tag', help='only checks with this tag (e.g. acceptance, ci, osu)')
    parser.add_argument('--dry-run', action='store_true', help='generate job scripts, run nothing')
    parser.add_argument('--print-command', action='store_true', help='print the reframe command and exit')
    parser.add_argument('--no-preflight', action='store_true',
                        help='skip `stackproof stack check` (the checks then fail one by one instead)')
    parser.add_argument('--profile', action='append', default=[],
                        help='test cluster: bring it up in this profile and run a session (repeatable; all)')
    parser.add_argument('--noise-daemon', action='append', default=[], metavar='FREQHz-DURATION',
                        help='with --profile: per profile, one more session with this noise daemon (FWQNoise only)')
    args = parser.parse_args(argv)
    if args.noise_daemon and not args.profile:
        parser.error('--noise-daemon needs --profile')

    try:
        config = load_config()
    except Exception as exc:     # the configuration's own errors (lock probe, node types) are user errors
        sys.exit(f'run.py: error: cannot load {CONFIG}: {exc}')
    systems = [s['name'] for s in config['systems']]
    stacks = stacks_of(config, args.system)
    if stacks is None:
        import partitions
        why = partitions.UNAVAILABLE.get(args.system)
        if why:
            sys.exit(f'run.py: error: system {args.system!r} is not available here: {why}')
        sys.exit(f'run.py: error: unknown system {args.system!r} (known: {", ".join(systems)})')
    unknown = [s for s in args.stack if s not in stacks]
    if unknown:
        sys.exit(f'run.py: error: unknown stack {", ".join(map(repr, unknown))} for system {args.system!r} '
                 f'(known: {", ".join(stacks)}): describe it in reframe-tests/stacks/NAME.yaml '
                 '(or a directory in $STACKPROOF_STACKS_DIR), see docs/acceptance.md')
    cmd = reframe_command(args, extra)
    # ReFrame runs a test's environments in the partition's order: the stacks in the order given
    # (config/partitions.py run_order), so a comparison's pairs run A B or B A as asked
    os.environ['STACKPROOF_STACK_ORDER'] = ','.join(args.stack)
    if not (args.print_command or args.dry_run or args.no_preflight):
        problem = preflight(args.stack, system_kind(config, args.system))
        if problem:
            print(f'run.py: error: {problem}', file=sys.stderr)
            return 2
    if args.print_command:
        print(' '.join(cmd))
        return 0
    if args.profile:
        if args.dry_run or not switchable(config, args.system):
            sys.exit(f'run.py: error: --profile switches the test cluster\'s profile; system {args.system} '
                     'runs the profile its node image has (or use --dry-run without --profile)')
        return run_profiles(cmd, config, args, extra)
    return run_checked(cmd, config, args, extra)


def report_option(extra):
    """(the --report-file of REFRAME ARGS or None, REFRAME ARGS without it)."""
    out, report, skip = [], None, False
    for i, a in enumerate(extra):
        if skip:
            skip = False
        elif a.startswith('--report-file='):
            report = a.split('=', 1)[1]
        elif a == '--report-file' and i + 1 < len(extra):
            report, skip = extra[i + 1], True
        else:
            out.append(a)
    return report, out


def cluster_up(profile, daemon):
    """`stackproof cluster up --profile P --noise-daemon D` (the cluster's other settings kept)."""
    cmd = [sys.executable, '-m', 'stackproof.cli', 'cluster', 'up', '--profile', profile, '--noise-daemon', daemon]
    print(f'run.py: {" ".join(cmd[2:])}', flush=True)
    return subprocess.run(cmd).returncode


def merge_reports(paths, target):
    """One ReFrame report from several sessions, as if one session had run each test case in the
    configuration it needs: a case skipped in one session (another profile) and run in another keeps
    the run; a case skipped everywhere is kept once. Session info: the first session's, counts of the
    merged cases, the sessions' UUIDs in `stackproof_sessions`."""
    docs = []
    for path in paths:
        with open(path) as fh:
            docs.append(json.load(fh))
    merged = dict(docs[0])
    runs = {}
    for d in docs:       # run i of every session is the same retry round
        for i, run in enumerate(d.get('runs', [])):
            cases = runs.setdefault(i, ({}, dict(run)))[0]
            for tc in run.get('testcases', []):
                key = (tc.get('name'), tc.get('system'), tc.get('partition'), tc.get('environ'))
                if key not in cases or cases[key].get('result') == 'skip':
                    cases[key] = tc
    merged['runs'] = []
    for i in sorted(runs):
        cases, run = runs[i]
        merged['runs'].append(dict(run, testcases=list(cases.values()), num_cases=len(cases)))
    last = merged['runs'][-1]['testcases'] if merged['runs'] else []
    info = dict(merged.get('session_info', {}))
    info['num_cases'] = len(merged['runs'][0]['testcases']) if merged['runs'] else 0
    info['num_failures'] = sum(tc.get('result') == 'fail' for tc in last)
    info['num_aborted'] = sum(tc.get('result') == 'abort' for tc in last)
    info['num_skipped'] = sum(tc.get('result') == 'skip' for tc in last)
    info['time_end'] = docs[-1].get('session_info', {}).get('time_end', info.get('time_end'))
    info['stackproof_sessions'] = [d.get('session_info', {}).get('uuid') for d in docs]
    merged['session_info'] = info
    with open(target, 'w') as fh:
        json.dump(merged, fh, indent=1)


def run_profiles(cmd, config, args, extra):
    """One cluster configuration and one ReFrame session per profile (and noise daemon); the
    reports merged into REFRAME ARGS' --report-file (else a temporary one); the verdict on all."""
    import partitions
    cmd = cmd[:len(cmd) - len(extra)] if extra else cmd      # reframe_command appended REFRAME ARGS
    report, extra = report_option(extra)
    tmpdir = tempfile.mkdtemp(prefix='stackproof-profiles-')
    sessions = [(p, 'none') for p in profiles_to_run(args.profile)] + \
        [(p, d) for d in args.noise_daemon for p in profiles_to_run(args.profile)]
    paths, rc, lines = [], 0, []
    for profile, daemon in sessions:
        if cluster_up(profile, daemon) != 0:
            print(f'run.py: error: `stackproof cluster up --profile {profile} --noise-daemon {daemon}` failed',
                  file=sys.stderr)
            rc = rc or 1
            continue
        path = os.path.join(tmpdir, f'report-{profile}-{daemon}.json')
        only = ['-n', 'FWQNoise'] if daemon != 'none' else []
        # each session its own stage/output tree: a later session that skips a check would otherwise
        # clean the output (e.g. the FWQ trace) an earlier session kept for it
        prefix = os.path.join(partitions.default_prefix(), 'sessions', f'{profile}-{daemon}')
        session_rc, session_lines = stream(cmd + extra + only + ['--prefix', prefix, '--report-file', path])
        lines += session_lines
        rc = rc or session_rc
        if os.path.isfile(path):
            paths.append(path)
    target = report or os.path.join(tmpdir, 'report.json')
    cases = None
    if paths:
        merge_reports(paths, target)
        with open(target) as fh:
            cases = [tc for run in json.load(fh).get('runs', []) for tc in run.get('testcases', [])]
    found = verdict(cases, config, args, extra, lines)
    shutil.rmtree(tmpdir, ignore_errors=True)
    return rc or (1 if found else 0)


def stream(cmd):
    """Run ReFrame, echoing its output; (exit status, output lines)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    lines = []
    for line in proc.stdout:
        sys.stdout.write(line)
        lines.append(line)
    return proc.wait(), lines


def verdict(cases, config, args, extra, lines):
    """Print and return the problems of a run that measured nothing (stackproof.report.outcome)."""
    from stackproof.report.outcome import problems, skip_reasons
    narrowed = any(a in ('-n', '--name', '-t', '--tag', '-x', '--exclude') or
                   a.startswith(('--name=', '--tag=', '--exclude=')) for a in extra) or \
        args.tag not in (None, 'acceptance', 'gpu')
    found = problems(cases, gpu_partitions(config, args.system, extra), skip_reasons(''.join(lines)), narrowed,
                     f"system {args.system} stack {'+'.join(args.stack)}" + (f' tag {args.tag}' if args.tag else ''))
    for problem in found:
        print(f'run.py: error: {problem}', file=sys.stderr)
    return found


def gpu_partitions(config, system, extra):
    """'sys:part' of the partitions with real GPUs (feature `gpu`, not `fakegpu`) this run covers:
    --system S or S:P, the last one given (ReFrame's rule) when REFRAME ARGS repeat it."""
    for i, arg in enumerate(extra):
        if arg == '--system' and i + 1 < len(extra):
            system = extra[i + 1]
        elif arg.startswith('--system='):
            system = arg.split('=', 1)[1]
    name, _, only = system.partition(':')
    return [f"{name}:{p['name']}" for s in config['systems'] if s['name'] == name
            for p in s['partitions'] if 'gpu' in p.get('features', []) and 'fakegpu' not in p.get('features', [])
            and only in ('', p['name'])]


def run_checked(cmd, config, args, extra):
    """Run ReFrame, echoing its output, then fail a run that measured nothing (ReFrame says PASSED
    when no check was selected or every one was skipped)."""
    report = next((a.split('=', 1)[1] for a in extra if a.startswith('--report-file=')), None)
    if report is None and '--report-file' in extra[:-1]:
        report = extra[extra.index('--report-file') + 1]
    tmpdir = None
    if report is None:
        tmpdir = tempfile.mkdtemp(prefix='stackproof-run-')
        report = os.path.join(tmpdir, 'report.json')
        cmd = cmd + ['--report-file', report]
    rc, lines = stream(cmd)
    cases = None
    if os.path.isfile(report):
        try:
            with open(report) as fh:
                cases = [tc for run in json.load(fh).get('runs', []) for tc in run.get('testcases', [])]
        except (OSError, ValueError, AttributeError) as exc:
            print(f'run.py: error: cannot read the ReFrame report {report}: {exc}', file=sys.stderr)
            return rc or 1
    if tmpdir:
        shutil.rmtree(tmpdir, ignore_errors=True)
    found = verdict(cases, config, args, extra, lines)
    return rc or (1 if found else 0)


if __name__ == '__main__':
    sys.exit(main())
