"""The verdict: the per-metric call from the ratio's interval, and the report's opening table (stack A
vs stack B, one row per application metric); on-node bandwidth as a fraction of the node's
memory-copy bandwidth measured in the same run (MemoryBandwidth.copy_bw).

Calls (docs/performance.md): *better* / *worse* when the interval of other/baseline excludes 1 (the
direction declared by the check says which), *no difference* when it lies inside the equivalence
margin [1/(1+m), 1+m], else *inconclusive* (with the interval). A metric whose check declared no
direction is called *higher* / *lower*, never better or worse. "Verdict" means this call only; whether a
ReFrame run measured anything at all is its *run outcome* (stackproof.report.outcome).
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace

import numpy as np

from stackproof.report.curves import headline_var, size_of_var
from stackproof.report.rows import by_key, why_not_measured
from stackproof.report.sections import Context, Section, Table, fmt
from stackproof.report.stats import LEVEL, Design, paired_ratio_interval, ratio_interval, summarize

BETTER, WORSE, SAME, INCONCLUSIVE, NO_VERDICT = "better", "worse", "no difference", "inconclusive", "no verdict"
DECIDED = (BETTER, WORSE, SAME, "higher", "lower")
CSS = {BETTER: "better", WORSE: "worse", SAME: "nsd", INCONCLUSIVE: "inc", NO_VERDICT: "nm", "higher": "dir",
       "lower": "dir"}
FWQ_HEADLINE = ("std", "noise_fraction")
ONE_LOOK = Design(looks=(0,), alpha=1 - LEVEL, margin=0.05)


@dataclass(frozen=True)
class Comparison:
    ratio: float | None            # Hodges-Lehmann ratio other/baseline (None: not computable)
    lo: float | None               # interval of the ratio
    hi: float | None
    level: float | None            # the interval's exact coverage
    pct: float | None              # (median other / median baseline - 1) * 100
    verdict: str                   # the call: better | worse | no difference | inconclusive | higher | lower | no verdict
    why: str = ""                  # why no call could be made


def call(lo: float, hi: float, better: str | None, margin: float) -> str:
    """The call from an interval of other/baseline (see the module text)."""
    if lo > 1.0 or hi < 1.0:
        higher = lo > 1.0
        if better not in ("higher", "lower"):
            return "higher" if higher else "lower"
        return BETTER if higher == (better == "higher") else WORSE
    if 1.0 / (1.0 + margin) <= lo and hi <= 1.0 + margin:
        return SAME
    return INCONCLUSIVE


def judge(baseline, other, better: str | None, design: Design = ONE_LOOK, level: float | None = None,
          paired: bool = False) -> Comparison:
    """The comparison of two stacks' launches at `level` (default: the design's). paired: baseline[i]
    and other[i] were launched one after the other (signed-rank on the per-pair ratios)."""
    b, o = np.asarray(baseline, dtype=float), np.asarray(other, dtype=float)
    mb, mo = float(np.median(b)), float(np.median(o))
    pct = 100.0 * (mo - mb) / mb if mb else None
    level = design.level if level is None else level
    got = paired_ratio_interval(b, o, level) if paired else ratio_interval(b, o, level)
    if got is None:
        return Comparison(mo / mb if mb else None, None, None, None, pct, NO_VERDICT,
                          "values <= 0: a ratio is not defined")
    ratio, lo, hi, cov = got
    if lo is None:
        what = f"n={len(b)} pairs" if paired else f"n={len(b)} and {len(o)}"
        return Comparison(ratio, None, None, None, pct, NO_VERDICT, f"too few repeats ({what}) for an interval")
    return Comparison(ratio, lo, hi, cov, pct, call(lo, hi, better, design.margin))


def pairs_of(row, baseline: str, other: str) -> dict[int, tuple[float, float]] | None:
    """repeat index -> (baseline, other) for the indices both stacks launched; None when a stack
    lacks indices or repeats one (then the launches cannot be paired)."""
    out = []
    for s in (baseline, other):
        idx = row.repeats.get(s) or []
        if len(idx) != len(row.samples[s]) or any(not isinstance(i, int) for i in idx) or len(set(idx)) != len(idx):
            return None
        out.append(dict(zip(idx, row.samples[s])))
    return {i: (out[0][i], out[1][i]) for i in sorted(set(out[0]) & set(out[1]))}


def sequential_judge(row, baseline: str, other: str, design: Design) -> tuple[Comparison, list[int]]:
    """The call as the sequential design makes it: at each look, the launches of the first `look`
    pairs (repeat index below it) at that look's level; the first look that decides is the call,
    later launches (run for another metric of the same check) do not reopen it. A look whose
    interval falls short of its level (a launch missing) decides nothing. Without looks, or without
    repeat indices, every launch at once (two samples). Returns the comparison and [n baseline,
    n other] (for pairs: [pairs, pairs])."""
    base, oth = row.samples[baseline], row.samples[other]
    reps = (row.repeats.get(baseline) or [None]) + (row.repeats.get(other) or [None])
    if design.looks == (0,) or any(not isinstance(i, int) for i in reps):
        return judge(base, oth, row.better, design), [len(base), len(oth)]
    pairs = pairs_of(row, baseline, other) if design.paired else None
    c, n = None, [0, 0]
    for look, (by_pair, level) in zip(design.looks, design.plan):
        by_pair = by_pair and pairs is not None
        if by_pair:
            chosen = [p for i, p in pairs.items() if i < look]
            b, o = [p[0] for p in chosen], [p[1] for p in chosen]
        else:
            b = [v for v, i in zip(base, row.repeats[baseline]) if i < look]
            o = [v for v, i in zip(oth, row.repeats[other]) if i < look]
        if level is None or not b or not o or (c is not None and [len(b), len(o)] == n):
            continue                       # this look cannot call, or nothing new at it
        c, n = judge(b, o, row.better, design, level, paired=by_pair), [len(b), len(o)]
        if c.level is not None and c.level < level - 1e-9 and decided(c.verdict):
            c = replace(c, verdict=INCONCLUSIVE, why=f"{100 * c.level:.1f} % interval: below this look's "
                                                      f"{100 * level:.1f} %")
        if decided(c.verdict):
            break
    if c is None:
        return judge(base, oth, row.better, design), [len(base), len(oth)]
    return c, n


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


def decided(verdict: str) -> bool:
    """True when more launches cannot change the call (the sequential driver stops this metric)."""
    return verdict in DECIDED


def headline_rows(ctx: Context):
    """The rows the verdict uses: OSU/NetPIPE curves only at 8 B and 1 MiB, FWQ only its std and
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


