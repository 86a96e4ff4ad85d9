"""Table IV of the TOSS-2020 paper as a verdict: the core-specialization profiles (Table III)
compared with baseline the way stacks are compared, from repeated FWQ runs.

The data are runs: one FWQ run of one profile under one noise condition, reduced to its most
affected core (largest std, as in the paper). `table()` turns them into one row per condition and
profile: the medians over the repeats of min, mean, max, std (ms) and noise %, and for every profile
but baseline the ratio to baseline of std (the headline), max and noise fraction with an exact
interval and a call (better / worse / no difference / inconclusive). All calls of one table form
one family (stackproof.comparison: weighted Benjamini-Hochberg; the headline, std under the daemon,
shares 4/5 of alpha), so the chance that identical profiles get any better / worse call anywhere in
the table is at most 5 %.
The repeats are two samples (Mann-Whitney): the runner interleaves the profiles in time (rounds,
every other one reversed), so a slow spell of the host lands on all of them alike.

Conditions:
  daemon    a noise daemon on the node (10 Hz / 2.5 ms at SCHED_FIFO, like snmpd or irqbalance on the
            paper's nodes): each profile places it as it places system daemons, so this is where a
            profile's mitigation shows;
  none      the node's own noise only;
  injected  an injector inside the job's ranks: noise no profile can move (it proves the measurement
            sees a signature; its rows are labelled so).

`stackproof noise experiment` (acceptance/tableiv.py runs the matrix on the test cluster) and the
acceptance report both build the table here, from the same run records (`runs.json`). Pure data:
no cluster, no report.
"""
from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import asdict, dataclass, field, fields

import numpy as np

from stackproof import validate
from stackproof.comparison import (BETTER, INCONCLUSIVE, NO_VERDICT, SAME, WORSE, Call, Design, Metric,
                                   sequential_calls)
from stackproof.errors import InputError
from stackproof.noise.stats import most_affected_stats

CONDITIONS = ("daemon", "none", "injected")
CONDITION_LABEL = {
    "daemon": "noise daemon",
    "none": "no daemon",
    "injected": "in-job injector (no profile can move it)",
}
INJECTED_PROFILES = ("baseline", "corespec")   # the in-job injector's rows: two show it cannot be moved
METRICS = ("std", "max", "noise_fraction")       # std: the headline (the paper's Table IV column)
SIGNATURE = "10Hz-2500us"      # the seed's daemon: 10 Hz x 2.5 ms (at SCHED_FIFO on the cluster)
HEADLINE = "std"
PROFILE_ORDER = ("baseline", "freecore-first", "freecore-last", "corespec", "clean")
BASELINE = "baseline"
ALPHA = 0.05
# Equivalence margin of a noise metric: "no difference" when the interval lies within
# [1/1.25, 1.25]. Noise statistics of this VM vary 10-30 % between runs of one configuration
# (docs/noise.md), so a stack-like 5 % margin could never be reached.
MARGIN = 0.25
# FWQ per run (docs/noise.md, "Table IV in every acceptance run": why these suffice for a 10 Hz
# daemon): 60,000 samples of -w 16384 loop iterations (a 10 us quantum here): 0.6 s, six periods of
# the daemon, each burst 250 quanta long. The ReFrame check FWQNoise declares the same.
SAMPLES = 60000
WORK = 16384
CPU_LIST = re.compile(r"[0-9,-]{0,256}")
SIGNATURE_TOLERANCE = 0.1    # a run "shows the signature" when its most affected core's period is within 10 %


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

    def value(self, metric: str) -> float:
        return {"std": self.std_us, "max": self.max_us, "noise_fraction": self.noise_fraction}[metric]


def reduce_trace(fwq_trace, **where) -> Run:
    """A run record from an FWQ trace: the most affected core's statistics; `where` gives profile,
    condition, round, seq, t_s, cpus (and optionally daemon_cpus, trace, noise)."""
    w = most_affected_stats(fwq_trace)
    return Run(rank=w.rank, cpu=w.cpu, samples=w.samples, min_us=w.min_us, mean_us=w.mean_us, max_us=w.max_us,
               std_us=w.std_us, noise_fraction=w.noise_fraction, period_ms=w.period_ms, detour_us=w.detour_us,
               **where)


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
        for name in ("period_ms", "detour_us"):
            v = getattr(run, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)):
                raise InputError(f"Table IV runs[{i}].{name}: not a number")
        if not isinstance(run.noise, dict):
            raise InputError(f"Table IV runs[{i}].noise: not an object")
        out.append(run)
    return out


def runs_to_json(runs: list[Run], **meta) -> dict:
    return {**meta, "runs": [asdict(r) for r in runs]}


