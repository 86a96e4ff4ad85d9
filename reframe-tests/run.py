#!/usr/bin/env python3
"""Run the stackproof acceptance suite with ReFrame for one system and one or more stacks.

  python reframe-tests/run.py --system local --stack laptop [-- EXTRA REFRAME ARGS]
  python reframe-tests/run.py --system testcluster --stack commodity --stack vendor --dry-run

Before anything runs: the system and stack names are checked against the configuration (ReFrame
itself would run zero tests for an unknown stack) and every stack must pass `stackproof stack check
NAME --kind local|slurm` (stack file, launcher, binaries, MPI linkage, vendor environment): one
error naming the stack and the fix, exit 2. Then the session is tagged with the stacks and
`reframe -C reframe-tests/config/site.py --system S -p '^(STACKS)$' -r` runs; exit status is
ReFrame's, except that a run that measured nothing fails (stackproof.run_verdict): 0 test cases
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
    for sysconf in config['systems']:
        if sysconf['name'] == system.split(':')[0]:
            return sorted({env for part in sysconf['partitions'] for env in part['environs']})
    return None


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
    args = parser.parse_args(argv)

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
    if not (args.print_command or args.dry_run or args.no_preflight):
        problem = preflight(args.stack, system_kind(config, args.system))
        if problem:
            print(f'run.py: error: {problem}', file=sys.stderr)
            return 2
    if args.print_command:
        print(' '.join(cmd))
        return 0
    return run_checked(cmd, config, args, extra)


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
    from stackproof.run_verdict import problems, skip_reasons
    report = next((a.split('=', 1)[1] for a in extra if a.startswith('--report-file=')), None)
    if report is None and '--report-file' in extra[:-1]:
        report = extra[extra.index('--report-file') + 1]
    tmpdir = None
    if report is None:
        tmpdir = tempfile.mkdtemp(prefix='stackproof-run-')
        report = os.path.join(tmpdir, 'report.json')
        cmd = cmd + ['--report-file', report]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    lines = []
    for line in proc.stdout:
        sys.stdout.write(line)
        lines.append(line)
    rc = proc.wait()
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
    narrowed = any(a in ('-n', '--name', '-t', '--tag', '-x', '--exclude') or
                   a.startswith(('--name=', '--tag=', '--exclude=')) for a in extra) or \
        args.tag not in (None, 'acceptance', 'gpu')
    found = problems(cases, gpu_partitions(config, args.system, extra), skip_reasons(''.join(lines)), narrowed,
                     f"system {args.system} stack {'+'.join(args.stack)}" + (f' tag {args.tag}' if args.tag else ''))
    for problem in found:
        print(f'run.py: error: {problem}', file=sys.stderr)
    return rc or (1 if found else 0)


if __name__ == '__main__':
    sys.exit(main())
