"""The verdict: every stack-comparison metric's call, made for all of them at once by the comparison
engine (stackproof.comparison: exact intervals of the ratio other / baseline, a family rule over the
metrics at each look, the looks' alphas adding up to 5 %), and the report's opening section: one
sentence of counts, the headline table (each check's `perf_headline` metrics, decided rows first),
the method in one line, then the secondary metrics; the method in its own section. On-node bandwidth
against a memory copy of the same size measured in the same run (MemoryBandwidth).

Calls (docs/performance.md): *better* / *worse* when the family rule rejects ratio = 1 (the interval
printed beside it, at that metric's level, then excludes 1; the direction the check declares says
which), *no difference* when its equivalence interval lies inside the margin (the check's
`perf_margin`, else the run's), else *inconclusive*, saying the largest difference its interval
leaves open. A metric whose check declared no direction is called *higher* / *lower*. "Verdict" means
this call only; whether a ReFrame run measured anything at all is its *run outcome*
(stackproof.report.outcome).
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from stackproof.comparison import (BETTER, HIGHER, INCONCLUSIVE, LOWER, NO_VERDICT, SAME, WORSE, Metric, call_from,
                                   decided, sequential_calls, two_sample_test)
from stackproof.report.curves import headline_var, human_bytes, size_of_var
from stackproof.report.rows import by_key, why_not_measured
from stackproof.report.sections import Context, Para, Section, Table, fmt
from stackproof.report.stats import LEVEL, Design, summarize

DECIDED = (BETTER, WORSE, SAME, HIGHER, LOWER)
CSS = {BETTER: "better", WORSE: "worse", SAME: "nsd", INCONCLUSIVE: "inc", NO_VERDICT: "nm", HIGHER: "dir",
       LOWER: "dir"}
ORDER = (WORSE, BETTER, HIGHER, LOWER, SAME, INCONCLUSIVE, NO_VERDICT, "not measured")
FWQ_HEADLINE = ("std", "noise_fraction")
ONE_LOOK = Design(looks=(0,), alpha=1 - LEVEL, margin=0.05)
__all__ = ["decided", "judge", "verdict_rows", "verdict_section", "method_section", "in_words", "ONE_LOOK"]


@dataclass(frozen=True)
class Comparison:
    ratio: float | None            # Hodges-Lehmann ratio other/baseline (None: not computable)
    lo: float | None               # interval of the ratio
    hi: float | None
    level: float | None            # the interval's exact coverage
    pct: float | None              # (median other / median baseline - 1) * 100
    verdict: str                   # better | worse | no difference | inconclusive | higher | lower | no verdict
    why: str = ""                  # why no call could be made


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


def pairs_to_decide(lo: float, hi: float, n: int, margin: float) -> int | None:
    """About how many pairs an inconclusive metric would need at the spread its launches showed: an
    interval's width shrinks as 1/sqrt(n), so the pairs at which it would either fit inside the margin
    around its centre or leave 1 out, whichever comes first. A projection, not a promise; None beyond
    10,000 pairs or for an interval of zero width."""
    half = (np.log(hi) - np.log(lo)) / 2
    centre = abs(np.log(hi) + np.log(lo)) / 2
    if half <= 0 or n < 1:
        return None
    room = [x for x in (np.log1p(margin) - centre, centre) if x > 0]
    if not room:
        return None
    need = int(np.ceil(n * (half / max(room)) ** 2))
    return need if need <= 10_000 else None


def verdict_metrics(ctx: Context):
    """The rows the verdict judges: OSU/NetPIPE curves only at 8 B and 1 MiB, FWQ only its std and
    noise fraction, every other metric as it is."""
    sizes = defaultdict(set)
    for r in ctx.rows:
        s = size_of_var(r.var)
        if s:
            sizes[(r.check, r.case, r.system, s[0])].add(s[1])
    for r in sorted(ctx.rows, key=lambda r: (r.check, r.case, r.system, r.var)):
        if r.check.startswith("FWQ") and r.var not in FWQ_HEADLINE:
            continue
        s = size_of_var(r.var)
        if s and not headline_var(r.var, sizes[(r.check, r.case, r.system, s[0])]):
            continue
        yield r


def node_check_keys(ctx: Context) -> set[tuple]:
    """Measurements that ran with one stack only while the run compared several: node checks (FWQ
    under the profiles, core specialization, binding), which measure the node, not the stack."""
    if len(ctx.stacks) < 2:
        return set()
    return {k for k, per_stack in by_key(ctx.cases).items() if len([s for s, cs in per_stack.items() if cs]) == 1}


def _metric(r, baseline: str, other: str) -> Metric:
    return Metric(r.samples[baseline], r.samples[other], r.repeats.get(baseline), r.repeats.get(other),
                  r.better, r.margin, r.headline)


def verdict_rows(ctx: Context) -> list[dict]:
    """One dict per stack-comparison metric: each stack's summary and, for each other stack, the call
    sequential_calls makes over all the metrics both stacks measured (one family per other stack)."""
    keyed = by_key(ctx.cases)
    node = node_check_keys(ctx)
    rows = [r for r in verdict_metrics(ctx) if (r.check, r.case, r.system) not in node]
    any_headline = any(r.headline for r in rows)
    out = []
    for r in rows:
        row = {"check": r.check, "case": r.case, "system": r.system, "var": r.var, "unit": r.unit,
               "better": r.better, "headline": bool(r.headline or not any_headline),
               "margin": ctx.design.margin if r.margin is None else r.margin, "stacks": {}, "vs": {}}
        for s in ctx.stacks:
            if r.samples.get(s):
                sm = summarize(r.samples[s])
                row["stacks"][s] = {"n": sm.n, "median": sm.median, "min": sm.lo, "max": sm.hi, "q1": sm.q1,
                                    "q3": sm.q3, "samples": r.samples[s], "sessions": sorted(r.sessions[s])}
            else:
                row["stacks"][s] = {"not_measured": why_not_measured(keyed.get((r.check, r.case, r.system), {})
                                                                     .get(s, []))}
        out.append(row)
    for s in ctx.stacks:
        if s == ctx.baseline:
            continue
        both = [i for i, r in enumerate(rows) if r.samples.get(ctx.baseline) and r.samples.get(s)]
        calls = sequential_calls([_metric(rows[i], ctx.baseline, s) for i in both], ctx.design)
        for i, c in zip(both, calls):
            st = out[i]["stacks"]
            mb, mo = st[ctx.baseline]["median"], st[s]["median"]
            v = {"ratio": c.ratio, "lo": c.lo, "hi": c.hi, "level": c.level, "p": c.p, "alpha": c.alpha,
                 "look": c.look, "n": list(c.n), "paired": c.paired, "seen": c.seen,
                 "pct": 100.0 * (mo - mb) / mb if mb else None, "verdict": c.verdict + (f": {c.why}" if c.why else "")}
            if c.verdict == INCONCLUSIVE and c.lo is not None:
                v["decide_pairs"] = pairs_to_decide(c.lo, c.hi, min(c.n), out[i]["margin"])
            out[i]["vs"][s] = v
        for i, r in enumerate(rows):
            if i not in both:
                who = ctx.baseline if not r.samples.get(ctx.baseline) else s
                out[i]["vs"][s] = {"verdict": f"not measured ({who}: {out[i]['stacks'][who]['not_measured']})"}
    return out


def unmeasured_benchmarks(ctx: Context) -> list[str]:
    """Stack-comparison checks that no stack passed (all skipped or failed); a check that passed
    without a performance value (MPI hello) is not one of them."""
    measured = {(r.check, r.case, r.system) for r in ctx.rows}
    node = node_check_keys(ctx)
    return [k[1] for k, per_stack in sorted(by_key(ctx.cases).items())
            if k not in measured and k not in node and not any(c.result == "pass"
                                                               for cs in per_stack.values() for c in cs)]


def _short(reason: str) -> str:
    return reason.split(":")[0] if reason.startswith(("skipped", "failed")) else reason


def _better_text(better: str | None) -> str:
    return {"higher": "higher is better", "lower": "lower is better"}.get(better, "direction not declared")


def _call(v: dict) -> str:
    return "not measured" if v["verdict"].startswith("not measured") else v["verdict"].split(":")[0]


def _counts(rows: list[dict], other: str) -> str:
    calls = [_call(r["vs"][other]) for r in rows]
    return ", ".join(f"{calls.count(c)} {c}" for c in ORDER if calls.count(c))


def in_words(rows: list[dict], others: list[str], baseline: str) -> str:
    """The verdict in one sentence per compared stack: how many headline (and secondary) metrics got
    each call."""
    out = []
    head = [r for r in rows if r.get("headline", True)]
    rest = [r for r in rows if not r.get("headline", True)]
    for o in others:
        if rest:
            out.append(f"{o} against {baseline}: {len(head)} headline metrics: {_counts(head, o)}; "
                       f"{len(rest)} secondary: {_counts(rest, o)}.")
        else:
            out.append(f"{o} against {baseline}, {len(rows)} metrics: {_counts(rows, o)}.")
    return " ".join(out)


def _pct(x: float) -> str:
    return f"{100 * x:.0f} %" if x >= 0.095 else f"{100 * x:.1f} %"


def _verdict_cell(v: dict) -> tuple[str, str]:
    call = _call(v)
    if call == "not measured":
        return f"not measured ({_short(v['verdict'][len('not measured ('):-1])})", "nm"
    text = v["verdict"]
    if call == INCONCLUSIVE and v.get("seen") is not None:
        text = f"inconclusive: no difference larger than {_pct(v['seen'])} seen"
    return text, CSS.get(call, "")


def _launches(v: dict) -> str:
    n = v.get("n") or [0, 0]
    return f"{n[0]} pairs" if v.get("paired") else f"{n[0]} + {n[1]}"


def metric_label(r: dict) -> str:
    """What a reader calls the metric: the check without "Benchmark", its parameters' values, the
    variable, its unit and direction (HPCC ci: hpl (Gflop/s, higher is better))."""
    check, *params = r["case"].split()
    name = check[:-len("Benchmark")] if check.endswith("Benchmark") and len(check) > 9 else check
    values = [p.split("=", 1)[1] for p in params if "=" in p]
    return (f"{name}{' ' + ', '.join(values) if values else ''}: {r['var']} "
            f"({r['unit'] or 'no unit'}, {_better_text(r['better'])})")


def _table(ctx: Context, rows: list[dict], others: list[str], caption: str) -> Table:
    header = ["metric"]
    for o in others:
        header += ["verdict" if len(others) == 1 else f"verdict {o}",
                   f"{o} / {ctx.baseline} [interval] level", "launches"]
    header += [f"{s} median [min–max]" for s in ctx.stacks]
    table = []
    first = others[0] if others else None
    rank = {c: i for i, c in enumerate(ORDER)}
    for r in sorted(rows, key=lambda r: rank.get(_call(r["vs"][first]), 99) if first else 0):
        cells = [metric_label(r) + ("" if r["system"] == _only_system(ctx) else f" @{r['system']}")]
        for o in others:
            v = r["vs"][o]
            if _call(v) == "not measured":
                cells += [_verdict_cell(v), "-", "-"]
                continue
            ratio = (f"{v['ratio']:.3g} [{v['lo']:.3g}, {v['hi']:.3g}] {100 * v['level']:.1f} %"
                     if v.get("lo") is not None else f"{v['ratio']:.3g} [no interval]"
                     if v.get("ratio") is not None else "-")
            cells += [_verdict_cell(v), ratio, _launches(v)]
        for s in ctx.stacks:
            st = r["stacks"][s]
            cells.append((f"not measured ({_short(st['not_measured'])})", "nm") if "not_measured" in st else
                         f"{fmt(st['median'])} [{fmt(st['min'])}–{fmt(st['max'])}] ({st['n']})")
        table.append(cells)
    return Table(header, table, caption=caption)


def verdict_section(ctx: Context) -> Section:
    rows = verdict_rows(ctx)
    ctx.data["verdicts"] = rows
    ctx.data["design"] = ctx.design.as_dict()
    others = [s for s in ctx.stacks if s != ctx.baseline]
    head = [r for r in rows if r["headline"]]
    rest = [r for r in rows if not r["headline"]]
    text: list = [in_words(rows, others, ctx.baseline)] if rows else []
    tables = []
    if head:
        tables.append(_table(ctx, head, others, "Headline metrics (each benchmark's own), decided first"
                             if rest else ""))
    d = ctx.design
    text.append(Para(f"Method: {_method_short(d)}.", "method", "How the calls are made"))
    if not rows:
        text.append("No metric was measured by two stacks: there is nothing to compare.")
    missing = unmeasured_benchmarks(ctx)
    missing_text = f"Measured by no stack (see Skipped and Failed checks): {', '.join(missing)}." if missing else ""
    if rest:
        tables.append(_table(ctx, rest, others, "Secondary metrics, under the same error control. " + missing_text))
    elif missing_text:
        text.append(missing_text)
    return Section("Verdict", text=text, tables=tables, anchor="verdict")


def _method_short(d: Design) -> str:
    rule = {"bh": "Benjamini-Hochberg", "holm": "Holm"}.get(d.rule, d.rule)
    if d.looks == (0,):
        when = "one look over every launch"
    else:
        ran = len(d.schedule)
        when = (f"looks after {', '.join(map(str, d.looks))} pairs of launches"
                + ("" if ran == len(d.looks) else f" (this run made {ran}: the budget allowed no more)"))
    return (f"exact distribution-free intervals of each ratio, {rule} over all metrics at each of {when}; "
            f"identical stacks get any better or worse call at most {100 * d.alpha:.0f} % of the time")


def method_section(ctx: Context) -> Section | None:
    """How the calls are made, in full (the verdict links here)."""
    if "verdicts" not in ctx.data:
        return None
    d = ctx.design
    rule = {"bh": "Benjamini-Hochberg (weighted, step-up)", "holm": "Holm (weighted, step-down)"}.get(d.rule, d.rule)
    test = ("pair by pair where a look's pairs can reach its alpha (each pair's log ratio, Hodges-Lehmann over "
            "the pairs with the exact Wilcoxon signed-rank interval), else" if d.paired else "")
    looks = ("one look over every launch" if d.looks == (0,) else
             "looks after " + ", ".join(f"{n} pairs (alpha {100 * a:.2f} %)" for n, a in zip(d.looks, d.alphas)))
    text = [
        f"Baseline: {ctx.baseline}. Each metric's ratio other / baseline is estimated {test} as two samples "
        "(Hodges-Lehmann on log values, with the exact distribution-free Mann-Whitney interval). Launches "
        "come in pairs, one stack right after the other, the order alternating (A B, B A), so what the host "
        f"does over time falls on both stacks alike; {looks}.",
        f"Error control over the whole report: at each look, {rule} over all the metrics of the comparison at "
        f"that look's alpha; the looks' alphas add up to {100 * d.alpha:.0f} %, so two identical stacks get any "
        f"better or worse call at most {100 * d.alpha:.0f} % of the time, and with real differences at most "
        f"{100 * d.alpha:.0f} % of the calls are expected false (Holm: at most {100 * d.alpha:.0f} % chance of any). "
        f"Headline metrics share {100 * d.headline_share:.0f} % of each look's alpha, the secondary ones the rest. "
        "A metric's interval is printed at the level the rule gives it (it excludes 1 exactly when the "
        "metric is called better or worse).",
        "Verdict: better or worse when the rule rejects ratio = 1, in the direction the check declares "
        "(higher or lower where it declares none); no difference when the metric's equivalence interval "
        f"(two one-sided tests at the look's alpha) lies inside its margin (the check's, else ±{100 * d.margin:.0f} %); "
        "inconclusive otherwise, with the largest difference its interval leaves open. A metric stops at the "
        "first look that decides it; a look re-runs only the checks with an open metric. Launches: what the "
        "call rests on (a + b launches, or pairs); the medians show every launch. Node checks, which run "
        "with one stack, are in their own section.",
    ]
    return Section("How the calls are made", text=text, anchor="method")


def node_checks_section(ctx: Context) -> Section | None:
    """Table-IV style: the node checks (one stack), each metric's median, spread and n; failures and
    skips with their reason, never as 'not measured' rows of the stack verdict."""
    node = node_check_keys(ctx)
    if not node:
        return None
    keyed = by_key(ctx.cases)
    rows = []
    measured = set()
    for r in sorted(ctx.rows, key=lambda r: (r.check, r.case, r.var)):
        if (r.check, r.case, r.system) not in node:
            continue
        (stack, vals), = r.samples.items()
        sm = summarize(vals)
        measured.add((r.check, r.case, r.system))
        rows.append([r.case, stack, f"{r.var} ({r.unit or 'no unit'})", _better_text(r.better),
                     f"{fmt(sm.median)} [{fmt(sm.lo)}–{fmt(sm.hi)}] ({sm.n})"])
    for k in sorted(node - measured):
        (stack, cs), = [(s, cs) for s, cs in keyed[k].items() if cs]
        res = {c.result for c in cs}
        text = why_not_measured(cs) if res != {"pass"} else "passed (no performance value)"
        rows.append([k[1], stack, "-", "-", (text, "" if res == {"pass"} else "nm")])
    return Section("Node checks", anchor="node", text=[
        "Checks that measure the node rather than the stack (FWQ noise under the core-specialization "
        "profiles, core specialization, binding) run with one stack; median [min–max] (n) over the repeats."],
        tables=[Table(["check", "stack", "metric", "direction", "value"], rows)])


def _only_system(ctx: Context) -> str | None:
    systems = {r.system for r in ctx.rows}
    return next(iter(systems)) if len(systems) == 1 else None


def copy_bandwidth(ctx: Context) -> dict[tuple[str, str], float]:
    """(stack, system) -> median DRAM-sized memory-copy bandwidth (MB/s, copy_bw) measured in the same run."""
    return {k: v[None] for k, v in copy_by_size(ctx).items() if None in v}


def copy_by_size(ctx: Context) -> dict[tuple[str, str], dict]:
    """(stack, system) -> {buffer bytes: median copy bandwidth (MB/s)}: copy_<n>MiB / copy_<n>KiB at
    their size (cache-resident), copy_bw under None (the DRAM-sized copy)."""
    out: dict = defaultdict(dict)
    for r in ctx.rows:
        if not r.check.startswith("MemoryBandwidth") or not r.var.startswith("copy_bw"):
            continue
        size = None if r.var == "copy_bw" else _copy_size(r.var[len("copy_bw_"):])
        if r.var != "copy_bw" and size is None:
            continue
        for s, v in r.samples.items():
            out[(s, r.system)][size] = float(np.median(v))
    return dict(out)


def _copy_size(text: str) -> int | None:
    for unit, mult in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if text.endswith(unit) and text[:-3].isdigit():
            return int(text[:-3]) * mult
    return None


def _copy_for(copies: dict, size: int | None) -> tuple[float | None, str]:
    """The copy a message of `size` bytes is compared with: the smallest cache-resident copy at least as
    large, else the DRAM-sized one; (bandwidth, which copy)."""
    fits = sorted(b for b in copies if b is not None and size is not None and b >= size)
    if fits:
        return copies[fits[0]], f"{human_bytes(fits[0])} copy (in cache)"
    return copies.get(None), "DRAM-sized copy"


def bandwidth_fraction_section(ctx: Context) -> Section | None:
    copies = copy_by_size(ctx)
    ctx.data["copy_bw"] = {f"{s}@{sysname}": {("dram" if b is None else str(b)): v for b, v in per.items()}
                           for (s, sysname), per in copies.items()}
    rows = []
    for r in verdict_metrics(ctx):
        if not r.var.startswith("bw") or r.check.startswith("MemoryBandwidth") or r.unit != "MB/s":
            continue
        size = (size_of_var(r.var) or (None, None))[1]
        for s in ctx.stacks:
            if not r.samples.get(s):
                continue
            med = float(np.median(r.samples[s]))
            mine = copies.get((s, r.system))
            src = s
            if not mine:          # the stack did not run the copy check: the median of the others' copies
                pooled = defaultdict(list)
                for (st, sysname), per in copies.items():
                    if sysname == r.system:
                        for b, v in per.items():
                            pooled[b].append(v)
                mine = {b: float(np.median(v)) for b, v in pooled.items()}
                src = "other stacks" if mine else None
            lim, which = _copy_for(mine or {}, size)
            if lim and med >= lim:        # e.g. a site's MemoryBandwidth without the cache-resident copy
                which += " (not a bound at this size: no copy of the message's size measured)"
            rows.append([r.case, r.var, s, fmt(med), fmt(lim) if lim else ("not measured", "nm"),
                         which if lim else "-", f"{100 * med / lim:.1f} %" if lim else "-", src or "-"])
    if not rows:
        return None
    text = ["On-node bandwidth (two ranks on one node) against a memory copy of the same size measured in the "
            "same run (MemoryBandwidth: every rank copying its own buffer at once, read and write bytes counted "
            "like STREAM Copy): a cache-resident copy for messages that fit in cache (copy_bw_1MiB), the DRAM-sized "
            "copy (copy_bw, 64 MiB) for larger ones. Moving a message reads and writes each of its bytes at least "
            "once, so an MPI bandwidth stays below the copy's figure (at most half of it where the MPI library "
            "copies as fast as memcpy): the bound the fraction is taken of. A row whose copy is no bound for its size (no copy of "
            "that size measured) says so."]
    if not copies:
        text.append("No MemoryBandwidth check ran, so the fraction is not measured.")
    return Section("Bandwidth against a memory copy of the same size", text=text, anchor="membw", tables=[
        Table(["benchmark", "metric", "stack", "median (MB/s)", "memory copy (MB/s)", "copy", "fraction",
               "copy measured by"], rows)])