# ---- the table --------------------------------------------------------------------------------

@dataclass
class Row:
    condition: str
    profile: str
    n: int
    min_ms: float
    mean_ms: float
    max_ms: float
    std_ms: float
    noise_pct: float
    cpus: str                   # FWQ's CPUs (the profile's application CPUs)
    daemon_cpus: str            # where the daemon could run ("" floating)
    cores: Counter              # most affected CPU -> runs
    signature_runs: int         # runs whose most affected core shows the 10 Hz signature
    calls: dict = field(default_factory=dict)     # metric -> Call (not for baseline)


def profile_order(names) -> list[str]:
    """The paper's order (baseline first), then other profiles (a hunt's proposal) by name."""
    known = [p for p in PROFILE_ORDER if p in names]
    return known + sorted(set(names) - set(known))


def _median(values) -> float:
    return float(np.median(values)) if len(values) else float("nan")


def signature_period_ms(signature: str) -> float | None:
    """The period of a FREQHz-DURATION signature in ms (10Hz-2500us: 100)."""
    try:
        freq = float(signature.split("Hz", 1)[0])
    except ValueError:
        return None
    return 1e3 / freq if freq > 0 else None


def table(runs: list[Run], baseline: str = BASELINE, alpha: float = ALPHA, margin: float = MARGIN,
          signature: str = SIGNATURE, rule: str = "bh") -> list[Row]:
    """One row per condition and profile (conditions in CONDITIONS order, profiles in the paper's),
    with each metric's call against `baseline` of the same condition; every call of the table in one
    family at `alpha`."""
    period = signature_period_ms(signature)
    groups: dict[tuple[str, str], list[Run]] = {}
    for r in runs:
        groups.setdefault((r.condition, r.profile), []).append(r)
    conditions = [c for c in CONDITIONS if any(k[0] == c for k in groups)] + \
        sorted({k[0] for k in groups} - set(CONDITIONS))
    rows: list[Row] = []
    for cond in conditions:
        for prof in profile_order({p for c, p in groups if c == cond}):
            rs = sorted(groups[(cond, prof)], key=lambda r: (r.round, r.seq))
            shown = sum(1 for r in rs if period and r.period_ms and
                        abs(r.period_ms - period) <= SIGNATURE_TOLERANCE * period)
            rows.append(Row(cond, prof, len(rs), _median([r.min_us for r in rs]) / 1e3,
                            _median([r.mean_us for r in rs]) / 1e3, _median([r.max_us for r in rs]) / 1e3,
                            _median([r.std_us for r in rs]) / 1e3, 100 * _median([r.noise_fraction for r in rs]),
                            rs[0].cpus, rs[0].daemon_cpus, Counter(r.cpu for r in rs), shown))
    # one family: every (row other than baseline) x metric. The headline, sharing 4/5 of alpha, is
    # what a profile is for: std under the daemon (every condition's std when no daemon ran, as on a
    # site measuring its own daemons); the other calls share the rest.
    has_daemon = any(r.condition == "daemon" for r in rows)
    todo, metrics = [], []
    for row in rows:
        base = groups.get((row.condition, baseline))
        if row.profile == baseline or not base:
            continue
        mine = groups[(row.condition, row.profile)]
        for m in METRICS:
            todo.append((row, m))
            metrics.append(Metric([r.value(m) for r in base], [r.value(m) for r in mine],
                                  [r.round for r in base], [r.round for r in mine], better="lower",
                                  headline=m == HEADLINE and (row.condition == "daemon" or not has_daemon)))
    if metrics:
        look = 1 + max(r.round for r in runs)
        calls = sequential_calls(metrics, Design(looks=(look,), alpha=alpha, margin=margin, paired=False,
                                                 rule=rule))
        for (row, m), c in zip(todo, calls):
            row.calls[m] = c
    return rows


# ---- rendering --------------------------------------------------------------------------------

def _ms(v: float) -> str:
    return "-" if not math.isfinite(v) else f"{v:.4f}" if v < 1 else f"{v:.3f}"


def ratio_text(c: Call | None) -> str:
    """"0.42 [0.21, 0.80]" (the ratio and its interval), "-" without a call."""
    if c is None or c.ratio is None:
        return "-"
    if c.lo is None:
        return f"{c.ratio:.2f}"
    return f"{c.ratio:.2f} [{c.lo:.2f}, {c.hi:.2f}]"


def call_text(c: Call | None) -> str:
    return "(baseline)" if c is None else c.verdict


def header() -> list[str]:
    return ["noise", "configuration", "n", "Min ms", "Mean ms", "Max ms", "Std ms", "noise %",
            "Std / baseline [interval]", "call"]


