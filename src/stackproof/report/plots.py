"""Figures of the report: size curves of the stacks overlaid (median with min-max band, ratio to the
baseline below) and the FWQ per-core plots (Fig. 2). PNG files; the HTML embeds them."""
from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

from stackproof.errors import StackproofError
from stackproof.report.curves import human_bytes

FONT = 11


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams.update({"font.size": FONT, "axes.titlesize": FONT + 1, "legend.fontsize": FONT - 1})
    return plt


def slug(*parts) -> str:
    return re.sub(r"[^\w.-]+", "_", "-".join(str(p) for p in parts)).strip("_")


def curve_plot(title: str, kind: str, unit: str, series: dict, stacks: list[str], baseline: str,
               xlim: tuple[int, int], path: Path, limits: dict | None = None, design=None) -> Path:
    """series: {stack: {bytes: [values]}}; one colour per stack, the same in every figure; limits:
    {stack: DRAM-sized memory-copy bandwidth} drawn as dashed lines (the bound of on-node bandwidth for
    messages beyond the caches; cache-sized ones are compared with a same-size copy in the report's table)."""
    import numpy as np

    from stackproof.report.calls import ONE_LOOK, judge
    design = design or ONE_LOOK
    plt = _plt()
    colours = {s: f"C{i}" for i, s in enumerate(stacks)}
    fig, (ax, axr) = plt.subplots(2, 1, figsize=(7.5, 5.6), sharex=True,
                                  gridspec_kw={"height_ratios": [3, 1.4]})
    for stack in [s for s in stacks if s in series]:
        pts = sorted((sz, v) for sz, v in series[stack].items() if sz > 0)   # log axis: no 0-byte point
        x = [p[0] for p in pts]
        med = [float(np.median(v)) for _, v in pts]
        ax.plot(x, med, marker="o", ms=3.5, lw=1.6, color=colours[stack], label=stack)
        ax.fill_between(x, [min(v) for _, v in pts], [max(v) for _, v in pts], color=colours[stack], alpha=0.2)
    limits = limits or {}
    if limits and len({round(v, 6) for v in limits.values()}) == 1:      # one node, one limit
        ax.axhline(next(iter(limits.values())), color="0.3", ls="--", lw=1.1, label="DRAM-sized memory copy (same run)")
    else:
        for stack, lim in sorted(limits.items()):
            ax.axhline(lim, color=colours.get(stack, "0.3"), ls="--", lw=1.1, label=f"DRAM-sized memory copy ({stack})")
    better = "lower" if kind == "latency" else "higher"   # OSU/NetPIPE: a latency or a bandwidth curve
    base = series.get(baseline, {})
    for stack in [s for s in stacks if s in series and s != baseline]:
        sizes = sorted(sz for sz in set(base) & set(series[stack]) if sz > 0)
        cmp_ = [(sz, judge(base[sz], series[stack][sz], better, design)) for sz in sizes]
        cmp_ = [(sz, c) for sz, c in cmp_ if c.ratio is not None]
        if not cmp_:
            continue
        x = [sz for sz, _ in cmp_]
        axr.plot(x, [c.ratio for _, c in cmp_], marker="o", ms=3, color=colours[stack], label=f"{stack} / {baseline}")
        lo = [c.lo if c.lo is not None else c.ratio for _, c in cmp_]
        hi = [c.hi if c.hi is not None else c.ratio for _, c in cmp_]
        axr.fill_between(x, lo, hi, color=colours[stack], alpha=0.2)
    axr.axhline(1.0, color="0.4", lw=0.8)
    axr.set_yscale("log")                      # ratios: 0.5 and 2 equally far from 1
    lo_, hi_ = axr.get_ylim()
    axr.set_ylim(min(lo_, 0.8), max(hi_, 1.25))
    from matplotlib.ticker import FuncFormatter, LogLocator
    axr.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axr.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
    axr.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    for a in (ax, axr):
        a.set_xscale("log", base=2)
        a.grid(alpha=0.3, which="both")
        a.set_xlim(xlim[0] / 1.4, xlim[1] * 1.4)
    ax.set_yscale("log")
    ax.set_ylabel(f"{kind} ({unit})")
    ax.set_title(title)
    ax.legend(loc="best")
    axr.set_ylabel(f"ratio to\n{baseline}")
    axr.set_xlabel("message size")
    ticks = [2 ** e for e in range(0, 31, 3) if xlim[0] / 1.4 <= 2 ** e <= xlim[1] * 1.4]
    axr.set_xticks(ticks, [human_bytes(t) for t in ticks])
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def fwq_plots(rows: list[dict], outdir: Path) -> list[tuple[str, Path]]:
    """Fig. 2: per-core scatter of every configuration side by side, and per-core box plots."""
    from stackproof import noise
    from stackproof.noise import plot
    plots = []
    groups = defaultdict(list)
    for r in rows:
        if r["trace"]:
            groups[(r["stack"], r["system"], r["signature"])].append(r)
    for (stack, system, sig), rs in sorted(groups.items()):
        traces = []
        for r in rs:
            try:
                traces.append(noise.load(r["trace"], label=r["profile"]))
            except StackproofError as exc:
                print(f"report: skipping {r['trace']}: {exc}", file=sys.stderr)
        if not traces:
            continue
        s = slug("fwq", stack, system, sig)
        what = ", ".join(x for x in (stack, f"on {system}" if system else "") if x)
        noise_text = {"none": "no injected noise", "daemon-10Hz-2500us": "with the noise daemon (10 Hz x 2.5 ms)",
                      "10Hz-2500us": "with an in-job injector (10 Hz x 2.5 ms)"}.get(sig, f"injected signature {sig}")
        plots.append((f"FWQ samples per core, {what}, {noise_text} (one run per configuration: the one with "
                       "the median std)", plot.plot_compare(traces, outdir / f"{s}-scatter.png")))
        plots.append((f"FWQ per-core distributions (box plots), {what}, {noise_text}",
                      box_row(traces, outdir / f"{s}-box.png")))
    return plots


def box_row(traces: list, path: Path) -> Path:
    """The per-core box plots of every configuration in one row on a shared log axis, like the scatter
    row above it: one figure per signature instead of one per configuration, and a log axis because the
    quiet quantum (µs) and the detours (ms) differ by three orders of magnitude."""
    plt = _plt()
    fig, axes = plt.subplots(1, len(traces), figsize=(4.2 * len(traces), 3.6), sharey=True, squeeze=False)
    for ax, t in zip(axes[0], traces):
        d = t.durations_us() / 1e3
        ax.boxplot([row for row in d], whis=1.5, flierprops={"markersize": 2, "rasterized": True})
        ax.set_xticks(range(1, t.nranks + 1), [f"r{r['rank']}/cpu{r['cpu']}" for r in t.ranks],
                      rotation=90 if t.nranks > 8 else 0, fontsize=8)
        ax.set_yscale("log")
        ax.set_title(t.name(), fontsize=10)
        ax.grid(alpha=0.3, axis="y")
    axes[0][0].set_ylabel("sample time (ms)")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
