#!/usr/bin/env python3
"""Run the stackproof acceptance suite with ReFrame for one system and one or more stacks.

  python reframe-tests/run.py --system local --stack laptop [-- EXTRA REFRAME ARGS]
  python reframe-tests/run.py --system testcluster --stack commodity --stack vendor --dry-run

Checks the system and stack names against the configuration first (ReFrame itself would run zero
tests for an unknown stack), tags the session with the stack(s) for `--performance-compare`, and
runs `reframe -C reframe-tests/config/site.py --system S -p '^(STACKS)$' -r`. Exit status is
ReFrame's. Environment: STACKPROOF_RFM_PREFIX, STACKPROOF_RESULTS_DB, RFM_REFERENCE_PREFIX,
STACKPROOF_<STACK>_VIEW and the per-benchmark binary variables (docs/acceptance.md).
"""
import argparse
import os
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CONFIG = HERE / 'config' / 'site.py'


def load_config():
    sys.path.insert(0, str(HERE / 'config'))
    from reframe.utility import import_module_from_file
    return import_module_from_file(str(CONFIG)).site_configuration


def stacks_of(config, system):
    for sysconf in config['systems']:
        if sysconf['name'] == system:
            return sorted({env for part in sysconf['partitions'] for env in part['environs']})
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
    parser.add_argument('--stack', action='append', required=True, help='commodity, vendor or laptop (repeatable)')
    parser.add_argument('--tag', help='only checks with this tag (e.g. acceptance, ci, osu)')
    parser.add_argument('--dry-run', action='store_true', help='generate job scripts, run nothing')
    parser.add_argument('--print-command', action='store_true', help='print the reframe command and exit')
    args = parser.parse_args(argv)

    try:
        config = load_config()
    except Exception as exc:     # the configuration's own errors (lock probe, node types) are user errors
        sys.exit(f'run.py: error: cannot load {CONFIG}: {exc}')
    systems = [s['name'] for s in config['systems']]
    stacks = stacks_of(config, args.system)
    if stacks is None:
        sys.exit(f'run.py: error: unknown system {args.system!r} (known: {", ".join(systems)})')
    unknown = [s for s in args.stack if s not in stacks]
    if unknown:
        sys.exit(f'run.py: error: unknown stack {", ".join(map(repr, unknown))} for system {args.system!r} '
                 f'(known: {", ".join(stacks)})')
    cmd = reframe_command(args, extra)
    if args.print_command:
        print(' '.join(cmd))
        return 0
    os.execv(cmd[0], cmd)


if __name__ == '__main__':
    sys.exit(main())
