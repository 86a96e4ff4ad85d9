"""The hunt's figure: per CPU, detours over time coloured by their main culprit (left) and the stolen
time per culprit (right). Same look as the FWQ plots (matplotlib Agg, rasterised points)."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

TOP = 6


def plot_timeline(doc: dict, path: Path) -> Path:
    per_cpu = doc["per_cpu"]
    n = max(1, len(per_cpu))
    fig, axes = plt.subplots(n, 2, figsize=(11, 2.6 * n + 0.6), squeeze=False,
                             gridspec_kw={"width_ratios": [3, 1.3]})
    # one colour per culprit across CPUs (the biggest ones), grey for the rest
    totals: dict[str, float] = {}
    labels: dict[str, str] = {}
    for r in per_cpu:
        for c in r["culprits"]:
            totals[c["key"]] = totals.get(c["key"], 0) + c["stolen_us"]
            labels[c["key"]] = c["label"]
    ranked = sorted(totals, key=lambda k: -totals[k])[:TOP]
    cmap = plt.get_cmap("tab10")
    colour = {k: cmap(i) for i, k in enumerate(ranked)}
    other = (0.6, 0.6, 0.6, 1.0)
    for row, r in zip(axes, per_cpu):
        ax, bx = row
        xs, ys, cs = r["detour_start_s"], r["detour_excess_us"], [colour.get(k, other) for k in r["detour_top"]]
        ax.scatter(xs, ys, s=6, c=cs, rasterized=True, linewidths=0)
        ax.set_yscale("log")
        ax.set_ylabel(f"CPU {r['cpu']}\ndetour (us)")
        ax.set_xlim(0, max(xs[-1] if xs else 0, doc.get("duration_s", 1)))
        ax.grid(alpha=0.3)
        top = r["culprits"][:TOP + 2]
        bx.barh(range(len(top)), [c["stolen_us"] / 1e3 for c in top],
                color=[colour.get(c["key"], other) for c in top])
        bx.set_yticks(range(len(top)))
        bx.set_yticklabels([_short(c["label"]) for c in top], fontsize=7)
        bx.invert_yaxis()
        bx.set_xlabel("stolen (ms)")
        bx.set_title(f"{r['attributed_fraction']:.0%} of {r['detour_time_us'] / 1e3:.1f} ms attributed", fontsize=8)
    axes[-1][0].set_xlabel("time since FWQ start (s)")
    handles = [plt.Line2D([], [], marker="o", ls="", color=colour[k], label=_short(labels[k])) for k in ranked]
    if handles:
        fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 1 - 0.35 / fig.get_figheight()),
                   ncol=min(len(handles), 3), fontsize=7, frameon=False)
    fig.suptitle(f"Who stole the time: {doc['host']}, threshold {doc['threshold_us']:g} us", y=0.995, fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 1 - 1.0 / fig.get_figheight()))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _short(label: str, n: int = 32) -> str:
    return label if len(label) <= n else label[:n - 1] + "…"
