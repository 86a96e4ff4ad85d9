"""What the acceptance driver recorded beside ReFrame's results (report JSON key `stackproof`):
provenance per stack and the time the harness spent next to the time inside the benchmarks.

  {"design": {...}, "provenance": {stack: {stack_file, stack_file_sha256, node_type, profile,
   node_image, benchmarks: {name: {version, source, sha256, binaries: {..}, inputs: {..}}}}},
   "timing": {wall_s, launches, launch_s, submit_s, probe_s, looks: [...]}}

Two stacks are compared only where everything but the stack is the same: the node type, the
profile, the node image, each benchmark's version, source and input decks (the binaries differ by
design: each stack builds its own).
"""
from __future__ import annotations

from stackproof.report.sections import Context, Section, Table, fmt

SAME_ACROSS = ("node_type", "profile", "node_image")


def run_info(sessions) -> dict:
    """The first session's record, provenance merged over every session (one stack per input file)."""
    info: dict = {}
    for s in sessions:
        rec = getattr(s, "stackproof", None) or {}
        for k, v in rec.items():
            if k == "provenance" and isinstance(v, dict):
                info.setdefault("provenance", {}).update(v)
            else:
                info.setdefault(k, v)
    return info


def _bench_fingerprint(b: dict) -> dict:
    return {k: b.get(k) for k in ("version", "source", "sha256", "inputs") if isinstance(b, dict)}


def differences(prov: dict, baseline: str, other: str) -> list[str]:
    """What differs between two stacks' provenance other than the stack itself (empty: comparable)."""
    a, b = prov.get(baseline) or {}, prov.get(other) or {}
    out = []
    for k in SAME_ACROSS:
        if a.get(k) != b.get(k) and a.get(k) is not None and b.get(k) is not None:
            out.append(f"{k.replace('_', ' ')}: {a.get(k)} vs {b.get(k)}")
    ba, bb = a.get("benchmarks") or {}, b.get("benchmarks") or {}
    for name in sorted(set(ba) & set(bb)):
        fa, fb = _bench_fingerprint(ba[name]), _bench_fingerprint(bb[name])
        for k in fa:
            if fa[k] != fb.get(k) and fa[k] is not None and fb.get(k) is not None:
                out.append(f"{name} {k}: {fa[k]} vs {fb[k]}" if k != "inputs" else f"{name}: input decks differ")
    return out


def _short(h) -> str:
    if not isinstance(h, str):
        return "-"
    return ("files:" + h[6:18]) if h.startswith("files:") else h[:12]


def provenance_section(ctx: Context) -> Section | None:
    prov = ctx.run_info.get("provenance")
    if not isinstance(prov, dict) or not prov:
        return None
    rows = []
    for s in ctx.stacks:
        p = prov.get(s.split("@")[0]) or prov.get(s)
        if not isinstance(p, dict):
            rows.append([s, ("not recorded", "nm"), "-", "-", "-", "-"])
            continue
        benches = p.get("benchmarks") or {}
        if isinstance(benches, dict) and benches:
            btxt = "; ".join(
                f"{n} {b.get('version') or '?'} (source {_short(b.get('sha256'))}"
                + (", binaries " + ", ".join(f"{bn} {_short(h)}" for bn, h in sorted((b.get("binaries") or {}).items()))
                   if b.get("binaries") else "")
                + (", inputs " + ", ".join(f"{i} {_short(h)}" for i, h in sorted((b.get("inputs") or {}).items()))
                   if b.get("inputs") else "") + ")"
                for n, b in sorted(benches.items()) if isinstance(b, dict))
        else:
            btxt = p.get("benchmarks_note") or "no provenance.json in the stack's bench directory"
        rows.append([s, f"{p.get('stack_file') or '-'} (sha256 {_short(p.get('stack_file_sha256'))})",
                     str(p.get("node_type") or "-"), str(p.get("profile") or "-"),
                     str(p.get("node_image") or "not known (test cluster on the host)"), btxt])
    text = ["What produced each stack's results: its stack file (hash), the node type, the core-specialization "
            "profile, the node image when known, and each benchmark's version, source and binary and input "
            "hashes (from the bench build's provenance.json)."]
    for o in ctx.stacks:
        if o == ctx.baseline:
            continue
        diff = differences(prov, ctx.baseline.split("@")[0], o.split("@")[0])
        if diff:
            text.append(f"{o} vs {ctx.baseline} differ in more than the stack: {'; '.join(diff)}. Their verdict "
                        "rows compare these differences too, not the stack alone.")
            ctx.notes.append(f"{o} vs {ctx.baseline}: not only the stack differs ({'; '.join(diff)})")
        else:
            text.append(f"{o} vs {ctx.baseline}: everything recorded but the stack is the same.")
    return Section("Provenance", anchor="provenance", text=text, tables=[
        Table(["stack", "stack file", "node type", "profile", "node image", "benchmarks"], rows)])


def timing_section(ctx: Context) -> Section | None:
    t = ctx.run_info.get("timing")
    if not isinstance(t, dict) or not isinstance(t.get("wall_s"), (int, float)):
        return None
    wall, launch = float(t["wall_s"]), float(t.get("launch_s") or 0)
    n = int(t.get("launches") or 0)
    submit, probe = t.get("submit_s"), t.get("probe_s")
    target = t.get("target_s")
    rows = [["ReFrame sessions of the stack comparison, wall clock", fmt(wall)],
            ["in jobs (from submission or the previous job's end to the job's end, as ReFrame saw it: "
             "scheduling, identity probe, benchmark, polling)",
             fmt(launch) + f" ({n} launches)"]]
    if isinstance(submit, (int, float)) and isinstance(probe, (int, float)):
        rows.append(["job submission (measured: an empty job)", f"{fmt(submit)} per job"])
        rows.append(["identity probe (measured)", f"{fmt(probe)} per launch"])
    raw = None
    if isinstance(target, (int, float)) and target > 0 and n:
        raw = n * float(target)
        rows.append(["the benchmarks' own time (launches x time target per launch)",
                     f"{fmt(raw)} ({n} x {fmt(float(target))})"])
    rows.append(["harness total / benchmarks' own time",
                 f"{wall / raw:.1f}x" if raw else "-"])
    for look in t.get("looks") or []:
        if isinstance(look, dict) and look.get("skipped"):
            rows.append([f"look {look.get('index')}: {look.get('pairs')} pairs", f"not run: {look['skipped']}"])
        elif isinstance(look, dict):
            rows.append([f"look {look.get('index')}: {look.get('pairs')} pairs",
                         f"{fmt(look.get('wall_s'))} s, {look.get('undecided', '?')} checks still undecided after it"])
    return Section("Time", anchor="time", text=[
        "Where the time went (seconds): the harness (ReFrame, job submission, identity probe) next to the "
        "time inside the benchmarks. Goal: harness total at most 3x the benchmarks' own time."],
        tables=[Table(["what", "seconds"], rows)])