def cells(row: Row) -> list[str]:
    """One row of the paper-shaped table as strings."""
    c = row.calls.get(HEADLINE)
    return [CONDITION_LABEL.get(row.condition, row.condition), row.profile, str(row.n), _ms(row.min_ms),
            _ms(row.mean_ms), _ms(row.max_ms), _ms(row.std_ms), f"{row.noise_pct:.2f}", ratio_text(c),
            "-" if row.profile == BASELINE else call_text(c)]


def secondary_cells(row: Row) -> list[str]:
    """max and noise fraction: ratio [interval] and call (the rows other than baseline)."""
    out = [CONDITION_LABEL.get(row.condition, row.condition), row.profile]
    for m in METRICS[1:]:
        c = row.calls.get(m)
        out += [ratio_text(c), call_text(c) if c else "-"]
    return out


def secondary_header() -> list[str]:
    return ["noise", "configuration", "Max / baseline [interval]", "call", "noise fraction / baseline [interval]",
            "call"]


def markdown(rows: list[Row]) -> str:
    def line(cs):
        return "| " + " | ".join(cs) + " |"
    out = [line(header()), "|" + "---|" * len(header())]
    out += [line(cells(r)) for r in rows]
    return "\n".join(out)


def _cpu_text(cpus: str) -> str:
    if not cpus:
        return "the profile's application cores"
    return f"CPU {cpus}" if cpus.isdigit() else f"CPUs {cpus}"


def _cores_text(row: Row) -> str:
    (cpu, k), = row.cores.most_common(1)
    if cpu < 0:
        return "core not recorded"
    return f"CPU {cpu}" + ("" if k == row.n else f" in {k} of {row.n} runs")


def sentence(row: Row, rows: list[Row], signature: str = SIGNATURE) -> str:
    """One sentence on what a row shows: the call with its ratio, and why (where the daemon could
    run, whether the most affected core carries its signature)."""
    sig = f"its {signature_period_ms(signature) or 0:g} ms signature"
    where = f"FWQ on {_cpu_text(row.cpus)}"
    label = f"{row.profile}, {CONDITION_LABEL.get(row.condition, row.condition)}"
    if row.condition == "daemon":
        place = (f"the daemon bound to {_cpu_text(row.daemon_cpus)}" if row.daemon_cpus
                 else "the daemon left to the OS")
        cause = (f"{where}, {place}: {sig} on the most affected core ({_cores_text(row)}) in "
                 f"{row.signature_runs} of {row.n} runs")
    elif row.condition == "injected":
        cause = (f"{where}; the injector runs inside the job's ranks, so no profile can move it "
                 f"({sig} on the most affected core in {row.signature_runs} of {row.n} runs)")
    else:
        cause = f"{where}, no daemon: what differs is the node's own noise (most affected {_cores_text(row)})"
    if row.profile == BASELINE:
        other = next((r for r in rows if r.profile == BASELINE and r.condition == "none"), None)
        rel = (f", {row.std_ms / other.std_ms:.2g}x baseline without the daemon"
               if row.condition != "none" and other and other.std_ms > 0 else "")
        return f"{label}: std {_ms(row.std_ms)} ms{rel}; {cause}."
    c = row.calls.get(HEADLINE)
    if c is None:
        verdict = "not compared (no baseline runs under this condition)"
    elif c.verdict in (BETTER, WORSE):
        verdict = f"{c.verdict} than baseline on std ({ratio_text(c)})"
    elif c.verdict == SAME:
        verdict = f"no difference from baseline on std ({ratio_text(c)})"
    elif c.verdict == INCONCLUSIVE:
        verdict = f"inconclusive on std ({ratio_text(c)}: {c.reason})"
    else:
        verdict = f"{NO_VERDICT} on std ({c.reason})"
    return f"{label}: {verdict}; {cause}."


def sentences(rows: list[Row], signature: str = SIGNATURE) -> list[str]:
    return [sentence(r, rows, signature) for r in rows]


def rows_as_dicts(rows: list[Row]) -> list[dict]:
    """JSON form of the rows (report.json, table-iv.json)."""
    out = []
    for r in rows:
        d = {k: getattr(r, k) for k in ("condition", "profile", "n", "min_ms", "mean_ms", "max_ms", "std_ms",
                                        "noise_pct", "cpus", "daemon_cpus", "signature_runs")}
        d["cores"] = {str(k): v for k, v in r.cores.items()}
        d["calls"] = {m: {k: v for k, v in asdict(c).items()} for m, c in r.calls.items()}
        out.append(d)
    return out
