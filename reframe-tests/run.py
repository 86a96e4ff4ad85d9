#!/usr/bin/env python3
"""Run the stackproof acceptance suite with ReFrame for one system and one or more stacks.

  python reframe-tests/run.py --system local --stack laptop [-- EXTRA REFRAME ARGS]
  python reframe-tests/run.py --system testcluster --stack commodity --stack vendor --dry-run
  python reframe-tests/run.py --system testcluster --stack commodity --profile all \
      [--noise-daemon 10Hz-2500us] [-- --report-file R.json]

Profiles (test cluster): the core-specialization profile is a property of the partition, so with
--profile P (repeatable, or `all`: every profile of slurm-conf/profiles.yaml this node type can
run) the test cluster is brought up in P (its other settings kept) and one ReFrame session runs
the checks; checks for other profiles skip. Each --noise-daemon SIG adds, per profile, a session
with that daemon on the node running only FWQNoise (its `daemon-SIG` rows). The sessions' reports
are merged into one (--report-file).

Before anything runs: the system and stack names are checked against the configuration and every
stack must pass `stackproof stack check NAME --kind local|slurm`: one error naming the stack and
the fix, exit 2. Exit status is ReFrame's, except that a run that measured nothing fails: 0 test
cases selected, or a GPU partition whose GPU checks were all skipped. Environment:
STACKPROOF_RFM_PREFIX, STACKPROOF_RESULTS_DB, RFM_REFERENCE_PREFIX, STACKPROOF_STACKS_ROOT,
STACKPROOF_STACKS_DIR, STACKPROOF_<STACK>_VIEW, STACKPROOF_BLOCKS, STACKPROOF_BLOCK_LAUNCHES,
STACKPROOF_BLOCK_STACKS (docs/acceptance.md).

This file only parses the command line: the run is stackproof.reframe.session's.
"""
import argparse
import signal
import sys

from stackproof.errors import InputError, StackproofError
from stackproof.reframe import session
from stackproof.stacks import StackError


def parse(argv):
    """(options, REFRAME ARGS after `--`)."""
    extra = []
    if '--' in argv:
        extra, argv = argv[argv.index('--') + 1:], argv[:argv.index('--')]
    parser = argparse.ArgumentParser(prog='run.py', description=__doc__.split('\n\n')[0])
    parser.add_argument('--system', required=True, help='local, testcluster, or a site system (config/systems/)')
    parser.add_argument('--stack', action='append',
                        help='a stack file name: commodity, vendor, commodity-next, mpich (repeatable)')
    parser.add_argument('--compare-groups', action='store_true',
                        help='print CHECK:COLUMNS of every check tagged compare or fwq (make reframe-compare) and exit')
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
    if not args.stack and not args.compare_groups:
        parser.error('the following arguments are required: --stack')
    if args.noise_daemon and not args.profile:
        parser.error('--noise-daemon needs --profile')
    return args, extra


def _interrupted(signum, frame):
    raise KeyboardInterrupt


def main(argv=None):
    args, extra = parse(list(sys.argv[1:] if argv is None else argv))
    signal.signal(signal.SIGTERM, _interrupted)
    try:
        if args.compare_groups:
            # the checks that compare stacks in blocks, and FWQ's rows (one per stack and profile)
            for check, cols in session.compare_groups(args.system, '(compare|fwq)'):
                print(f"{check}:{','.join(cols)}")
            return 0
        target = session.target(args.system, args.stack)
        if args.print_command:
            print(' '.join(session.command(target, tag=args.tag, dry_run=args.dry_run, extra=extra)))
            return 0
        if args.profile and (args.dry_run or not target.switchable):
            raise StackproofError(f"--profile switches the test cluster's profile; system {args.system} runs the "
                                  'profile its node image has (or use --dry-run without --profile)')
        if not (args.dry_run or args.no_preflight):
            session.preflight(target)
        if args.profile:
            rc, problems = session.run_profiles(target, session.profiles_to_run(args.profile), args.noise_daemon,
                                                tag=args.tag, extra=extra, prog='run.py')
        else:
            rc, problems = session.run_once(target, tag=args.tag, dry_run=args.dry_run, extra=extra)
    except (StackError, InputError) as exc:        # a stack that is not ready, bad input: exit 2
        print(f'run.py: error: {exc}', file=sys.stderr)
        return 2
    except StackproofError as exc:
        print(f'run.py: error: {exc}', file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        session.stop_sessions()        # the session runs in its own process group: it is stopped in order
        print('run.py: interrupted', file=sys.stderr)
        return 130
    for problem in problems:
        print(f'run.py: error: {problem}', file=sys.stderr)
    return rc


if __name__ == '__main__':
    sys.exit(main())
