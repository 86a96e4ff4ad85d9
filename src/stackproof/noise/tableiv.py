"""Table IV of the TOSS-2020 paper as a verdict: the core-specialization profiles (Table III)
compared with baseline the way stacks are compared, from repeated FWQ runs.

The data are runs: one FWQ run of one profile under one noise condition, reduced to its most
affected core (largest std, as in the paper), with every core's own figures kept (`per_cpu`).
`table()` turns them into one row per condition and profile: the medians over the repeats of min,
mean, max, std (ms) and noise %, and for every profile but baseline the ratio to baseline of std (the
headline), max and noise fraction with an exact interval and a call (better / worse / no difference
/ inconclusive). Like cores: a profile is compared with baseline on the same CPUs, its application
CPUs (`compared_cpus`): baseline's figure is the most affected of those cores in baseline's runs,
never the most affected of all of baseline's cores (the largest std of two cores against one core's
called identical noise better or worse in 15-23 % of tables). The ratio is the median of the run-to-run
ratios (Hodges-Lehmann, every baseline run against every profile run); baseline's own row carries the
distribution-free interval of its median std over its runs (how precisely the reference is known).
All calls of one table form one family (stackproof.comparison: weighted Benjamini-Hochberg; the
headline, std under the daemon, shares 4/5 of alpha), so the chance that identical profiles get any
better / worse call anywhere in the table is at most 5 %.
The repeats are two samples (Mann-Whitney): the runner interleaves the profiles in time (an even
number of rounds, every other one reversed), so a slow spell of the host lands on all of them alike.

Conditions:
  daemon    a noise daemon on the node (10 Hz / 2.5 ms at SCHED_FIFO, like snmpd or irqbalance on the
            paper's nodes): each profile places it as it places system daemons, so this is where a
            profile's mitigation shows;
  none      the node's own noise only;
  injected  an injector inside the job's ranks: noise no profile can move (it proves the measurement
            sees a signature; its rows are labelled so).

`stackproof noise experiment` (acceptance/tableiv.py runs the matrix on the test cluster) and the
acceptance report both build the table here, from the same run records (`runs.json`, noise/fwqruns.py,
re-exported here). Pure data: no cluster, no report.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass, field

import numpy as np

from stackproof.comparison import (BETTER, INCONCLUSIVE, NO_VERDICT, SAME, WORSE, Call, Design, Metric,
                                   sequential_calls)
from stackproof.cpulist import format_list, parse_list
from stackproof.noise.fwqruns import CONDITIONS, Run, per_cpu_stats, reduce_trace, runs_from_json, runs_to_json

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
# daemon): 60,000 samples of -w 16384 loop iterations (a 10 us quantum), six periods of the daemon,
# each burst 250 quanta long (the run's time here: docs/performance.md). The ReFrame check FWQNoise declares the same.
SAMPLES = 60000
WORK = 16384
__all__ = ["CONDITIONS", "Run", "Row", "per_cpu_stats", "reduce_trace", "runs_from_json", "runs_to_json", "table",
           "markdown", "sentences", "rows_as_dicts", "header", "cells"]
SIGNATURE_TOLERANCE = 0.1    # a run "shows the signature" when its most affected core's period is within 10 %


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
    signature_runs: int         # runs whose cores, taken together, show the signature's period
    calls: dict = field(default_factory=dict)     # metric -> Call (not for baseline)
    compared_cpus: str = ""     # the CPUs the ratio compares on (baseline's figure from these)
    like_cores: bool = True     # False: baseline's runs had no per-core figures for them
    baseline_std_ms: float | None = None          # median of baseline's std on compared_cpus
    reference: tuple | None = None                # baseline row: (lo_ms, hi_ms, level) of its median std


def profile_order(names) -> list[str]:
    """The paper's order (baseline first), then other profiles (a hunt's proposal) by name."""
    known = [p for p in PROFILE_ORDER if p in names]
    return known + sorted(set(names) - set(known))


def _median(values) -> float:
    return float(np.median(values)) if len(values) else float("nan")


def median_interval(values, level: float = 0.95) -> tuple[float, float, float] | None:
    """The distribution-free interval of a median: [X(k), X(n+1-k)] with the largest k whose coverage
    1 - 2 P(Binomial(n, 1/2) <= k-1) reaches `level` (k = 1, its lower coverage, when none does);
    (lo, hi, coverage), None for no values."""
    x = sorted(values)
    n = len(x)
    if not n:
        return None
    cdf = np.cumsum([math.comb(n, i) for i in range(n + 1)]) / 2 ** n
    k = max(1, int(np.count_nonzero(1 - 2 * cdf[:(n + 1) // 2] >= level)))
    return float(x[k - 1]), float(x[n - k]), float(1 - 2 * cdf[k - 1])


def signature_period_ms(signature: str) -> float | None:
    """The period of a FREQHz-DURATION signature in ms (10Hz-2500us: 100)."""
    try:
        freq = float(signature.split("Hz", 1)[0])
    except ValueError:
        return None
    return 1e3 / freq if freq > 0 else None


def _cpus(text: str) -> set[int]:
    try:
        return parse_list(text) if text else set()
    except ValueError:
        return set()


def _seen(run: Run) -> float | None:
    """The period a run's cores show together (a roaming daemon splits its bursts between them);
    its most affected core's own for records that predate it."""
    return run.node_period_ms if run.node_period_ms is not None else run.period_ms


