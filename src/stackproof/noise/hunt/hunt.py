"""`stackproof noise hunt`: FWQ on the chosen CPUs while tracefs records what ran there; attribute
every detour; rank culprits; propose (and with apply=True, apply and verify) a Clean profile.

Output directory:
  hunt.json          everything below, machine-readable (schema in docs/noise.md, "Who stole the time")
  hunt.md            the culprit table per CPU (and Table IV rows with --apply / --cost)
  timeline.png/.svg  detours over time coloured by culprit, and stolen time per culprit
  fwq-traced.dat     the FWQ trace recorded under tracing; fwq-before.dat / fwq-after.dat with --cost/--apply
  trace.txt.gz       the kernel events (text trace of the private tracefs instance)
  proposal/          profiles.yaml (hunt-clean), apply.sh, rendered/ (slurm.conf, drop-ins, corespec script)
"""
from __future__ import annotations

import gzip
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from stackproof.cpulist import format_list, parse_list
from stackproof.errors import StackproofError
from stackproof.noise.run import run_fwq
from stackproof.noise.stats import compare, core_stats
from stackproof.noise.trace import load
import numpy as np

from stackproof.noise.hunt import attribute as attr
from stackproof.noise.hunt import calibrate
from stackproof.noise.hunt import propose as prop_mod
from stackproof.noise.hunt.markdown import markdown
from stackproof.noise.hunt.timeline import clock_offset_ns, parse
from stackproof.noise.hunt.tracefs import TraceSession, backend, ensure_tracefs

SELF_COMM = "fwq-th"


def log(msg: str) -> None:
    print(f"[hunt] {msg}", file=sys.stderr, flush=True)


def check_cpus(text: str | None) -> list[int]:
    ncpu = os.cpu_count() or 1
    if text is None:
        return list(range(ncpu))
    try:
        cpus = sorted(parse_list(text))
    except ValueError:
        raise StackproofError(f"--cpus {text!r}: expected a CPU list such as 0-3,8") from None
    if not cpus:
        raise StackproofError("--cpus is empty")
    bad = [c for c in cpus if c >= ncpu]
    if bad:
        raise StackproofError(f"CPU {format_list(bad)} is not in this node (CPUs 0-{ncpu - 1})")
    allowed = os.sched_getaffinity(0)
    if not set(cpus) <= allowed:
        raise StackproofError(f"CPU {format_list(set(cpus) - allowed)} is outside this process's cpuset "
                              f"({format_list(allowed)})")
    return cpus


def task_context(pid: int | None) -> tuple[str, str, int | None]:
    """(cgroup path, Slurm job step or systemd unit, process id) of a thread, read from /proc while it runs."""
    if not pid:
        return "", "", None
    try:
        text = Path(f"/proc/{pid}/cgroup").read_text()
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return "(exited)", "", None
    tgid = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("Tgid:")), None)
    path = ""
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and (parts[1] in ("cpuset", "") or "cpu" in parts[1].split(",")):
            path = parts[2]
            if parts[1] == "cpuset":
                break
    return path, unit_of(path), tgid


def unit_of(cgroup: str) -> str:
    import re
    m = re.search(r"/slurm(?:_[^/]+)?/uid_\d+/job_(\d+)(?:/step_([\w.]+))?", cgroup)
    if m:
        return f"slurm job {m.group(1)}" + (f" step {m.group(2)}" if m.group(2) else "")
    m = re.search(r"([^/]+\.(?:service|scope))(?:/|$)", cgroup)
    return m.group(1) if m else ""


def cluster_status() -> dict:
    proc = subprocess.run([sys.executable, "-m", "stackproof.cli", "cluster", "status", "--json"],
                          capture_output=True, text=True)
    try:
        return json.loads(proc.stdout)
    except ValueError:
        return {"up": False}


def _fwq(path: Path, cpus: list[int], seconds: float, quantum: str, label: str, work: int | None = None):
    """FWQ for `seconds`: the first run calibrates the loop count to the quantum; later runs of the
    same hunt reuse it (`work`), so before, traced and after do exactly the same work per sample."""
    q_us = _quantum_us(quantum)
    n = max(100, int(seconds * 1e6 / q_us))
    return run_fwq(path, n, launcher=[], quantum=None if work else quantum, work=work, mode="threads",
                   threads_cpus=format_list(cpus), nice=-20, label=label, timeout=seconds * 3 + 60)


def _quantum_us(q: str) -> float:
    for unit, f in (("us", 1.0), ("ms", 1e3), ("ns", 1e-3), ("s", 1e6)):
        if q.endswith(unit):
            try:
                return float(q[:-len(unit)]) * f
            except ValueError:
                break
    raise StackproofError(f"--quantum {q!r}: a duration with a unit, e.g. 250us")


