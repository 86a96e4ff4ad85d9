"""`make bench-acceptance`: how long `make acceptance` takes to a verdict here, and whether the verdict
can be trusted, in three runs one after another (docs/performance.md "Time to verdict"):

  vendor  commodity vs vendor: the real comparison (total time, per benchmark, harness share)
  aa      commodity vs commodity-copy, the same stack under another name: no metric may be called
          better or worse (an A/A comparison), and ideally every one "no difference"
  worse   commodity vs commodity-slow (MPI over TCP loopback, generic OpenBLAS kernels): worse where
          the transport or the math library matters, not elsewhere

The experiment stacks live in reframe-tests/stacks/experiments/ (their README says what each must
show). Each run writes its own report directory; this module then writes summary.md and summary.json
beside them: one row per run and the verdict of every metric.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np

from stackproof.comparison import Verdict
from stackproof.errors import InputError, StackproofError
from stackproof.paths import REPO
from stackproof.report.rows import cases_from_report, perf_rows

RUNS = {"vendor": ["commodity", "vendor"], "aa": ["commodity", "commodity-copy"],
        "worse": ["commodity", "commodity-slow"]}
EXPERIMENTS = REPO / "reframe-tests" / "stacks" / "experiments"
CALLS = tuple(v.value for v in Verdict if v.decided or v.open)


def _load(path: Path) -> dict:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise StackproofError(f"{path}: {exc}") from None
    if not isinstance(doc, dict):
        raise StackproofError(f"{path}: not a JSON object")
    return doc


def calls_of(report: dict):
    """(row, its entry for one stack, comparison.Verdict) of every stack-comparison metric in a
    report.json (which keeps the call's value and its reason apart); anything else is refused."""
    for row in report.get("verdicts") or []:
        for v in (row.get("vs") or {}).values():
            try:
                yield row, v, Verdict(v.get("verdict"))
            except ValueError:
                raise StackproofError(f"report.json: {row.get('case')!r} {row.get('var')!r}: "
                                      f"{str(v.get('verdict'))[:80]!r} is no call") from None


def verdicts(report: dict) -> list[tuple[str, str, str]]:
    """(case, metric, call) of every stack-comparison metric in a report.json."""
    return [(str(row.get("case")), str(row.get("var")), call.value) for row, _, call in calls_of(report)]


def pair_spreads(rfm_report: dict, report: dict) -> list[dict]:
    """Per verdict metric of a run (report.json), the spread within a pair of launches: the median over
    the pairs of |log(other / baseline)|, in % (docs/performance.md: an A/A run's spread is what the
    launches themselves vary; a comparison cannot decide differences much smaller than it)."""
    stacks = [s for s in (report.get("stacks") or []) if isinstance(s, str)]
    if len(stacks) < 2:
        return []
    _, cases = cases_from_report(rfm_report, None, "run")
    rows = {(r.case, r.var): r for r in perf_rows(cases)}
    out = []
    for v in report.get("verdicts") or []:
        r = rows.get((v.get("case"), v.get("var")))
        if r is None:
            continue
        by = [dict(zip(r.repeats.get(s) or [], r.samples.get(s) or [])) for s in stacks[:2]]
        common = [i for i in by[0] if isinstance(i, int) and i in by[1] and by[0][i] > 0 and by[1][i] > 0]
        if not common:
            continue
        logs = np.abs([np.log(by[1][i] / by[0][i]) for i in common])
        out.append({"case": r.case, "var": r.var, "headline": bool(v.get("headline")), "pairs": len(common),
                    "spread_pct": round(float(np.median(logs)) * 100, 2),
                    "max_pct": round(float(np.max(logs)) * 100, 2)})
    return sorted(out, key=lambda x: (not x["headline"], x["case"], x["var"]))


def headline_figures(report: dict) -> dict:
    """What issue 43 asks of a run: headline metrics decided (of how many), the fewest launches per
    stack behind a headline row, and rows whose interval contradicts their call (an interval that
    excludes 1 beside a call that is no difference, or one that holds 1 beside better or worse)."""
    decided = total = 0
    fewest = None
    against = []
    for row, v, call in calls_of(report):
        lo, hi = v.get("lo"), v.get("hi")
        if isinstance(lo, (int, float)) and isinstance(hi, (int, float)) and call is not Verdict.NOT_MEASURED:
            if call.different != (lo > 1 or hi < 1):
                against.append(f"{row.get('case')} {row.get('var')}")
        if row.get("headline"):
            total += 1
            decided += call.decided
            ns = [n for n in (v.get("n") or []) if isinstance(n, int)]
            if ns:
                fewest = min(ns) if fewest is None else min(fewest, min(ns))
    return {"headline_decided": decided, "headline": total, "fewest_launches": fewest, "against_interval": against}


def summarize(run: str, out: Path) -> dict:
    """One run's figures from its report directory (summary.json, reframe-report.json, report.json)."""
    summary = _load(out / "summary.json")
    rfm = _load(out / "reframe-report.json")
    timing = (rfm.get("stackproof") or {}).get("timing") or {}
    report = _load(out / "report.json")
    calls = verdicts(report)
    count = Counter(c if c in CALLS else "not measured" for _, _, c in calls)
    launch_s, launches = float(timing.get("launch_s") or 0), int(timing.get("launches") or 0)
    bench_s = launches * float(timing.get("target_s") or 0)
    return {"run": run, "stacks": summary.get("stacks"), "total_s": summary.get("total_s"),
            "compare_s": timing.get("wall_s"), "launches": launches, "launch_s": launch_s,
            "harness_x": round(float(timing.get("wall_s") or 0) / bench_s, 2) if bench_s else None,
            "looks": [{k: lk.get(k) for k in ("pairs", "decided", "metrics", "wall_s", "skipped")}
                      for lk in timing.get("looks") or []],
            "calls": dict(count), "metrics": [{"case": c, "var": v, "call": k} for c, v, k in calls],
            "failed_steps": [s["step"] for s in summary.get("steps") or [] if not s.get("ok")],
            "spreads": pair_spreads(rfm, report), **headline_figures(report)}


def markdown(rows: list[dict]) -> str:
    lines = ["# make bench-acceptance", "",
             "| run | stacks | total | comparison | launches | harness / benchmark time | headline decided | "
             "fewest launches behind a headline row | calls against their interval | " + " | ".join(CALLS) +
             " | failed steps |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|" + "---:|" * len(CALLS) + "---|"]
    for r in rows:
        calls = " | ".join(str(r["calls"].get(c, 0)) for c in CALLS)
        lines.append(f"| {r['run']} | {' vs '.join(r['stacks'] or [])} | {r['total_s']} s | {r['compare_s']} s | "
                     f"{r['launches']} | {r['harness_x']}x | {r.get('headline_decided', 0)} of {r.get('headline', 0)} | "
                     f"{r.get('fewest_launches') if r.get('fewest_launches') is not None else '-'} | "
                     f"{len(r.get('against_interval') or [])} | {calls} | {', '.join(r['failed_steps']) or '-'} |")
    for r in rows:
        lines += ["", f"## {r['run']}: every metric", "", "| case | metric | call |", "|---|---|---|"]
        lines += [f"| {m['case']} | {m['var']} | {m['call']} |" for m in r["metrics"]]
        if r.get("spreads"):
            lines += ["", f"## {r['run']}: spread within a pair (median |log ratio| over the pairs)", "",
                      "| case | metric | headline | pairs | spread | largest |", "|---|---|---|---:|---:|---:|"]
            lines += [f"| {s['case']} | {s['var']} | {'yes' if s['headline'] else 'no'} | {s['pairs']} | "
                      f"{s['spread_pct']:.1f} %{' (over 5 %)' if s['headline'] and s['spread_pct'] > 5 else ''} | "
                      f"{s['max_pct']:.1f} % |" for s in r["spreads"]]
    return "\n".join(lines) + "\n"


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m stackproof.acceptance.bench", description=__doc__.split("\n\n")[0])
    p.add_argument("-o", "--out", type=Path, default=REPO / "build" / "bench-acceptance",
                   help="directory for the runs' reports and summary.md (default build/bench-acceptance)")
    p.add_argument("--runs", default=",".join(RUNS),
                   help=f"which runs, in order; a name given again runs again (default {','.join(RUNS)})")
    p.add_argument("--summarize-only", action="store_true", help="only (re)write the summary of finished runs")
    p.add_argument("acceptance_args", nargs=argparse.REMAINDER,
                   help="after --: options for every `python -m stackproof.acceptance` run")
    args = p.parse_args(argv)
    args.runs = [r for r in args.runs.split(",") if r]
    unknown = [r for r in args.runs if r not in RUNS]
    # a run named again is repeated (vendor,vendor,vendor: three comparisons), each in its own directory
    args.labels = [r if args.runs[:i].count(r) == 0 else f"{r}-{args.runs[:i].count(r) + 1}"
                   for i, r in enumerate(args.runs)]
    if unknown or not args.runs:
        raise InputError(f"--runs: unknown run(s) {', '.join(unknown) or '(none)'} (known: {', '.join(RUNS)})")
    if args.acceptance_args[:1] == ["--"]:
        args.acceptance_args = args.acceptance_args[1:]
    return args


def main(argv=None) -> int:
    try:
        args = parse_args(argv)
    except InputError as exc:
        print(f"bench-acceptance: error: {exc}", file=sys.stderr)
        return 2
    env = dict(os.environ, STACKPROOF_STACKS_DIR=os.pathsep.join(
        [str(EXPERIMENTS)] + [d for d in os.environ.get("STACKPROOF_STACKS_DIR", "").split(os.pathsep) if d]))
    rows = []
    for i, (run, label) in enumerate(zip(args.runs, args.labels), start=1):
        out = args.out / label
        if not args.summarize_only:
            print(f"== bench-acceptance {i}/{len(args.runs)}: {label} ({' vs '.join(RUNS[run])}) -> {out}",
                  file=sys.stderr, flush=True)
            cmd = [sys.executable, "-m", "stackproof.acceptance"]
            for s in RUNS[run]:
                cmd += ["--stack", s]
            rc = subprocess.run(cmd + args.acceptance_args, env={**env, "STACKPROOF_REPORT_DIR": str(out)}).returncode
            if rc >= 128:
                return rc                              # interrupted: stop, as make acceptance does
        try:
            rows.append(summarize(label, out))
        except StackproofError as exc:
            print(f"bench-acceptance: {label}: no result ({exc})", file=sys.stderr)
    if not rows:
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "summary.json").write_text(json.dumps(rows, indent=1))
    md = markdown(rows)
    (args.out / "summary.md").write_text(md)
    print(md, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
