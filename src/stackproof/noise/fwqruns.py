"""FWQ run records of the Table IV matrix (`runs.json`): one FWQ run of one profile under one noise
condition, reduced to its most affected core (largest std, as in the paper) with every core's own
std, max and noise fraction kept, so that a profile can be compared with baseline on the same CPUs
(noise/tableiv.py). Read back with checks: the file may come from anywhere.
"""
from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field, fields

from stackproof import validate
from stackproof.errors import InputError
from stackproof.noise.stats import most_affected_stats, node_periodicity

CONDITIONS = ("daemon", "none", "injected")
CPU_LIST = re.compile(r"[0-9,-]{0,256}")


@dataclass
class Run:
    """One FWQ run of the matrix, reduced to its most affected core (times in us)."""
    profile: str
    condition: str
    round: int                  # repeat index; every round runs every configuration once
    seq: int                    # position in the matrix (time order)
    t_s: float                  # start, seconds after the matrix began
    cpus: str                   # the CPUs FWQ ran on (the profile's application CPUs)
    rank: int
    cpu: int                    # the most affected core
    samples: int
    min_us: float
    mean_us: float
    max_us: float
    std_us: float
    noise_fraction: float
    period_ms: float | None = None
    detour_us: float | None = None
    daemon_cpus: str = ""       # where the daemon was allowed to run ("" floating, the OS places it)
    trace: str = ""             # the FWQ trace, relative to the runs file
    noise: dict = field(default_factory=dict)   # the daemon's / injector's own report (duty, policy)
    per_cpu: dict = field(default_factory=dict)  # "cpu" -> {std_us, max_us, noise_fraction} of every core
    node_period_ms: float | None = None   # the period seen on the run's cores taken together (a roaming source)

    def value(self, metric: str) -> float:
        return {"std": self.std_us, "max": self.max_us, "noise_fraction": self.noise_fraction}[metric]

    def on(self, cpus: set[int]) -> dict | None:
        """The most affected (largest std) of these CPUs in this run: {cpu, std, max, noise_fraction};
        None when the run has no figures of its own for one of them."""
        mine = [self.per_cpu.get(str(c)) for c in sorted(cpus)]
        if not cpus or any(x is None for x in mine):
            return None
        c, x = max(zip(sorted(cpus), mine), key=lambda cx: cx[1]["std_us"])
        return {"cpu": c, "std": x["std_us"], "max": x["max_us"], "noise_fraction": x["noise_fraction"]}


def per_cpu_stats(fwq_trace, skip_first: int = 1) -> dict:
    """Every core's std, max and noise fraction (the first sample skipped, as noise.stats does)."""
    d = fwq_trace.durations_us()
    if fwq_trace.nsamples <= skip_first:
        skip_first = 0
    out = {}
    for i, rank in enumerate(fwq_trace.ranks):
        x = d[i, skip_first:]
        total = float(x.sum())
        out[str(int(rank.get("cpu", -1)))] = {
            "std_us": round(float(x.std()), 4), "max_us": round(float(x.max()), 4),
            "noise_fraction": round((total - float(x.min()) * x.size) / total, 6) if total > 0 else 0.0}
    return out


def reduce_trace(fwq_trace, **where) -> Run:
    """A run record from an FWQ trace: the most affected core's statistics and every core's own;
    `where` gives profile, condition, round, seq, t_s, cpus (and optionally daemon_cpus, trace, noise)."""
    w = most_affected_stats(fwq_trace)
    node = node_periodicity(fwq_trace)
    return Run(node_period_ms=node.period_ms if node else None, rank=w.rank, cpu=w.cpu, samples=w.samples, min_us=w.min_us, mean_us=w.mean_us, max_us=w.max_us,
               std_us=w.std_us, noise_fraction=w.noise_fraction, period_ms=w.period_ms, detour_us=w.detour_us,
               per_cpu=per_cpu_stats(fwq_trace), **where)


_FIELDS = {f.name: f for f in fields(Run)}
_NUMBERS = ("t_s", "min_us", "mean_us", "max_us", "std_us", "noise_fraction")


def runs_from_json(doc) -> list[Run]:
    """Run records from `runs.json` ({"runs": [...]}), checked: a record that is not one is an
    InputError naming it (the file may come from anywhere)."""
    items = doc.get("runs") if isinstance(doc, dict) else None
    if not isinstance(items, list):
        raise InputError("Table IV runs: expected {\"runs\": [...]}")
    out = []
    for i, r in enumerate(items):
        if not isinstance(r, dict) or set(r) - set(_FIELDS):
            raise InputError(f"Table IV runs[{i}]: not a run record")
        try:
            run = Run(**r)
        except TypeError as exc:
            raise InputError(f"Table IV runs[{i}]: {exc}") from None
        for name in _NUMBERS:
            v = getattr(run, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise InputError(f"Table IV runs[{i}].{name}: {v!r} is not a finite number >= 0")
        for name in ("round", "seq", "rank", "cpu", "samples"):
            v = getattr(run, name)
            if isinstance(v, bool) or not isinstance(v, int) or not -1 <= v < 10**7:
                raise InputError(f"Table IV runs[{i}].{name}: not an integer in range")
        if not 0 <= run.round < 1000:
            raise InputError(f"Table IV runs[{i}].round: {run.round} is not a round (0-999)")
        validate.name(run.profile, f"Table IV runs[{i}].profile")
        if run.condition not in CONDITIONS:
            raise InputError(f"Table IV runs[{i}].condition: {run.condition!r} is not one of {', '.join(CONDITIONS)}")
        for name in ("cpus", "daemon_cpus"):
            if not isinstance(getattr(run, name), str) or not CPU_LIST.fullmatch(getattr(run, name)):
                raise InputError(f"Table IV runs[{i}].{name}: not a CPU list")
        if not isinstance(run.trace, str) or run.trace.startswith("/") or ".." in run.trace.split("/"):
            raise InputError(f"Table IV runs[{i}].trace: not a path inside the runs file's directory")
        for name in ("period_ms", "detour_us", "node_period_ms"):
            v = getattr(run, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)):
                raise InputError(f"Table IV runs[{i}].{name}: not a number")
        if not isinstance(run.noise, dict):
            raise InputError(f"Table IV runs[{i}].noise: not an object")
        _check_per_cpu(run.per_cpu, f"Table IV runs[{i}].per_cpu")
        out.append(run)
    return out


def _check_per_cpu(per_cpu, where: str) -> None:
    if not isinstance(per_cpu, dict) or len(per_cpu) > 4096:
        raise InputError(f"{where}: not an object of CPUs")
    for cpu, x in per_cpu.items():
        if not (isinstance(cpu, str) and (cpu.isdigit() or cpu == "-1")) or not isinstance(x, dict) \
                or set(x) != {"std_us", "max_us", "noise_fraction"}:
            raise InputError(f"{where}[{cpu!r}]: not a CPU's std_us, max_us, noise_fraction")
        for k, v in x.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise InputError(f"{where}[{cpu!r}].{k}: {v!r} is not a finite number >= 0")


def runs_to_json(runs: list[Run], **meta) -> dict:
    return {**meta, "runs": [asdict(r) for r in runs]}