def steal_ms() -> dict[int, float]:
    """Per-CPU steal time from /proc/stat (ms): time the hypervisor ran something else."""
    out = {}
    hz = os.sysconf("SC_CLK_TCK")
    try:
        for line in Path("/proc/stat").read_text().splitlines():
            f = line.split()
            if f and f[0].startswith("cpu") and f[0] != "cpu" and len(f) > 8:
                out[int(f[0][3:])] = int(f[8]) * 1e3 / hz
    except OSError:
        pass
    return out


def per_cpu_std(trace) -> dict[int, float]:
    return {s.cpu: s.std_us for s in core_stats(trace)}


def hunt(cpus: list[int], duration: float, threshold_us: float | None, buffer_kb: int, outdir: Path,
         quantum: str = "10us", apply: bool = False, cost: bool = False) -> dict:
    if duration <= 0 or duration > 3600:
        raise StackproofError(f"--duration {duration}: between 0 and 3600 seconds")
    if threshold_us is not None and threshold_us <= 0:
        raise StackproofError(f"--threshold {threshold_us}: must be positive (microseconds)")
    _quantum_us(quantum)
    ensure_tracefs()
    outdir.mkdir(parents=True, exist_ok=True)
    host = socket.gethostname().split(".")[0]
    status = cluster_status()
    if apply and not status.get("up"):
        raise StackproofError("--apply switches the local test cluster to the proposed profile, and none is up "
                              "(stackproof cluster up); on a real node run proposal/apply.sh yourself")
    doc: dict = {"host": host, "cpus": cpus, "duration_s": duration, "threshold_us": threshold_us,
                 "threshold_mode": "auto" if threshold_us is None else "fixed",
                 "quantum": quantum, "backend": backend(), "cluster": _cluster_summary(status)}
    t_start = time.monotonic()
    traces = {}
    if cost or apply:
        log(f"FWQ without tracing on CPUs {format_list(cpus)} ({duration:g} s)")
        traces["before"] = _fwq(outdir / "fwq-before.dat", cpus, duration, quantum, "before")
    log(f"FWQ with tracing on CPUs {format_list(cpus)} ({duration:g} s, {buffer_kb} KB buffer per CPU)")
    t_hunt = time.monotonic()
    work = traces["before"].meta["work_iterations"] if "before" in traces else None
    steal0 = steal_ms()
    with TraceSession(set(cpus), buffer_kb, osnoise=doc["backend"].get("osnoise", False)) as ts:
        traced = _fwq(outdir / "fwq-traced.dat", cpus, duration, quantum, "traced", work)
    steal1 = steal_ms()
    doc["steal_ms"] = {str(c): steal1.get(c, 0) - steal0.get(c, 0) for c in cpus}
    traces["traced"] = traced
    contexts = {}
    with gzip.open(outdir / "trace.txt.gz", "wt", compresslevel=3) as fh:
        fh.write(ts.text)
    doc["trace"] = ts.meta()
    lost = sum(ts.lost.values())
    if lost:
        doc["status"] = "overflow"
        (outdir / "hunt.json").write_text(json.dumps(doc, indent=1))
        raise StackproofError(f"the trace buffer overflowed: {lost} events lost "
                              f"({', '.join(f'CPU {c}: {n}' for c, n in ts.lost.items() if n)}); attribution "
                              f"would be partial. Use a larger --buffer-kb (now {buffer_kb}) or a shorter --duration")
    lines = ts.text.splitlines()
    tl = parse(lines)
    doc["backend"]["used"] = _osnoise_report(doc, lines, ts)
    for o in tl.owners:
        if o.kind == "task" and o.pid:
            contexts[o.pid] = task_context(o.pid)
    doc["analysis_input"] = {"events": tl.events, "unparsed_lines": tl.unparsed}
    if threshold_us is None:
        thresholds = calibrate_thresholds(doc, traced, tl, ts.clock)
    else:
        thresholds = threshold_us
        doc["thresholds_us"] = {str(c): threshold_us for c in cpus}
    results = analyze(traced, tl, ts.clock, thresholds, contexts)
    span = float(np.median([r.samples * r.quantum_us for r in results]) / 1e6) if results else duration
    doc["background"] = calibrate.background(results, doc["steal_ms"], max(span, duration * 0.5))
    doc["hunt_wall_s"] = time.monotonic() - t_hunt
    doc.update(_clock_doc(tl, ts.clock))
    doc["per_cpu"] = [r.as_dict() for r in results]
    doc["status"] = "ok"

    from stackproof.nodes.nodetype import from_host
    from stackproof.nodes.profiles import load_catalog, plan
    nt = from_host("local")
    base = plan(nt, "clean")
    proposal = prop_mod.propose(results, base, load_catalog(), host)
    doc["proposal"] = proposal
    doc["proposal"]["rendered"] = prop_mod.render_proposal(proposal, nt, base, host, outdir / "proposal")

    if apply:
        doc["apply"] = apply_proposal(proposal, status, outdir / "proposal" / "profiles.yaml")
        app = [c for c in cpus if c in parse_list(proposal["app_cpus"])]
        if not app:
            raise StackproofError(f"no application CPU among --cpus {format_list(cpus)} after the proposal "
                                  f"(system CPUs {proposal['system_cpus']})")
        log(f"FWQ without tracing on application CPUs {format_list(app)} after applying ({duration:g} s)")
        traces["after"] = _fwq(outdir / "fwq-after.dat", app, duration, quantum, "after",
                               traced.meta["work_iterations"])
        doc["apply"]["irq_restored"] = restore_irqs(doc["apply"].get("irq_saved", {}))
    if len(traces) > 1:
        rows = compare(traces, baseline="before" if "before" in traces else None)
        doc["table_iv"] = rows
        doc["per_cpu_std_us"] = {name: {str(k): v for k, v in per_cpu_std(t).items()} for name, t in traces.items()}
    if "before" in traces:
        b = {s.cpu: s for s in core_stats(traces["before"])}
        t = {s.cpu: s for s in core_stats(traced)}
        doc["tracing_cost"] = {str(c): {"std_us_without": b[c].std_us, "std_us_with": t[c].std_us,
                                        "max_us_without": b[c].max_us, "max_us_with": t[c].max_us,
                                        "mean_us_without": b[c].mean_us, "mean_us_with": t[c].mean_us}
                               for c in cpus if c in b and c in t}
    doc["wall_s"] = time.monotonic() - t_start
    (outdir / "hunt.json").write_text(json.dumps(doc, indent=1, default=str))
    (outdir / "hunt.md").write_text(markdown(doc))
    try:
        from stackproof.noise.hunt.plot import plot_timeline
        doc["figures"] = [str(plot_timeline(doc, outdir / f"timeline.{ext}")) for ext in ("png", "svg")]
        (outdir / "hunt.json").write_text(json.dumps(doc, indent=1, default=str))
    except ImportError:
        pass
    return doc


