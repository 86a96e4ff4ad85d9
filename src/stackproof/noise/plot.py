"""Plots of FWQ traces in the style of the TOSS paper (Figs. 2-5): per-core scatter of sample time
over sample index, per-core box-and-whiskers, zoomed views and side-by-side configurations.
Scatter points are thinned (every detour kept, the flat part decimated) and rasterised, so PNG and
SVG files stay small even for 44 cores x 100,000 samples."""
from __future__ import annotations

from pathlib import Path

import numpy as np

import matplotlib

from stackproof.noise.stats import detour_threshold_us

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MAX_POINTS_PER_CORE = 4000


def _core_label(rank: dict) -> str:
    return f"r{rank['rank']}/cpu{rank['cpu']}"


def _thin(d_ms: np.ndarray, max_points: int) -> np.ndarray:
    """Indices to draw: the detours (samples above the detour threshold, evenly subsampled if there
    are very many) plus an even subset of the flat rest, so thinning never hides a noise line."""
    if d_ms.size <= max_points:
        return np.arange(d_ms.size)
    threshold = np.median(d_ms) + detour_threshold_us(d_ms * 1e3) / 1e3
    high = np.flatnonzero(d_ms > threshold)
    budget = (3 * max_points) // 4
    if high.size > budget:
        high = high[np.linspace(0, high.size - 1, budget).astype(int)]
    rest = np.linspace(0, d_ms.size - 1, max_points - high.size).astype(int)
    return np.union1d(high, rest)


def _scatter(ax, trace, ylim_ms=None, window=None, max_points=MAX_POINTS_PER_CORE):
    d = trace.durations_us() / 1e3
    cmap = plt.get_cmap("tab20" if trace.nranks > 10 else "tab10")
    lo, hi = window if window else (0, trace.nsamples)
    for i in range(trace.nranks):
        seg = d[i, lo:hi]
        idx = _thin(seg, max_points)
        ax.scatter(idx + lo, seg[idx], s=3, color=cmap(i % cmap.N), label=_core_label(trace.ranks[i]),
                   rasterized=True, linewidths=0)
    ax.set_xlabel("sample")
    ax.set_ylabel("sample time (ms)")
    if ylim_ms:
        ax.set_ylim(*ylim_ms)
    ax.grid(alpha=0.3)
    if trace.nranks <= 12:
        ax.legend(markerscale=4, fontsize=7, loc="upper right")


def _finish(fig, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_scatter(trace, path, ylim_ms=None, title=None) -> Path:
    fig, ax = plt.subplots(figsize=(8, 4))
    _scatter(ax, trace, ylim_ms)
    ax.set_title(title or f"FWQ {trace.name()}: {trace.nranks} cores x {trace.nsamples} samples")
    return _finish(fig, path)


def plot_zoom(trace, path, ylim_ms=None, window=None, title=None) -> Path:
    """Zoomed view: by default the y-range of the bulk (min to 99.9th percentile x 1.05) over the
    first 2,000 samples, where small frequent detours become visible (paper Fig. 5)."""
    d = trace.durations_us() / 1e3
    if ylim_ms is None:
        ylim_ms = (float(d.min()) * 0.995, float(np.percentile(d, 99.9)) * 1.05)
    if window is None:
        window = (0, min(trace.nsamples, 2000))
    fig, ax = plt.subplots(figsize=(8, 4))
    _scatter(ax, trace, ylim_ms, window)
    ax.set_title(title or f"FWQ {trace.name()} (zoom)")
    return _finish(fig, path)


def plot_box(trace, path, title=None) -> Path:
    d = trace.durations_us() / 1e3
    fig, ax = plt.subplots(figsize=(max(4, 0.35 * trace.nranks + 2), 4))
    ax.boxplot([row for row in d], whis=1.5, flierprops={"markersize": 2, "rasterized": True})
    ax.set_xticks(range(1, trace.nranks + 1), [_core_label(r) for r in trace.ranks],
                  rotation=90 if trace.nranks > 8 else 0, fontsize=7)
    ax.set_ylabel("sample time (ms)")
    ax.set_title(title or f"FWQ {trace.name()}: per-core distribution")
    ax.grid(alpha=0.3, axis="y")
    return _finish(fig, path)


def plot_compare(traces: list, path, ylim_ms=None) -> Path:
    """One scatter panel per configuration on a shared y-axis (paper Figs. 2-4 side by side). By
    default the axis is capped at 1.5 x the largest 99.95th percentile (as the paper caps Fig. 2b),
    so rare huge detours do not flatten everything else; the maxima are in the statistics."""
    fig, axes = plt.subplots(1, len(traces), figsize=(4.2 * len(traces), 3.8), sharey=True, squeeze=False)
    if ylim_ms is None:
        top = max(float(np.percentile(t.durations_us(), 99.95)) for t in traces) / 1e3 * 1.5
        bottom = min(float(t.durations_us().min()) for t in traces) / 1e3
        ylim_ms = (bottom * 0.95, top)
    for ax, t in zip(axes[0], traces):
        _scatter(ax, t, ylim_ms, max_points=MAX_POINTS_PER_CORE // 2)
        ax.set_title(t.name(), fontsize=10)
    return _finish(fig, path)


def plot_all(trace, outdir, formats=("png", "svg"), prefix=None) -> list[Path]:
    """Scatter, box and zoom plots of one trace in every format; returns the files written."""
    prefix = prefix or trace.name()
    out = []
    for fmt in formats:
        out.append(plot_scatter(trace, Path(outdir) / f"{prefix}-scatter.{fmt}"))
        out.append(plot_box(trace, Path(outdir) / f"{prefix}-box.{fmt}"))
        out.append(plot_zoom(trace, Path(outdir) / f"{prefix}-zoom.{fmt}"))
    return out