def verdict_rows(ctx: Context) -> list[dict]:
    """One dict per stack-comparison metric: each stack's summary and each other stack against the baseline."""
    keyed = by_key(ctx.cases)
    node = node_check_keys(ctx)
    out = []
    for r in headline_rows(ctx):
        if (r.check, r.case, r.system) in node:
            continue
        row = {"check": r.check, "case": r.case, "system": r.system, "var": r.var, "unit": r.unit,
               "better": r.better, "stacks": {}, "vs": {}}
        for s in ctx.stacks:
            if r.samples.get(s):
                sm = summarize(r.samples[s])
                row["stacks"][s] = {"n": sm.n, "median": sm.median, "min": sm.lo, "max": sm.hi, "q1": sm.q1,
                                    "q3": sm.q3, "samples": r.samples[s], "sessions": sorted(r.sessions[s])}
            else:
                row["stacks"][s] = {"not_measured": why_not_measured(keyed.get((r.check, r.case, r.system), {})
                                                                     .get(s, []))}
        base = r.samples.get(ctx.baseline)
        for s in ctx.stacks:
            if s == ctx.baseline:
                continue
            if not base or not r.samples.get(s):
                who = ctx.baseline if not base else s
                row["vs"][s] = {"verdict": f"not measured ({who}: {row['stacks'][who]['not_measured']})"}
                continue
            c, n = sequential_judge(r, ctx.baseline, s, ctx.design)
            row["vs"][s] = {"ratio": c.ratio, "lo": c.lo, "hi": c.hi, "level": c.level, "pct": c.pct,
                            "n": n, "verdict": c.verdict + (f": {c.why}" if c.why else "")}
            if c.verdict == INCONCLUSIVE and c.lo is not None:
                row["vs"][s]["decide_pairs"] = pairs_to_decide(c.lo, c.hi, min(n), ctx.design.margin)
        out.append(row)
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


