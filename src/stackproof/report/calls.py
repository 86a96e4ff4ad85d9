"""The calls of a stack comparison as data: which metrics the verdict judges, and every one's call for
each stack against the baseline, made for all of them at once by the comparison engine
(stackproof.comparison.sequential_calls: exact intervals of the ratio other / baseline, a family rule
over the metrics at each look). `calls_for` gives them on plain data (the acceptance looks use it
between looks); `verdict_rows` adds each stack's summary for the report's verdict (report/verdict.py
writes the text and tables). A call is a `comparison.Call`: a `Verdict` and a reason, never a string
to parse.

Which metrics: every performance variable of a check that more than one stack measured (node checks,
run with one stack, are the node section's), of a curve over message size only its headline points;
the roles are the check's own declarations (`perf_curve`, `perf_headline`: rows.Row.judged).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stackproof.comparison import (NO_VERDICT, NOT_MEASURED, Call, Design, Metric, Verdict, call_from,
                                   sequential_calls, two_sample_test)
from stackproof.report.rows import Case, by_key, perf_rows, why_not_measured
from stackproof.report.stats import LEVEL, summarize

ONE_LOOK = Design(looks=(0,), alpha=1 - LEVEL, margin=0.05)


@dataclass(frozen=True)
class Comparison:
    ratio: float | None            # Hodges-Lehmann ratio other/baseline (None: not computable)
    lo: float | None               # interval of the ratio
    hi: float | None
    level: float | None            # the interval's exact coverage
    pct: float | None              # (median other / median baseline - 1) * 100
    verdict: Verdict
    reason: str = ""               # why no call could be made


def judge(baseline, other, better: str | None, design: Design = ONE_LOOK, level: float | None = None) -> Comparison:
    """One metric on its own (two samples, one interval at `level`, default 1 - the design's alpha):
    the per-size ratios of the message-size curves. The report's verdict is never made this way: it
    is sequential_calls over all metrics at once."""
    b, o = np.asarray(baseline, dtype=float), np.asarray(other, dtype=float)
    mb, mo = float(np.median(b)), float(np.median(o))
    pct = 100.0 * (mo - mb) / mb if mb else None
    level = 1 - design.alpha if level is None else level
    t = two_sample_test(b, o)
    if t is None:
        return Comparison(mo / mb if mb else None, None, None, None, pct, NO_VERDICT,
                          "values <= 0: a ratio is not defined")
    lo, hi, cov = t.interval(level)
    if lo is None:
        return Comparison(t.ratio, None, None, None, pct, NO_VERDICT,
                          f"too few repeats (n={len(b)} and {len(o)}) for an interval")
    different = (lo > 1 or hi < 1) and cov >= level - 1e-9
    return Comparison(t.ratio, lo, hi, cov, pct, call_from(lo, hi, better, design.margin, different))


def verdict_metrics(rows):
    """The rows the verdict judges (rows.Row.judged: a curve's headline points, every other metric)."""
    yield from (r for r in sorted(rows, key=lambda r: (r.check, r.case, r.system, r.var)) if r.judged)


def node_check_keys(cases: list[Case], stacks: list[str]) -> set[tuple]:
    """Measurements that ran with one stack only while the run compared several: node checks (FWQ
    under the profiles, core specialization, binding), which measure the node, not the stack."""
    if len(stacks) < 2:
        return set()
    return {k for k, per_stack in by_key(cases).items() if len([s for s, cs in per_stack.items() if cs]) == 1}


def short_reason(cases: list[Case]) -> str:
    """Why a stack measured nothing, in a word or two: "skipped", "failed (2/5)", "not run"."""
    if not cases:
        return "not run"
    failed = sum(c.result in ("fail", "abort") for c in cases)
    if failed:
        return f"failed ({failed}/{len(cases)})"
    if any(c.result == "skip" for c in cases):
        return "skipped"
    return "no value"


def _metric(r, baseline: str, other: str) -> Metric:
    return r.metric(baseline, other)


@dataclass(frozen=True)
class MetricCall:
    """One metric's call for one stack against the baseline."""
    check: str
    case: str
    system: str
    var: str
    headline: bool
    stack: str
    call: Call


def _judge_all(cases: list[Case], rows, stacks: list[str], baseline: str, design: Design):
    """(judged rows, their headline flags, {(row index, stack): Call}): one sequential_calls per other
    stack over every metric both stacks measured; the others not measured, with the reason."""
    keyed = by_key(cases)
    node = node_check_keys(cases, stacks)
    judged = [r for r in verdict_metrics(rows) if (r.check, r.case, r.system) not in node]
    any_headline = any(r.headline for r in judged)
    heads = [bool(r.headline or not any_headline) for r in judged]
    calls: dict[tuple[int, str], Call] = {}
    for s in stacks:
        if s == baseline:
            continue
        both = [i for i, r in enumerate(judged) if r.samples.get(baseline) and r.samples.get(s)]
        for i, c in zip(both, sequential_calls([_metric(judged[i], baseline, s) for i in both], design)):
            calls[(i, s)] = c
        for i, r in enumerate(judged):
            if i not in both:
                who = baseline if not r.samples.get(baseline) else s
                mine = keyed.get((r.check, r.case, r.system), {}).get(who, [])
                calls[(i, s)] = Call(NOT_MEASURED, f"{who}: {why_not_measured(mine)}")
    return judged, heads, calls


def calls_for(cases: list[Case], stacks: list[str], design: Design, baseline: str | None = None) -> list[MetricCall]:
    """Every stack-comparison metric's call, for each stack against `baseline` (default the first of
    `stacks`), from the cases of a run (report.rows cases): what the looks of `make acceptance` need
    between looks (call.verdict.open: more launches could decide it)."""
    baseline = baseline or stacks[0]
    judged, heads, calls = _judge_all(cases, perf_rows(cases), stacks, baseline, design)
    return [MetricCall(r.check, r.case, r.system, r.var, h, s, calls[(i, s)])
            for i, (r, h) in enumerate(zip(judged, heads)) for s in stacks if s != baseline]


def verdict_rows(ctx) -> list[dict]:
    """One dict per stack-comparison metric (report.json's `verdicts`): each stack's summary and, for
    each other stack, its call (one family per other stack)."""
    judged, heads, calls = _judge_all(ctx.cases, ctx.rows, ctx.stacks, ctx.baseline, ctx.design)
    keyed = by_key(ctx.cases)
    out = []
    for i, (r, head) in enumerate(zip(judged, heads)):
        row = {"check": r.check, "case": r.case, "system": r.system, "var": r.var, "unit": r.unit,
               "better": r.better, "headline": head,
               "margin": ctx.design.margin if r.margin is None else r.margin, "stacks": {}, "vs": {}}
        for s in ctx.stacks:
            if r.samples.get(s):
                sm = summarize(r.samples[s])
                row["stacks"][s] = {"n": sm.n, "median": sm.median, "min": sm.lo, "max": sm.hi, "q1": sm.q1,
                                    "q3": sm.q3, "samples": r.samples[s], "sessions": sorted(r.sessions[s])}
            else:
                mine = keyed.get((r.check, r.case, r.system), {}).get(s, [])
                row["stacks"][s] = {"not_measured": why_not_measured(mine), "short": short_reason(mine)}
        for s in ctx.stacks:
            if s != ctx.baseline:
                who = ctx.baseline if not r.samples.get(ctx.baseline) else s
                row["vs"][s] = call_dict(calls[(i, s)], row["stacks"][ctx.baseline], row["stacks"][s],
                                         who, row["stacks"][who].get("short", ""))
        out.append(row)
    return out


def call_dict(c: Call, base: dict | None = None, other: dict | None = None, who: str = "", short: str = "") -> dict:
    """A Call as report.json holds it (the verdict its value, the reason beside it; not measured: also
    which stack measured nothing and why in a word or two)."""
    if c.verdict == NOT_MEASURED:
        return {"verdict": c.verdict, "reason": c.reason, "stack": who, "short": short}
    mb, mo = (base or {}).get("median"), (other or {}).get("median")
    return {"verdict": c.verdict, "reason": c.reason, "ratio": c.ratio, "lo": c.lo, "hi": c.hi, "level": c.level,
            "p": c.p, "alpha": c.alpha, "look": c.look, "n": list(c.n), "test": c.test, "paired": c.paired,
            "spread": c.spread, "more": c.more, "more_look": c.more_look,
            "pct": 100.0 * (mo - mb) / mb if mb and mo is not None else None}


def unmeasured_benchmarks(ctx) -> list[str]:
    """Stack-comparison checks that no stack passed (all skipped or failed); a check that passed
    without a performance value (MPI hello) is not one of them."""
    measured = {(r.check, r.case, r.system) for r in ctx.rows}
    node = node_check_keys(ctx.cases, ctx.stacks)
    return [k[1] for k, per_stack in sorted(by_key(ctx.cases).items())
            if k not in measured and k not in node and not any(c.result == "pass"
                                                               for cs in per_stack.values() for c in cs)]