def baseline_on(base: list[Run], cpus_text: str) -> tuple[dict[str, list[float]], str, bool]:
    """Baseline's figures on a profile's CPUs: per metric, each baseline run's most affected of those
    CPUs; (values, the CPUs compared, like cores). Baseline runs without figures for those CPUs (an
    old runs.json, a ReFrame case without its trace) fall back to baseline's own most affected core."""
    cpus = _cpus(cpus_text)
    found = [r.on(cpus) for r in base]
    if cpus and all(found):
        return {m: [x[m] for x in found] for m in METRICS}, format_list(cpus), True
    return {m: [r.value(m) for r in base] for m in METRICS}, base[0].cpus or "?", False


def table(runs: list[Run], baseline: str = BASELINE, alpha: float = ALPHA, margin: float = MARGIN,
          signature: str = SIGNATURE, rule: str = "bh") -> list[Row]:
    """One row per condition and profile (conditions in CONDITIONS order, profiles in the paper's),
    with each metric's call against `baseline` of the same condition on the profile's CPUs
    (baseline_on); every call of the table in one family at `alpha`."""
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
            shown = sum(1 for r in rs if period and _seen(r) and
                        abs(_seen(r) - period) <= SIGNATURE_TOLERANCE * period)
            rows.append(Row(cond, prof, len(rs), _median([r.min_us for r in rs]) / 1e3,
                            _median([r.mean_us for r in rs]) / 1e3, _median([r.max_us for r in rs]) / 1e3,
                            _median([r.std_us for r in rs]) / 1e3, 100 * _median([r.noise_fraction for r in rs]),
                            rs[0].cpus, rs[0].daemon_cpus, Counter(r.cpu for r in rs), shown,
                            compared_cpus=format_list(_cpus(rs[0].cpus)) or rs[0].cpus))
            if prof == baseline:
                ref = median_interval([r.std_us / 1e3 for r in rs])
                rows[-1].reference, rows[-1].baseline_std_ms = ref, rows[-1].std_ms
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
        values, row.compared_cpus, row.like_cores = baseline_on(base, row.cpus)
        row.baseline_std_ms = _median(values["std"]) / 1e3
        for m in METRICS:
            todo.append((row, m))
            metrics.append(Metric(values[m], [r.value(m) for r in mine], [r.round for r in base],
                                  [r.round for r in mine], better="lower",
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
    return "(baseline)" if c is None else str(c.verdict)


RATIO_KIND = "median of the run-to-run ratios (Hodges-Lehmann: every baseline run against every run of the profile)"


def header() -> list[str]:
    return ["noise", "configuration", "CPUs compared", "n", "Min ms", "Mean ms", "Max ms", "Std ms", "noise %",
            "baseline Std ms on these CPUs", "Std / baseline: median of run ratios [interval]", "call"]


def _reference_text(row: Row) -> tuple[str, str]:
    """Baseline's own row: its median std with the interval of that median, and the interval relative
    to the median (how far from 1 a ratio must be before it says more than baseline's own spread)."""
    if not row.reference or not row.std_ms:
        return _ms(row.std_ms), "-"
    lo, hi, level = row.reference
    return (f"{_ms(row.std_ms)} [{_ms(lo)}, {_ms(hi)}]",
            f"1 [{lo / row.std_ms:.2f}, {hi / row.std_ms:.2f}] ({100 * level:.0f} % interval of its median)")


def cells(row: Row) -> list[str]:
    """One row of the paper-shaped table as strings."""
    c = row.calls.get(HEADLINE)
    cpus = row.compared_cpus + ("" if row.like_cores else " (baseline: its most affected core)")
    if row.profile == BASELINE:
        base, ratio = _reference_text(row)
    else:
        base = "-" if row.baseline_std_ms is None else _ms(row.baseline_std_ms)
        ratio = ratio_text(c)
    return [CONDITION_LABEL.get(row.condition, row.condition), row.profile, cpus or "-", str(row.n), _ms(row.min_ms),
            _ms(row.mean_ms), _ms(row.max_ms), _ms(row.std_ms), f"{row.noise_pct:.2f}", base, ratio,
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
                 else "the daemon free to burst on any CPU")
        cause = (f"{where}, {place}: {sig} on these cores in {row.signature_runs} of {row.n} runs "
                 f"(most affected {_cores_text(row)})")
    elif row.condition == "injected":
        cause = (f"{where}; the injector runs inside the job's ranks, so no profile can move it "
                 f"({sig} on these cores in {row.signature_runs} of {row.n} runs)")
    else:
        cause = f"{where}, no daemon: what differs is the node's own noise (most affected {_cores_text(row)})"
    if row.profile == BASELINE:
        other = next((r for r in rows if r.profile == BASELINE and r.condition == "none"), None)
        rel = (f", {row.std_ms / other.std_ms:.2g}x baseline without the daemon"
               if row.condition != "none" and other and other.std_ms > 0 else "")
        ref = ""
        if row.reference:
            ref = (f" [{_ms(row.reference[0])}, {_ms(row.reference[1])}] ({100 * row.reference[2]:.0f} % interval of "
                   f"the median over {row.n} runs)")
        return f"{label}: std {_ms(row.std_ms)} ms{ref}{rel}; {cause}."
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
    if c is not None:
        verdict += (f", against baseline on {_cpu_text(row.compared_cpus)}" if row.like_cores else
                    ", against baseline's most affected core (its runs lack per-core figures)")
    return f"{label}: {verdict}; {cause}."


def sentences(rows: list[Row], signature: str = SIGNATURE) -> list[str]:
    return [sentence(r, rows, signature) for r in rows]


def rows_as_dicts(rows: list[Row]) -> list[dict]:
    """JSON form of the rows (report.json, table-iv.json)."""
    out = []
    for r in rows:
        d = {k: getattr(r, k) for k in ("condition", "profile", "n", "min_ms", "mean_ms", "max_ms", "std_ms",
                                        "noise_pct", "cpus", "daemon_cpus", "signature_runs", "compared_cpus",
                                        "like_cores", "baseline_std_ms")}
        d["cores"] = {str(k): v for k, v in r.cores.items()}
        if r.reference:
            d["reference"] = {"what": "the distribution-free interval of baseline's median std over its runs",
                              "lo_ms": r.reference[0], "hi_ms": r.reference[1], "level": r.reference[2]}
        if r.calls:
            d["ratio_kind"] = RATIO_KIND
        d["calls"] = {m: {k: v for k, v in asdict(c).items()} for m, c in r.calls.items()}
        out.append(d)
    return out
