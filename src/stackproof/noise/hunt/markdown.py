"""hunt.md: the culprit table per CPU, the threshold scan, the invisible stalls and their evidence,
the kernel's own osnoise accounting, the proposal and the Table IV rows of a hunt's document."""
from __future__ import annotations

from stackproof.cpulist import format_list
from stackproof.noise.stats import format_table
from stackproof.noise.hunt import propose as prop_mod

MIN_OCCURRENCES = 8          # a periodic culprit's signature needs this many occurrences in the run


def _fmt(v, spec):
    return "-" if v is None else format(v, spec)


def culprit_table(per_cpu: list[dict], top: int = 8) -> str:
    lines = ["| CPU | culprit | kind | stolen ms | share | detours | period ms | duration us | cgroup / unit |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in per_cpu:
        for c in r["culprits"][:top]:
            where = c.get("unit") or c.get("cgroup") or ""
            lines.append(f"| {r['cpu']} | {c['label']} | {c['kind']} | {c['stolen_us'] / 1e3:.3f} | "
                         f"{c['share']:.1%} | {c['detours']} | "
                         f"{_fmt(c['period_ms'], '.2f') if c['periodic'] else '-'} | "
                         f"{_fmt(c['duration_us'], '.0f') if c['periodic'] else '-'} | {where} |")
    return "\n".join(lines)


def markdown(doc: dict) -> str:
    out = [f"# Noise hunt on {doc['host']}: CPUs {format_list(doc['cpus'])}, {doc['duration_s']:g} s",
           "", f"Recorder: {doc['backend'].get('used', doc['backend']['name'])} ({doc['backend']['why']}). Trace clock "
           f"{doc['clock']['trace_clock']}, aligned by {doc['clock']['aligned_by']}. Detour threshold "
           + (", ".join(f"CPU {c} {t:g} us" for c, t in doc["thresholds_us"].items()) if doc.get("thresholds_us")
              else f"{doc['threshold_us']:g} us") + " over the undisturbed quantum"
           + (" (auto: from the threshold scan below)" if doc.get("threshold_mode") == "auto" else "") + ".", ""]
    out += ["| CPU | samples | quantum us | std us | max us | detours | detour ms | real culprits | + hypervisor |",
            "|---|---|---|---|---|---|---|---|---|"]
    for r in doc["per_cpu"]:
        real = r.get("real_fraction", r["attributed_fraction"])
        out.append(f"| {r['cpu']} | {r['samples']} | {r['quantum_us']:.1f} | {r['std_us']:.2f} | {r['max_us']:.0f} | "
                   f"{r['detours']} | {r['detour_time_us'] / 1e3:.2f} | {real:.1%} | {r['attributed_fraction']:.1%} |")
    out += background_md(doc)
    out += ["", "Culprits per CPU, by stolen time (period and duration for periodic ones):", "",
            culprit_table(doc["per_cpu"]), ""]
    few = [(r["cpu"], c["label"], c["occurrences"]) for r in doc["per_cpu"] for c in r["culprits"]
           if c["share"] >= 0.05 and 0 < c["occurrences"] < MIN_OCCURRENCES and not c["periodic"]]
    for cpu, label, n in few:
        out.append(f"- {label} on CPU {cpu}: {n} occurrences in {doc['duration_s']:g} s, too few to tell a period "
                   f"(>= {MIN_OCCURRENCES} needed): a culprit of f Hz needs --duration >= {MIN_OCCURRENCES}/f s")
    out += [""] if few else []
    if doc.get("osnoise"):
        out += ["The kernel's own accounting (osnoise tracepoints, net noise per source, us):", ""]
        for c, d in doc["osnoise"].items():
            top = ", ".join(f"{k} {v:.0f}" for k, v in list(d["by_source"].items())[:6])
            out.append(f"- CPU {c}: {d['samples']} samples, {d['noise_us']:.0f} us: {top}")
        out.append("")
    p = doc.get("proposal")
    if p:
        out += [f"Proposed profile `{p['profile_name']}`: system CPUs {p['system_cpus']}, application CPUs "
                f"{p['app_cpus']}, daemons {', '.join(p['profile']['daemons'])}; IRQs to steer: "
                f"{', '.join(str(i['irq']) for i in p['irqs']) or 'none'}."]
        out += [f"- {line}" for line in prop_mod.commands(p) + p["kernel"] + p["notes"]]
        out.append("")
    if doc.get("table_iv"):
        out += ["Table IV rows (most affected core), same run:", "", format_table(doc["table_iv"]), ""]
        out += ["Per-CPU std (us): " + "; ".join(f"{n}: " + ", ".join(f"CPU {c} {v:.1f}" for c, v in s.items())
                                                 for n, s in doc["per_cpu_std_us"].items()), ""]
    return "\n".join(out)


def background_md(doc: dict) -> list[str]:
    """The threshold scan (calibration) and the invisible stalls with their evidence."""
    out = []
    for cpu, cal in (doc.get("calibration") or {}).items():
        out += ["", f"Threshold scan, CPU {cpu} (chosen {cal['threshold_us']:g} us: {cal['why']}):", "",
                "| threshold us | detours/s | detour ms/s | real culprits | invisible stalls/s | invisible ms/s | p50 / p90 / max us |",
                "|---|---|---|---|---|---|---|"]
        for r in cal["scan"]:
            pct = "/".join("-" if r[k] is None else f"{r[k]:.0f}" for k in ("invisible_p50_us", "invisible_p90_us",
                                                                           "invisible_max_us"))
            out.append(f"| {r['threshold_us']:g} | {r['detours_per_s']:.1f} | {r['detour_ms_per_s']:.2f} | "
                       f"{r['real_fraction']:.1%} | {r['invisible_per_s']:.1f} | {r['invisible_ms_per_s']:.2f} | {pct} |")
    bg = doc.get("background")
    if bg:
        out += ["", "Invisible stalls (no kernel event in the detour: host, hypervisor, SMI) against the "
                    "hypervisor's steal time for the CPU over the same run:", ""]
        for cpu, b in bg["per_cpu"].items():
            bands = ", ".join(f"{k} {v['per_s']:.1f}/s {v['ms_per_s']:.2f} ms/s" for k, v in b["bands"].items())
            steal = "-" if b["steal_ms"] is None else f"{b['steal_ms']:.0f}"
            out.append(f"- CPU {cpu}: {b['invisible_stalls']} stalls, {b['invisible_ms']:.2f} ms ({bands}); "
                       f"missed ticks (hypervisor) {b['hypervisor_ms']:.2f} ms; steal {steal} ms (10 ms resolution)")
        co = bg.get("coincidence")
        if co:
            out.append(f"- on several CPUs at once: {co['coinciding']} of {co['stalls']} stalls overlap one on "
                       f"another CPU ({co['expected_by_chance']:.1f} expected by chance)")
    return out
