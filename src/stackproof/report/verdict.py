"""The verdict in words and tables, the report's opening section: one sentence of counts, the headline
table (each check's `perf_headline` metrics, decided rows first), the method in one line, then the
secondary metrics; the method in full in its own section. The calls themselves are data
(report/calls.py, stackproof.comparison).

Calls (docs/performance.md): *better* / *worse* when the family rule rejects ratio = 1 (the interval
printed beside it, at that metric's level, then excludes 1; the direction the check declares says
which), *no difference* when its equivalence interval holds 1 and lies inside the margin (the check's
`perf_margin`, else the run's; controlled per metric), else *inconclusive*, with the differences its
interval (at the metric's level, holding 1) leaves open and the launches its spread suggests. A
metric whose check declared no direction is called *higher* / *lower*. "Verdict" means this call
only; whether a ReFrame run measured anything at all is its *run outcome* (stackproof.report.outcome).
"""
from __future__ import annotations

from stackproof.comparison import (BETTER, HIGHER, INCONCLUSIVE, LOWER, NO_VERDICT, NOT_MEASURED, SAME, WORSE,
                                   Design, Verdict, decided)
from stackproof.report.calls import unmeasured_benchmarks, verdict_rows
from stackproof.report.sections import Context, Para, Section, Table, fmt

CSS = {BETTER: "better", WORSE: "worse", SAME: "nsd", INCONCLUSIVE: "inc", NO_VERDICT: "nm", NOT_MEASURED: "nm",
       HIGHER: "dir", LOWER: "dir"}
ORDER = (WORSE, BETTER, HIGHER, LOWER, SAME, INCONCLUSIVE, NO_VERDICT, NOT_MEASURED)
__all__ = ["verdict_section", "method_section", "in_words", "cell_texts", "metric_label", "direction_text",
           "decided", "verdict_rows"]   # the last two for acceptance/suite.py until it uses report.calls.calls_for


def _verdict(v: dict) -> Verdict:
    return Verdict(v["verdict"])


def _counts(rows: list[dict], other: str) -> str:
    calls = [_verdict(r["vs"][other]) for r in rows]
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


def direction_text(better: str | None) -> str:
    return {"higher": "higher is better", "lower": "lower is better"}.get(better, "direction not declared")


def cell_texts(v: dict) -> tuple[str, str]:
    """(call text, interval text) of one metric against one stack: the call with what it rests on, and
    the ratio with the interval at the level the call used (none where the launches cannot reach it)."""
    verdict = _verdict(v)
    if verdict == NOT_MEASURED:
        return f"not measured ({v.get('stack', '?')}: {v.get('short') or v.get('reason', '')})", "-"
    text = str(verdict)
    if verdict in (INCONCLUSIVE, NO_VERDICT) and v.get("reason"):
        text += f": {v['reason']}"
        if v.get("more"):
            text += f"; about {v['more']} more launches per stack would decide it at its spread"
    if v.get("ratio") is None:
        return text, "-"
    if v.get("lo") is None:
        return text, f"{v['ratio']:.3g} [no interval at {100 * (1 - v['alpha']):.2f} %]" if v.get("alpha") else \
            f"{v['ratio']:.3g} [no interval]"
    return text, f"{v['ratio']:.3g} [{v['lo']:.3g}, {v['hi']:.3g}] {100 * v['level']:.1f} %"


def _launches(v: dict) -> str:
    n = v.get("n") or [0, 0]
    return f"{n[0]} pairs" if v.get("paired") else f"{n[0]} + {n[1]}" + (" in blocks" if v.get("test") == "blocks" else "")


def metric_label(r: dict) -> str:
    """What a reader calls the metric: the check without "Benchmark", its parameters' values, the
    variable, its unit and direction (HPCC ci: hpl (Gflop/s, higher is better))."""
    check, *params = r["case"].split()
    name = check[:-len("Benchmark")] if check.endswith("Benchmark") and len(check) > 9 else check
    values = [p.split("=", 1)[1] for p in params if "=" in p]
    return (f"{name}{' ' + ', '.join(values) if values else ''}: {r['var']} "
            f"({r['unit'] or 'no unit'}, {direction_text(r['better'])})")


def _only_system(ctx: Context) -> str | None:
    systems = {r.system for r in ctx.rows}
    return next(iter(systems)) if len(systems) == 1 else None


