"""Projection results as a Markdown table, a slowdown-versus-nodes plot, and a report section."""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MEANING = ("Slowdown = time of N nodes with each node's measured noise (own random phase) / the same "
           "run without noise - 1. Effective = slowdown with the cores the profile reserves for the system "
           "counted as lost application capacity (cores_max / cores_profile).")


def _scenario(row: dict) -> tuple:
    return (row["profile"], row["collective"], row["noisy_fraction"], row["placement"], row["overlap"])


def _label(key: tuple) -> str:
    profile, coll, frac, place, overlap = key
    text = f"{profile}, {coll}"
    if frac < 1:
        text += f", {frac:g} noisy ({place})"
    if overlap:
        text += f", overlap {overlap:g}"
    return text


def _grouped(doc: dict) -> tuple[list[int], dict]:
    groups: dict[tuple, dict[int, dict]] = defaultdict(dict)
    for row in doc["rows"]:
        groups[_scenario(row)][row["nodes"]] = row
    nodes = sorted({row["nodes"] for row in doc["rows"]})
    return nodes, groups


def _pct(v) -> str:
    return "-" if v is None else f"{100 * v + 0.0:.2f} %".replace("-0.00", "0.00")


def slowdown_table(doc: dict) -> tuple[list[str], list[list[str]]]:
    """The one noise-at-scale table (`stackproof noise project` and the report): per scenario its node
    noise and the projected slowdown at each node count, with the effective slowdown where the profile
    leaves fewer application cores than the one with the most. (header, rows)."""
    nodes, groups = _grouped(doc)
    max_cores = max((v.get("app_cores") or 0) for v in doc["noise"].values())
    rows = []
    for key, by_nodes in groups.items():
        cells = []
        for n in nodes:
            row = by_nodes.get(n)
            fewer = row is not None and 0 < (row.get("app_cores") or 0) < max_cores
            eff = row.get("effective_slowdown") if fewer else None
            cells.append("-" if row is None else _pct(row["slowdown"]) + (f" (eff. {_pct(eff)})" if eff is not None else ""))
        rows.append([_label(key), f"{100 * doc['noise'][key[0]]['fraction']:.3f} %", *cells])
    return ["scenario", "node noise", *[f"{n:,} nodes" for n in nodes]], rows


def loggp_line(doc: dict) -> str:
    p = doc["loggp"]
    return (f"LogGP L={p['L']:.3g} us, o={p['o']:.3g} us, g={p['g']:.3g} us, G={p['G'] * 1e3:.3g} ns/B "
            f"({p['source']})")


def markdown(doc: dict) -> str:
    nodes, groups = _grouped(doc)
    header, rows = slowdown_table(doc)
    lines = [f"Noise at scale: {doc['source']}", "", loggp_line(doc), "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    lines += ["", MEANING, "",
              "Time per iteration without noise (us): what each algorithm costs before any noise.", "",
              "| scenario | " + " | ".join(f"{n} nodes" for n in nodes) + " |",
              "|---|" + "---|" * len(nodes)]
    for key, by_nodes in groups.items():
        cells = [f"{by_nodes[n]['quiet_time_us'] / by_nodes[n]['iterations']:.1f}" if n in by_nodes else "-"
                 for n in nodes]
        lines.append(f"| {_label(key)} | " + " | ".join(cells) + " |")
    lines.append("")
    return "\n".join(lines)


def plot(doc: dict, path: Path) -> Path:
    nodes, groups = _grouped(doc)
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for key, by_nodes in groups.items():
        xs = [n for n in nodes if n in by_nodes]
        ax.plot(xs, [100 * by_nodes[n]["slowdown"] for n in xs], marker="o", label=_label(key))
    ax.set_xscale("log", base=2)
    ax.set_xticks(nodes, [f"{n:,}" for n in nodes])
    ax.minorticks_off()
    ax.set_xlabel("nodes")
    ax.set_ylabel("slowdown (%)")
    ax.set_title("Projected slowdown of a bulk-synchronous code (interval "
                 f"{doc['rows'][0]['interval_us']:g} us)" if doc["rows"] else "Projected slowdown")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
