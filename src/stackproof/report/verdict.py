"""The verdict table (the report's opening) and on-node bandwidth as a fraction of the node's
memory-copy bandwidth measured in the same run (MemoryBandwidth.copy_bw)."""
from __future__ import annotations

import re
from collections import defaultdict

import numpy as np

from .curves import headline_var, size_of_var
from .rows import by_key, why_not_measured
from .sections import Context, Section, Table, fmt
from .stats import LEVEL, compare, direction, summarize

PERF_CHECKS = re.compile(r"OSU|NetPIPE|AMG|SW4|FWQ|Memory|Bench", re.I)
FWQ_HEADLINE = ("std", "noise_fraction")
CSS = {"better": "better", "worse": "worse", "no significant difference": "nsd"}
ARROW = {-1: "lower is better", 1: "higher is better", 0: "direction unknown"}


def _headline_rows(ctx: Context):
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


def verdict_rows(ctx: Context) -> list[dict]:
    """One dict per (measurement, metric): each stack's summary and each other stack against the baseline."""
    keyed = by_key(ctx.cases)
    out = []
    seen_keys = set()
    for r in _headline_rows(ctx):
        seen_keys.add((r.check, r.case, r.system))
        d = direction(r.var, r.unit)
        row = {"check": r.check, "case": r.case, "system": r.system, "var": r.var, "unit": r.unit,
               "direction": d, "stacks": {}, "vs": {}}
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
            c = compare(base, r.samples[s], d)
            row["vs"][s] = {"ratio": c.ratio, "lo": c.lo, "hi": c.hi, "level": c.level, "pct": c.pct,
                            "verdict": c.verdict + (f": {c.why}" if c.why else "")}
        out.append(row)
    # measurements no stack produced a value for (all skipped or failed)
    for key, per_stack in sorted(keyed.items()):
        if key in seen_keys or not PERF_CHECKS.search(key[0]):
            continue
        if any(c.result == "pass" and c.perf for cs in per_stack.values() for c in cs):
            continue
        row = {"check": key[0], "case": key[1], "system": key[2], "var": "-", "unit": "", "direction": 0,
               "stacks": {s: {"not_measured": why_not_measured(per_stack.get(s, []))} for s in ctx.stacks}, "vs": {}}
        for s in ctx.stacks:
            if s != ctx.baseline:
                who = ctx.baseline if per_stack.get(ctx.baseline) or not per_stack.get(s) else s
                row["vs"][s] = {"verdict": f"not measured ({who}: {row['stacks'][who]['not_measured']})"}
        out.append(row)
    return out


def _short_reason(reason: str) -> str:
    """A skip reason names files and paths and would stretch the verdict table past the page, hiding the
    verdict column: the table says "skipped" and the Skipped checks section gives each reason in full."""
    return "skipped: reason under Skipped checks" if reason.startswith("skipped") else reason


def _level(lv) -> str:
    return "" if lv is None else (f" ({100 * lv:.0f} % level)" if lv < LEVEL else "")


def verdict_section(ctx: Context) -> Section:
    rows = verdict_rows(ctx)
    ctx.data["verdicts"] = rows
    others = [s for s in ctx.stacks if s != ctx.baseline]
    # The verdict comes right after the metric: on a narrow screen the wide medians scroll, not the answer.
    header = ["benchmark", "metric"]
    for o in others:
        header += ["verdict" if len(others) == 1 else f"verdict {o}", f"{o} / {ctx.baseline} [95 % CI]",
                   f"{o} vs {ctx.baseline} (%)"]
    header += [f"{s} median [min–max] (n)" for s in ctx.stacks]
    table = []
    for r in rows:
        cells = [r["case"] + ("" if r["system"] == _only_system(ctx) else f" @{r['system']}"),
                 "-" if r["var"] == "-" else f"{r['var']} ({r['unit']}), {ARROW[r['direction']]}"]
        medians = []
        for s in ctx.stacks:
            st = r["stacks"][s]
            if "not_measured" in st:
                medians.append((f"not measured ({_short_reason(st['not_measured'])})", "nm"))
            elif st["n"] == 1:
                medians.append(f"{fmt(st['median'])} (1)")
            else:
                medians.append(f"{fmt(st['median'])} [{fmt(st['min'])}–{fmt(st['max'])}] ({st['n']})")
        for o in others:
            v = r["vs"][o]
            verdict = v["verdict"]
            css = CSS.get(verdict, "nm" if verdict.startswith("not measured") else "")
            if verdict.startswith("not measured"):
                verdict = "not measured"  # the reason is in the stack's own cell of this row
            if v.get("lo") is not None:
                ratio = f"{v['ratio']:.3g} [{v['lo']:.3g}, {v['hi']:.3g}]{_level(v['level'])}"
            elif v.get("ratio") is not None:
                ratio = f"{v['ratio']:.3g} [no interval]"
            else:
                ratio = "-"
            pct = "-" if v.get("pct") is None else f"{v['pct']:+.1f} %"
            cells += [(verdict, css), ratio, pct]
        table.append(cells + medians)
    text = [
        f"Baseline: {ctx.baseline}. Each cell gives the median over the repeats, the spread (min-max) and the "
        "number of repeats n. The ratio is other / baseline (Hodges-Lehmann estimate on log values) with its "
        "exact distribution-free 95 % confidence interval (Mann-Whitney); where too few repeats cannot reach "
        "95 % the interval's real level is printed beside it, e.g. (90 % level) for 3 + 3 repeats. "
        "The % column is (median other - median baseline) / median baseline: for latencies and times a "
        "negative % means the other stack is faster; for bandwidth and figures of merit a positive % means "
        "it is better.",
        "Verdict: better or worse only when the interval excludes 1 (taking the metric's direction into "
        "account); otherwise no significant difference. A stack without a value says why (skipped or "
        "failed, with the reason) and is never counted as a pass.",
    ]
    if not rows:
        text.append("No performance value was measured by any stack.")
    return Section("Verdict", text=text, tables=[Table(header, table)], anchor="verdict")


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
    for r in _headline_rows(ctx):
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