def _table(ctx: Context, rows: list[dict], others: list[str], caption: str) -> Table:
    header = ["metric"]
    for o in others:
        header += ["verdict" if len(others) == 1 else f"verdict {o}",
                   f"{o} / {ctx.baseline} [interval] level", "launches"]
    header += [f"{s} median [min–max]" for s in ctx.stacks]
    table = []
    first = others[0] if others else None
    rank = {c: i for i, c in enumerate(ORDER)}
    for r in sorted(rows, key=lambda r: rank.get(_verdict(r["vs"][first]), 99) if first else 0):
        cells = [metric_label(r) + ("" if r["system"] == _only_system(ctx) else f" @{r['system']}")]
        for o in others:
            v = r["vs"][o]
            call, ratio = cell_texts(v)
            cells += [(call, CSS.get(_verdict(v), "")), ratio, "-" if _verdict(v) == NOT_MEASURED else _launches(v)]
        for s in ctx.stacks:
            st = r["stacks"][s]
            cells.append((f"not measured ({st.get('short') or st['not_measured']})", "nm") if "not_measured" in st else
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


def _when(d: Design) -> str:
    if d.looks == (0,):
        return "one look over every launch"
    if d.open:
        return (f"looks every {d.step} launches per stack from {d.looks[0]} on, as long as the budget allowed "
                f"(this run made {d.n_looks})")
    ran = d.n_looks
    return (f"looks after {', '.join(map(str, d.looks))} launches per stack"
            + ("" if ran == len(d.looks) else f" (this run made {ran}: the budget allowed no more)"))


def _method_short(d: Design) -> str:
    rule = {"bh": "Benjamini-Hochberg", "holm": "Holm"}.get(d.rule, d.rule)
    return (f"exact distribution-free intervals of each ratio, {rule} over all metrics at each of {_when(d)}; "
            f"identical stacks get any better or worse call at most {100 * d.alpha:.0f} % of the time; each "
            "\"no difference\" call is controlled per metric")


def method_section(ctx: Context) -> Section | None:
    """How the calls are made, in full (the verdict links here)."""
    if "verdicts" not in ctx.data:
        return None
    d = ctx.design
    rule = {"bh": "Benjamini-Hochberg (weighted, step-up)", "holm": "Holm (weighted, step-down)"}.get(d.rule, d.rule)
    unit = ("blocks (launches of both stacks inside one job, A B B A then B A A B: the stratified Mann-Whitney "
            "test over the blocks, where a job's own level cancels)" if d.blocks else
            "pairs (each pair's log ratio, Hodges-Lehmann over the pairs with the exact Wilcoxon signed-rank "
            "interval)")
    test = (f"as the better of two tests, each at half the look's alpha, where the within-unit one can reach it: "
            f"{unit}, and two samples; the interval printed is the chosen test's, at the level picking it after "
            "the fact guarantees; elsewhere" if d.either else
            f"within units where a look's launches can reach its alpha: {unit}; else" if d.paired else "")
    if d.looks == (0,):
        looks = "one look over every launch"
    else:
        looks = "looks after " + ", ".join(f"{n} launches per stack (alpha {100 * a:.2f} %)"
                                           for n, a in zip([d.size(j) for j in range(1, len(d.alphas) + 1)], d.alphas))
        if d.open:
            spend = ("alpha x 6 / (pi^2 j^2)" if d.first_share is None else
                     f"{100 * (1 - d.first_share):.0f} % of alpha x 6 / (pi^2 (j - 1)^2) after the first")
            looks += (f", and one every {d.step} more as long as the budget allows, look j spending {spend}, so "
                      f"that any number of looks together spend at most {100 * d.alpha:.0f} %")
    text = [
        f"Baseline: {ctx.baseline}. Each metric's ratio other / baseline is estimated {test + ' ' if test else ''}as "
        "two samples "
        "(Hodges-Lehmann on log values, with the exact distribution-free Mann-Whitney interval). The stacks' "
        "launches alternate (A B, B A; in blocks A B B A, B A A B), so what the host does over time falls on "
        f"both stacks alike; {looks}.",
        f"Error control over the whole report: at each look, {rule} over all the metrics of the comparison at "
        f"that look's alpha; the looks' alphas add up to at most {100 * d.alpha:.0f} %, so two identical stacks get "
        f"any better or worse call at most {100 * d.alpha:.0f} % of the time, and with real differences at most "
        f"{100 * d.alpha:.0f} % of the calls are expected false (Holm: at most {100 * d.alpha:.0f} % chance of any). "
        f"Headline metrics share {100 * d.headline_share:.0f} % of each look's alpha, the secondary ones the rest. "
        "A metric's interval is printed at the level the rule gives it: it excludes 1 exactly when the metric "
        "is called better or worse.",
        "Verdict: better or worse when the rule rejects ratio = 1, in the direction the check declares "
        "(higher or lower where it declares none); no difference when the metric's equivalence interval "
        f"(two one-sided tests at the look's alpha) holds 1 and lies inside its margin (the check's, else "
        f"±{100 * d.margin:.0f} %): each such call is controlled per metric, not over the report; inconclusive "
        "otherwise, with the differences its interval leaves open and about how many more launches per stack "
        "its measured spread would need; no verdict where the launches cannot reach the level the metric needs. "
        "A metric stops at the first look that decides it; a look re-runs only the checks with an open metric. "
        "Launches: what the call rests on (a + b launches, or pairs); the medians show every launch. Node "
        "checks, which run with one stack, are in their own section.",
    ]
    return Section("How the calls are made", text=text, anchor="method")
