"""`stackproof report build`: the command line (noun report, verb build; `--compare` finds the
sessions in the results database instead of taking --run/--session)."""
from __future__ import annotations

import sys
from pathlib import Path

from stackproof.errors import StackproofError


def _cmd_report(args) -> int:
    from stackproof.report.build import build
    from stackproof.report.compare import find
    from stackproof.report.rows import load_run, load_session
    cases = []
    for spec in args.run or []:
        cases += load_run(spec)
    for spec in args.session or []:
        cases += load_session(spec, args.reframe_config)
    baseline = args.baseline
    if args.compare:
        if cases:
            raise StackproofError("--compare finds the sessions itself: give it no --run/--session")
        cases, lines = find(args.reframe_config, args.period, args.stack)
        for line in lines:
            print(f"report --compare: {line}", file=sys.stderr)
        if baseline is None and args.stack and len(args.stack) > 1:
            baseline = args.stack[0]
    elif args.stack:
        raise StackproofError("--stack selects stacks for --compare only")
    if not cases:
        raise StackproofError("no test cases: give --run [LABEL=]REPORT.json, --session [LABEL=]UUID or --compare")
    data = build(cases, Path(args.output), args.title, baseline=baseline)
    print(f"report: {len(cases)} test cases, stacks {', '.join(data['stacks'])} (baseline {data['baseline']}): "
          f"{Path(args.output) / 'report.html'} and report.md", file=sys.stderr)
    for note in data["notes"]:
        print(f"report: note: {note}", file=sys.stderr)
    return 0


def register(sub) -> None:
    noun = sub.add_parser("report", help="HTML + Markdown verdict report comparing stacks from ReFrame results")
    verbs = noun.add_subparsers(dest="action", required=True, metavar="ACTION")
    p = verbs.add_parser("build", help="build report.html/.md/.json from ReFrame run reports, sessions or --compare")
    p.add_argument("--run", action="append", metavar="[LABEL=]REPORT.json", help="ReFrame JSON run report")
    p.add_argument("--session", action="append", metavar="[LABEL=]UUID", help="session of the results database")
    p.add_argument("--compare", action="store_true",
                   help="find the sessions in the results database: the newest that ran each --stack (one "
                        "two-stack session or two sessions); one --stack: its two newest sessions")
    p.add_argument("--stack", action="append", metavar="NAME", help="with --compare: a stack to compare")
    p.add_argument("--period", default="now-7d:now", help="with --compare: sessions to search (ReFrame time period)")
    p.add_argument("--baseline", metavar="NAME",
                   help="the stack others are compared with (default: the first stack given or recorded)")
    p.add_argument("--reframe-config", metavar="FILE", default=None,
                   help="ReFrame configuration holding the results database (default reframe-tests/config/site.py)")
    p.add_argument("-o", "--output", default="reports/latest", help="output directory")
    p.add_argument("--title", default="stackproof acceptance report")
    p.set_defaults(func=_cmd_report)
