"""The kernel's own noise attribution: the osnoise tracer and rtla, when the kernel has them.

Formats (Documentation/trace/osnoise-tracer.rst and the rtla-osnoise-top/-hist man pages):
  tracer summary   <task>-<pid> [CPU] flags TS: RUNTIME NOISE %AVAIL MAX_SINGLE HW NMI IRQ SIRQ THREAD
  tracepoints      irq_noise: local_timer:236 start 5789.857529929 duration 1845 ns
                   thread_noise: migration/8:54 start 5789.858409300 duration 3068 ns
                   sample_threshold: start 5789.858404555 duration 8812 ns interferences 2
  rtla osnoise top CPU Period Runtime Noise %CPU-Aval MaxNoise MaxSingle HW NMI IRQ Softirq Thread
  rtla osnoise hist  Index CPU-000 ...; then over:/count:/min:/avg:/max: rows
All durations are net (an IRQ inside a thread's noise is subtracted from the thread's); a sample's
duration minus its interferences' is the entry/exit overhead or hardware ("HW" in the summary).

The hunt's own recorder is tracefs sched/irq events around FWQ (tracefs.py); this module detects
whether the kernel also has osnoise (`detect`), and parses its output so a hunt on such a kernel
reports the kernel's per-source noise next to its own attribution. This machine's kernel has no
osnoise tracer: the parsers are tested on format-derived samples (tests/data/osnoise/).
"""
from __future__ import annotations

import re
from pathlib import Path

from stackproof.errors import StackproofError

HEAD = r"^\s*(?P<comm>.*?)-(?P<pid>\d+)\s+\[(?P<cpu>\d+)\]\s+\S+\s+(?P<ts>\d+\.\d+):\s+"
SUMMARY = re.compile(HEAD + r"(?P<runtime>\d+)\s+(?P<noise>\d+)\s+(?P<avail>[\d.]+)\s+(?P<max>\d+)\s+"
                     r"(?P<hw>\d+)\s+(?P<nmi>\d+)\s+(?P<irq>\d+)\s+(?P<sirq>\d+)\s+(?P<thread>\d+)\s*$")
NOISE = re.compile(HEAD + r"(?P<kind>nmi|irq|softirq|thread)_noise:\s+(?P<src>.*?)\s+start\s+(?P<start>\d+\.\d+)"
                   r"\s+duration\s+(?P<dur>\d+)\s+ns\s*$")
SAMPLE = re.compile(HEAD + r"sample_threshold:\s+start\s+(?P<start>\d+\.\d+)\s+duration\s+(?P<dur>\d+)\s+ns"
                    r"\s+interferences\s+(?P<n>\d+)\s*$")
COUNTERS = ("hw", "nmi", "irq", "sirq", "thread")
TOP_COLUMNS = ["cpu", "period", "runtime_us", "noise_us", "cpu_avail_pct", "max_noise_us", "max_single_us",
               "hw", "nmi", "irq", "softirq", "thread"]


def _ns(ts: str) -> int:
    sec, _, frac = ts.partition(".")
    return int(sec) * 1_000_000_000 + int((frac + "000000000")[:9])


def detect(root: Path) -> dict:
    """What the kernel offers at tracefs `root`: osnoise/timerlat tracers, osnoise tracepoints."""
    try:
        tracers = (root / "available_tracers").read_text().split()
    except OSError:
        tracers = []
    return {"osnoise_tracer": "osnoise" in tracers, "timerlat_tracer": "timerlat" in tracers,
            "osnoise_events": (root / "events" / "osnoise").is_dir(), "available_tracers": tracers}


def parse_summary(lines) -> dict[int, dict]:
    """The osnoise tracer's periodic lines -> per CPU: periods, runtime/noise (us), max single noise,
    CPU available (runtime-weighted %), interference counters (summed)."""
    out: dict[int, dict] = {}
    for line in lines:
        m = SUMMARY.match(line)
        if not m:
            continue
        c = int(m["cpu"])
        d = out.setdefault(c, {"periods": 0, "runtime_us": 0, "noise_us": 0, "max_single_us": 0,
                               **{k: 0 for k in COUNTERS}})
        d["periods"] += 1
        d["runtime_us"] += int(m["runtime"])
        d["noise_us"] += int(m["noise"])
        d["max_single_us"] = max(d["max_single_us"], int(m["max"]))
        for k in COUNTERS:
            d[k] += int(m[k])
    for d in out.values():
        d["cpu_avail_pct"] = 100.0 * (1 - d["noise_us"] / d["runtime_us"]) if d["runtime_us"] else None
    return out