def calibrate_thresholds(doc: dict, traced, tl, clock: str) -> dict[int, float]:
    """Per CPU: the threshold scan of the traced run and the threshold chosen from it."""
    offset, _ = clock_offset_ns(tl)
    if clock == "mono_raw":
        offset = 0
    try:
        rows = calibrate.scan(traced, tl, offset, self_comm=SELF_COMM)
    except ValueError as exc:
        raise StackproofError(f"attribution failed: {exc}") from None
    chosen, doc["calibration"] = {}, {}
    for cpu, scan_rows in rows.items():
        th, why = calibrate.choose(scan_rows)
        chosen[cpu] = th
        doc["calibration"][str(cpu)] = {"threshold_us": th, "why": why, "scan": scan_rows}
        log(f"CPU {cpu}: threshold {th:g} us ({why})")
    doc["thresholds_us"] = {str(c): t for c, t in chosen.items()}
    doc["threshold_us"] = max(chosen.values()) if chosen else calibrate.LADDER_US[0]
    return chosen


def _osnoise_report(doc: dict, lines: list[str], ts) -> str:
    """The kernel's own per-source noise from the osnoise tracepoints, when recorded; returns the
    recorder actually used (said in hunt.md and hunt.json)."""
    from stackproof.noise.hunt.osnoise import attribute_samples, parse_events
    if ts.osnoise_error:
        doc["backend"]["why"] += f"; the osnoise tracer could not be started ({ts.osnoise_error}): events only"
    if not ts.osnoise:
        return "tracefs-events"
    noise, samples = parse_events(lines)
    doc["osnoise"] = {str(c): v for c, v in attribute_samples(noise, samples).items()}
    return "tracefs-events+osnoise"


def analyze(trace, tl, clock: str, threshold_us, contexts: dict | None = None) -> list:
    offset, _ = clock_offset_ns(tl)
    if clock == "mono_raw":
        offset = 0                  # same clock as FWQ: the markers only confirm it
    try:
        results = attr.attribute(trace, tl, offset_ns=offset, threshold_us=threshold_us, self_comm=SELF_COMM)
    except ValueError as exc:
        raise StackproofError(f"attribution failed: {exc}") from None
    for r in results:
        for c in r.culprits + r.quiet_culprits:
            if c.pid and contexts:
                c.cgroup, c.unit, c.tgid = contexts.get(c.pid, ("", "", None))
    return results