def in_words(rows: list[dict], others: list[str], baseline: str) -> str:
    """The verdict in one sentence per compared stack: how many metrics got each call."""
    out = []
    for o in others:
        calls = [r["vs"][o]["verdict"] for r in rows]
        calls = ["not measured" if c.startswith("not measured") else c.split(":")[0] for c in calls]
        order = (BETTER, WORSE, "higher", "lower", SAME, INCONCLUSIVE, NO_VERDICT, "not measured")
        counts = [f"{calls.count(c)} {c}" for c in order if calls.count(c)]
        out.append(f"{o} against {baseline}, {len(calls)} metrics: {', '.join(counts)}.")
    return " ".join(out)


def verdict_section(ctx: Context) -> Section:
    rows = verdict_rows(ctx)
    ctx.data["verdicts"] = rows
    ctx.data["design"] = ctx.design.as_dict()
    others = [s for s in ctx.stacks if s != ctx.baseline]
    level = ctx.design.level
    levels = {round(x, 4) for x in ctx.design.levels if x is not None} if ctx.design.looks != (0,) else {level}
    ci = f"{100 * level:.1f} % CI" if len(levels) <= 1 else f"CI, at least {100 * level:.1f} %"
    header = ["metric"]
    for o in others:
        header += ["verdict" if len(others) == 1 else f"verdict {o}",
                   f"{o} / {ctx.baseline} [{ci}]", "n pairs"]
    header += [f"{s} median [min–max]" for s in ctx.stacks]
    table = []
    for r in rows:
        cells = [f"{r['case']}: {r['var']} ({r['unit'] or 'no unit'}, {_better_text(r['better'])})"
                 + ("" if r["system"] == _only_system(ctx) else f" @{r['system']}")]
        for o in others:
            v = r["vs"][o]
            verdict = v["verdict"]
            if verdict.startswith("not measured"):
                cells += [(f"not measured ({_short(verdict[len('not measured ('):-1])})", "nm"), "-", "-"]
                continue
            css = CSS.get(verdict.split(":")[0], "")
            ratio = (f"{v['ratio']:.3g} [{v['lo']:.3g}, {v['hi']:.3g}]" if v.get("lo") is not None else
                     f"{v['ratio']:.3g} [no interval]" if v.get("ratio") is not None else "-")
            if v.get("level") is not None and v["level"] < level - 1e-9:
                ratio += f" ({100 * v['level']:.0f} % level)"
            n_text = str(min(v.get("n") or [0]))
            if v.get("decide_pairs"):
                n_text += f" (about {v['decide_pairs']} would decide)"
            cells += [(verdict, css), ratio, n_text]
        for s in ctx.stacks:
            st = r["stacks"][s]
            cells.append((f"not measured ({_short(st['not_measured'])})", "nm") if "not_measured" in st else
                         f"{fmt(st['median'])} [{fmt(st['min'])}–{fmt(st['max'])}] ({st['n']})")
        table.append(cells)
    d = ctx.design
    if d.looks == (0,):
        looks = "one look"
    elif d.paired:
        looks = ("looks after " + ", ".join(
            f"{n} pairs ({'-' if lv is None else f'{100 * lv:.1f} %'}, {'pair by pair' if p else 'two samples'})"
            for n, (p, lv) in zip(d.looks, d.plan))
            + f"; each look's level is the exact level of its interval, and their alphas add up to at most "
              f"{100 * d.alpha:.0f} %")
    else:
        looks = (f"looks after {', '.join(map(str, d.looks))} pairs at "
                 f"{', '.join('-' if x is None else f'{100 * x:.1f} %' for x in d.levels)} (their alphas add up "
                 f"to at most {100 * d.alpha:.0f} %)")
    method = ("pair by pair, the ratio other / baseline of each pair of launches (one right after the other, "
              "the order alternating, so a slow spell of the host that covers both cancels), Hodges-Lehmann "
              "over the pairs with its exact distribution-free interval (Wilcoxon signed-rank); at a look with "
              "too few pairs for that, the two stacks' launches as two samples (Hodges-Lehmann on log values, "
              "Mann-Whitney interval)" if d.paired else
              "the ratio other / baseline (Hodges-Lehmann on log values) with its exact distribution-free "
              "interval (Mann-Whitney)")
    text = [in_words(rows, others, ctx.baseline)] if rows else []
    text += [f"Baseline: {ctx.baseline}. Per metric: {method}, {looks}. Verdict: better or worse when "
            f"the interval excludes 1 (in the direction the check declares), no difference when it lies "
            f"inside ±{100 * d.margin:.0f} %, inconclusive otherwise (more launches would be needed). "
            "n pairs: the launches the call rests on (the first look that decided it; a later look run for "
            "another metric of the same check does not reopen it), and for an inconclusive metric about how "
            "many pairs would decide it at the spread its launches showed (option --max-pairs); the medians show "
            "every launch. "
            "Node checks, which run with one stack, are in their own section below."]
    compared = [r for r in rows if any(not v["verdict"].startswith("not measured") for v in r["vs"].values())]
    spent = sum(1 - x for x in d.levels if x is not None) if d.looks != (0,) else d.alpha
    if len(compared) >= 5:
        text.append(f"Each metric is called better or worse wrongly at most {100 * spent:.1f} % of the time, so of "
                    f"{len(compared)} metrics of two identical stacks about {len(compared) * spent:.1f} would still "
                    "be called different: a single better or worse among many is weak evidence on its own (look at "
                    "its interval, its spread and the metrics of the same benchmark).")
    missing = unmeasured_benchmarks(ctx)
    if missing:
        text.append(f"Measured by no stack (see Skipped and Failed checks): {', '.join(missing)}.")
    if not rows:
        text.append("No metric was measured by two stacks: there is nothing to compare.")
    return Section("Verdict", text=text, tables=[Table(header, table)], anchor="verdict")


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
    """(stack, system) -> median memory-copy bandwidth (MB/s) measured in the same run."""
    out = {}
    for r in ctx.rows:
        if r.check.startswith("MemoryBandwidth") and r.var == "copy_bw":
            for s, v in r.samples.items():
                out[(s, r.system)] = float(np.median(v))
    return out