def parse_events(lines) -> tuple[list[dict], list[dict]]:
    """osnoise tracepoints -> (noise events [{cpu, kind, source, start_ns, duration_ns}],
    samples [{cpu, start_ns, duration_ns, interferences}])."""
    noise, samples = [], []
    for line in lines:
        m = NOISE.match(line)
        if m:
            noise.append({"cpu": int(m["cpu"]), "kind": m["kind"], "source": m["src"],
                          "start_ns": _ns(m["start"]), "duration_ns": int(m["dur"])})
            continue
        m = SAMPLE.match(line)
        if m:
            samples.append({"cpu": int(m["cpu"]), "start_ns": _ns(m["start"]), "duration_ns": int(m["dur"]),
                            "interferences": int(m["n"])})
    return noise, samples


def attribute_samples(noise: list[dict], samples: list[dict]) -> dict[int, dict]:
    """Per CPU: each sample_threshold noise shared among the noise events of its CPU that started
    inside it (net durations, as the kernel reports them); the rest of the sample is `overhead/hw`.
    Returns {cpu: {"samples": n, "noise_us": total, "by_source": {"thread migration/8:54": us, ...}}}."""
    out: dict[int, dict] = {}
    by_cpu: dict[int, list[dict]] = {}
    for e in noise:
        by_cpu.setdefault(e["cpu"], []).append(e)
    for s in samples:
        d = out.setdefault(s["cpu"], {"samples": 0, "noise_us": 0.0, "by_source": {}})
        d["samples"] += 1
        d["noise_us"] += s["duration_ns"] / 1e3
        a, b = s["start_ns"], s["start_ns"] + s["duration_ns"]
        inside = [e for e in by_cpu.get(s["cpu"], []) if a <= e["start_ns"] < b]
        net = 0
        for e in inside:
            key = f"{e['kind']} {e['source']}"
            d["by_source"][key] = d["by_source"].get(key, 0.0) + e["duration_ns"] / 1e3
            net += e["duration_ns"]
        rest = max(0, s["duration_ns"] - net)
        if rest:
            key = "hw (no interference)" if not inside else "entry/exit overhead"
            d["by_source"][key] = d["by_source"].get(key, 0.0) + rest / 1e3
    for d in out.values():
        d["by_source"] = dict(sorted(d["by_source"].items(), key=lambda kv: -kv[1]))
    return out


def parse_rtla_top(text: str) -> dict[int, dict]:
    """`rtla osnoise top -q` output -> per CPU row (columns as TOP_COLUMNS)."""
    lines = text.splitlines()
    hdr = next((i for i, line in enumerate(lines) if line.split()[:2] == ["CPU", "Period"]), None)
    if hdr is None:
        raise StackproofError("rtla osnoise top output: no 'CPU Period ...' header line")
    out = {}
    for line in lines[hdr + 1:]:
        f = line.split()
        if not f:
            continue
        if len(f) != len(TOP_COLUMNS) or not f[0].isdigit() or not f[1].startswith("#"):
            raise StackproofError(f"rtla osnoise top output: unexpected row {line.strip()!r}")
        row = {"cpu": int(f[0]), "period": int(f[1][1:]), "cpu_avail_pct": float(f[4])}
        for k, v in zip(TOP_COLUMNS, f):
            if k not in row:
                row[k] = int(v)
        out[row["cpu"]] = row
    if not out:
        raise StackproofError("rtla osnoise top output: a header and no CPU rows")
    return out


def parse_rtla_hist(text: str) -> dict[int, dict]:
    """`rtla osnoise hist` output -> {cpu: {"buckets": {lower us: count}, "over", "count", "min", "avg", "max"}}."""
    cpus: list[int] = []
    out: dict[int, dict] = {}
    for line in text.splitlines():
        f = line.split()
        if not f or f[0].startswith("#"):
            continue
        if f[0] == "Index":
            cpus = [int(c.split("-")[1]) for c in f[1:]]
            out = {c: {"buckets": {}} for c in cpus}
            continue
        if not cpus:
            raise StackproofError("rtla osnoise hist output: data before the 'Index CPU-...' header")
        if len(f) != len(cpus) + 1:
            raise StackproofError(f"rtla osnoise hist output: {len(f) - 1} values for {len(cpus)} CPUs: {line.strip()!r}")
        key = f[0].rstrip(":")
        for c, v in zip(cpus, f[1:]):
            if f[0].endswith(":"):
                out[c][key] = float(v) if key == "avg" else int(v)
            else:
                out[c]["buckets"][int(key)] = int(v)
    if not out:
        raise StackproofError("rtla osnoise hist output: no 'Index CPU-...' header")
    return out