def _clock_doc(tl, clock: str) -> dict:
    offset, spread = clock_offset_ns(tl)
    return {"clock": {"trace_clock": clock, "marker_offset_us": offset / 1e3, "marker_spread_us": spread / 1e3,
                      "aligned_by": "same clock (mono_raw)" if clock == "mono_raw" else "sync markers"}}


def _cluster_summary(status: dict) -> dict:
    if not status.get("up"):
        return {"up": False, "profile": None}
    return {"up": True, "profile": status.get("settings", {}).get("profile"),
            "noise_daemon": status.get("settings", {}).get("noise_daemon"),
            "system_cpus": status.get("system_cpus"), "app_cpus": status.get("app_cpus")}


def apply_proposal(prop: dict, status: dict, profile_file: Path) -> dict:
    """Switch the test cluster to the proposed profile itself (`cluster up --profile-file`: its
    CpuSpecList, system CPUs and the cluster's own daemons bound there), then do what the rendered
    profile does on a real node for processes the test cluster does not start: bind the culprits
    (the profile's new daemon groups) and steer the profile's IRQs."""
    name = prop["profile_name"]
    done: dict = {"profile": name, "profile_file": str(profile_file), "bound": [], "irqs": [], "irq_saved": {},
                  "errors": []}
    log(f"switching the test cluster to the proposed profile (stackproof cluster up --profile-file "
        f"{profile_file} --profile {name})")
    proc = subprocess.run([sys.executable, "-m", "stackproof.cli", "cluster", "up", "--profile-file",
                           str(profile_file), "--profile", name], capture_output=True, text=True)
    if proc.returncode != 0:
        raise StackproofError(f"stackproof cluster up --profile-file {profile_file} failed: "
                              f"{proc.stderr.strip()[-500:]}")
    now = cluster_status()
    done["cluster_profile"] = now.get("settings", {}).get("profile")
    if done["cluster_profile"] != name:
        raise StackproofError(f"the test cluster runs profile {done['cluster_profile']!r} after switching to {name!r}")
    sysc = now.get("system_cpus") or prop["system_cpus"]
    for b in prop["bind"]:
        if not b["pid"] or not Path(f"/proc/{b['pid']}").exists():
            continue
        r = subprocess.run(["taskset", "-a", "-c", "-p", sysc, str(b["pid"])], capture_output=True, text=True)
        (done["bound"] if r.returncode == 0 else done["errors"]).append(
            f"{b['comm']}[{b['pid']}] -> {sysc}" + ("" if r.returncode == 0 else f": {r.stderr.strip()}"))
    for i in prop["irqs"]:
        path = Path(f"/proc/irq/{i['irq']}/smp_affinity_list")
        try:
            done["irq_saved"][str(i["irq"])] = path.read_text().strip()
            path.write_text(sysc)
            done["irqs"].append(f"irq {i['irq']} -> {sysc}")
        except OSError as exc:
            done["errors"].append(f"irq {i['irq']}: {exc.strerror} (this IRQ cannot be steered)")
    return done


def restore_irqs(saved: dict) -> list[str]:
    """IRQ affinity is machine-wide, not the test cluster's: put it back after the measurement."""
    out = []
    for irq, value in saved.items():
        try:
            Path(f"/proc/irq/{irq}/smp_affinity_list").write_text(value)
            out.append(f"irq {irq} -> {value}")
        except OSError as exc:
            out.append(f"irq {irq}: not restored ({exc.strerror})")
    return out


def reanalyze(directory: Path, threshold_us: float | None = None) -> dict:
    """Re-run the attribution on a hunt directory (fwq-traced.dat + trace.txt.gz + hunt.json)."""
    doc = json.loads((directory / "hunt.json").read_text())
    dat = directory / "fwq-traced.dat"
    if not dat.exists() and dat.with_suffix(".dat.gz").exists():   # recorded test data is compressed
        import tempfile
        tmp = Path(tempfile.mkdtemp(prefix="hunt-")) / "fwq-traced.dat"
        with gzip.open(dat.with_suffix(".dat.gz"), "rb") as src:
            tmp.write_bytes(src.read())
        dat = tmp
    traced = load(dat, label="traced")
    with gzip.open(directory / "trace.txt.gz", "rt") as fh:
        tl = parse(fh)
    recorded = {int(c): t for c, t in doc["thresholds_us"].items()} if doc.get("thresholds_us") else doc["threshold_us"]
    results = analyze(traced, tl, doc["clock"]["trace_clock"], threshold_us or recorded)
    return {"doc": doc, "results": results, "timeline": tl}