def bandwidth_fraction_section(ctx: Context) -> Section | None:
    copy = copy_bandwidth(ctx)
    ctx.data["copy_bw"] = {f"{s}@{sysname}": v for (s, sysname), v in copy.items()}
    rows = []
    for r in headline_rows(ctx):
        if not r.var.startswith("bw") or r.check.startswith("MemoryBandwidth") or r.unit != "MB/s":
            continue
        for s in ctx.stacks:
            if not r.samples.get(s):
                continue
            med = float(np.median(r.samples[s]))
            lim = copy.get((s, r.system))
            src = s
            if lim is None:       # the stack did not run the copy check: any stack's copy in that session
                pooled = [v for (st, sysname), v in copy.items() if sysname == r.system]
                lim = float(np.median(pooled)) if pooled else None
                src = "other stacks" if pooled else None
            rows.append([r.case, r.var, s, fmt(med), fmt(lim) if lim else ("not measured", "nm"),
                         f"{100 * med / lim:.1f} %" if lim else "-", src or "-"])
    if not rows:
        return None
    text = ["On-node bandwidth (two ranks on one node) against the physical limit: the node's memory-copy "
            "bandwidth (MemoryBandwidth copy_bw, MB/s) measured in the same run."]
    if not copy:
        text.append("No MemoryBandwidth check ran, so the fraction is not measured.")
    return Section("Bandwidth against the memory-copy limit", text=text, anchor="membw", tables=[
        Table(["benchmark", "metric", "stack", "median (MB/s)", "memory copy (MB/s)", "fraction", "copy measured by"],
              rows)])

