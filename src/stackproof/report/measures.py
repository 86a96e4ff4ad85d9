"""Sections with figures: size curves (OSU, NetPIPE) of the stacks overlaid, and system noise
(Table IV and Fig. 2 of the paper) from FWQ."""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np

from stackproof.report.curves import curves, human_bytes
from stackproof.report.plots import curve_plot, fwq_plots, slug
from stackproof.report.sections import Context, Section, Table, fmt
from stackproof.report.verdict import copy_bandwidth, judge

PROFILE_ORDER = ["baseline", "freecore-first", "freecore-last", "corespec", "clean"]


def curves_section(ctx: Context) -> Section | None:
    data = curves(ctx.cases)
    ctx.data["curves"] = {" | ".join(map(str, k)): {s: {str(sz): v for sz, v in pts.items()} for s, pts in ser.items()}
                          for k, ser in data.items()}
    if not data:
        return None
    sec = Section("Message-size curves", anchor="curves", figures_first=True, text=[
        "Each stack's median over the repeats (line) and min-max (band); below, the ratio to the baseline "
        f"({ctx.baseline}) with its {100 * (1 - ctx.design.alpha):.0f} % interval of that size alone (a description, "
        "not a call: the calls are the verdict's). Every figure uses the same colour per stack and the same "
        "message-size axis."])
    sizes = [sz for ser in data.values() for pts in ser.values() for sz in pts if sz > 0] or [1]
    xlim = (min(sizes), max(sizes))
    for key in sorted(data):
        check, case, system, kind, unit = key
        series = data[key]
        title = f"{case}: {kind}" + (f" on {system}" if len({k[2] for k in data}) > 1 else "")
        limits = ({s: v for (s, sysname), v in copy_bandwidth(ctx).items() if sysname == system and s in series}
                  if kind == "bandwidth" and unit == "MB/s" else None)
        path = curve_plot(title, kind, unit, series, ctx.stacks, ctx.baseline, xlim,
                          ctx.img / f"{slug('osu' if check.startswith('OSU') else check.lower(), case, kind)}.png",
                          limits, ctx.design)
        sec.figures.append((title, path))
        better = "lower" if kind == "latency" else "higher"   # OSU/NetPIPE: a latency or a bandwidth curve
        stacks = [s for s in ctx.stacks if s in series]
        rows = []
        for sz in sorted({sz for pts in series.values() for sz in pts}):
            row = [human_bytes(sz)] + [fmt(float(np.median(series[s][sz]))) if sz in series[s] else "-" for s in stacks]
            for s in stacks:
                if s == ctx.baseline:
                    continue
                b, o = series.get(ctx.baseline, {}).get(sz), series[s].get(sz)
                if b and o:
                    c = judge(b, o, better, ctx.design)
                    row.append(f"{c.ratio:.3g}" + (f" [{c.lo:.3g}, {c.hi:.3g}]" if c.lo is not None else ""))
                else:
                    row.append("-")
            rows.append(row)
        sec.tables.append(Table(["size"] + [f"{s} ({unit})" for s in stacks]
                                + [f"{s} / {ctx.baseline}" for s in stacks if s != ctx.baseline], rows,
                                caption=f"{case}, {kind} per message size", folded=True))
    return sec


def noise_rows(cases) -> list[dict]:
    """Table IV: the most-affected core's statistics per stack, configuration and signature
    (median over the repeats)."""
    groups = defaultdict(list)
    for c in cases:
        if c.check != "FWQNoise" or c.result != "pass" or "std" not in c.perf:
            continue
        groups[(c.stack, c.system, c.params.get("signature", "none"), c.params.get("profile", "?"))].append(c)
    rows = []
    for (stack, system, sig, prof), cs in groups.items():
        r = {"stack": stack, "profile": prof, "signature": sig, "system": system, "n": len(cs),
             "trace": next((str(Path(c.outputdir) / "fwq.dat") for c in cs
                            if c.outputdir and (Path(c.outputdir) / "fwq.dat").is_file()), None)}
        for k in ("min", "mean", "max", "std", "noise_fraction"):
            vals = [c.perf[k]["value"] for c in cs if k in c.perf and c.perf[k]["value"] is not None]
            if vals:
                r[k] = float(np.median(vals))
        rows.append(r)
    order = {p: i for i, p in enumerate(PROFILE_ORDER)}
    rows.sort(key=lambda r: (r["stack"], r["system"], r["signature"] != "none", r["signature"],
                             order.get(r["profile"], 99)))
    for r in rows:
        base = next((b for b in rows if b["stack"] == r["stack"] and b["system"] == r["system"]
                     and b["signature"] == r["signature"] and b["profile"] == "baseline"), None)
        r["std_ratio"] = (r["std"] / base["std"]) if base and base.get("std") else None
    return rows


def noise_section(ctx: Context) -> Section | None:
    rows = noise_rows(ctx.cases)
    ctx.data["noise"] = rows
    if not rows:
        return None
    table = [[r["stack"], r["system"], r["signature"], r["profile"], str(r["n"])]
             + [fmt(r[k] / 1e3) if k in r else "-" for k in ("min", "mean", "max", "std")]
             + [fmt(r.get("noise_fraction")), fmt(r.get("std_ratio"))] for r in rows]
    return Section("System noise (Table IV)", anchor="noise", text=[
        "Statistics of the most-affected core (largest standard deviation), as in the paper's Table IV; "
        "times in milliseconds, median over the n repeats."],
        tables=[Table(["stack", "system", "injected", "configuration", "n", "min", "mean", "max", "std",
                       "noise fraction", "std / baseline"], table)],
        figures=fwq_plots(rows, ctx.img))
