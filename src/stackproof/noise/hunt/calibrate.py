"""The detour threshold from the measured background, per CPU, and the evidence about what no
kernel event explains.

A threshold scan re-attributes the same traced run at each threshold of a ladder and reports, per
CPU: detours per second, detour time, the part attributed to real culprits, and the *invisible
stalls* (detours with no kernel event at all in their window: the host, the hypervisor, SMIs):
rate, durations, time. `choose` picks, per CPU, the lowest threshold at which real culprits hold
at least TARGET of the detour time (sensitivity first, then attribution quality); a CPU where no
threshold gets there takes the one with the best share, and says so.

Evidence for "hypervisor/hardware": the steal time the hypervisor reports for the CPU
(/proc/stat, 10 ms resolution) over the same run, set against the invisible-stall time; and, when
the hunt covers several CPUs, how many invisible stalls coincide with one on another CPU, against
the coincidences chance alone would give.
"""
from __future__ import annotations

import numpy as np

from stackproof.noise.hunt.attribute import attribute

LADDER_US = (10, 15, 20, 30, 50, 70, 100, 150, 200)
TARGET = 0.8
BANDS_US = (10, 20, 50)          # invisible stalls counted above these excesses


def _row(r, span_s: float) -> dict:
    ex = np.asarray(r.detour_excess_us, dtype=float)
    expl = np.asarray(r.detour_explained_us, dtype=float)
    invisible = ex[expl <= 0] if ex.size else ex
    return {"threshold_us": r.threshold_us, "detours_per_s": r.detours / span_s,
            "detour_ms_per_s": r.detour_time_us / 1e3 / span_s, "real_fraction": r.real_fraction,
            "attributed_fraction": r.attributed_fraction, "hypervisor_ms_per_s": r.hypervisor_us / 1e3 / span_s,
            "unexplained_ms_per_s": (r.detour_time_us - r.attributed_us) / 1e3 / span_s,
            "invisible_per_s": invisible.size / span_s, "invisible_ms_per_s": invisible.sum() / 1e3 / span_s,
            "invisible_p50_us": float(np.median(invisible)) if invisible.size else None,
            "invisible_p90_us": float(np.percentile(invisible, 90)) if invisible.size else None,
            "invisible_max_us": float(invisible.max()) if invisible.size else None}


def scan(trace, tl, offset_ns: int, ladder=LADDER_US, self_comm: str = "fwq-th") -> dict[int, list[dict]]:
    """{cpu: [row per threshold]} for the traced run."""
    out: dict[int, list[dict]] = {}
    for th in ladder:
        for r in attribute(trace, tl, offset_ns=offset_ns, threshold_us=float(th), self_comm=self_comm):
            span_s = r.samples * r.quantum_us / 1e6 if r.samples else 1.0
            span_s = max(span_s, 1e-3)
            out.setdefault(r.cpu, []).append(_row(r, span_s))
    return out


def choose(rows: list[dict], target: float = TARGET) -> tuple[float, str]:
    """The lowest threshold whose real-culprit share reaches `target`, else the best share."""
    for row in rows:
        if row["detours_per_s"] > 0 and row["real_fraction"] >= target:
            return row["threshold_us"], f"lowest threshold with >= {target:.0%} of the detour time on real culprits"
    with_detours = [r for r in rows if r["detours_per_s"] > 0] or rows
    best = max(with_detours, key=lambda r: (r["real_fraction"], -r["threshold_us"]))
    return best["threshold_us"], (f"no threshold reaches {target:.0%} on real culprits (best "
                                  f"{best['real_fraction']:.0%}): the background is not separable here")


def background(results: list, steal_ms: dict, span_s: float) -> dict:
    """Invisible stalls per CPU in bands, set against steal time; cross-CPU coincidence."""
    out: dict = {"per_cpu": {}, "coincidence": None}
    stalls = {}
    for r in results:
        ex = np.asarray(r.detour_excess_us, dtype=float)
        expl = np.asarray(r.detour_explained_us, dtype=float)
        st = np.asarray(r.detour_start_s, dtype=float)
        inv = (expl <= 0) if ex.size else np.zeros(0, dtype=bool)
        stalls[r.cpu] = (st[inv], ex[inv])
        bands = {f">{b}us": {"per_s": float((ex[inv] > b).sum() / span_s),
                             "ms_per_s": float(ex[inv][ex[inv] > b].sum() / 1e3 / span_s)} for b in BANDS_US}
        out["per_cpu"][str(r.cpu)] = {"threshold_us": r.threshold_us, "invisible_stalls": int(inv.sum()),
                                      "invisible_ms": float(ex[inv].sum() / 1e3), "bands": bands,
                                      "hypervisor_ms": r.hypervisor_us / 1e3,
                                      "unexplained_ms": (r.detour_time_us - r.attributed_us) / 1e3,
                                      "steal_ms": steal_ms.get(str(r.cpu), steal_ms.get(r.cpu))}
    cpus = sorted(stalls)
    if len(cpus) >= 2:
        hits = total = 0
        expected = 0.0
        for c in cpus:
            s, w = stalls[c]
            others = [stalls[o] for o in cpus if o != c]
            for t, width in zip(s, w):
                total += 1
                hits += any(np.any((os_ < t + width * 1e-6) & (os_ + ow * 1e-6 > t)) for os_, ow in others)
            # chance: the fraction of time the other CPUs spend in an invisible stall, times n stalls
            expected += len(s) * min(1.0, sum(float(ow.sum()) * 1e-6 for _, ow in others) / span_s)
        out["coincidence"] = {"stalls": total, "coinciding": int(hits), "expected_by_chance": expected}
    return out
