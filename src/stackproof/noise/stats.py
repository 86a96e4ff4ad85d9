"""Per-core noise statistics, detours and periodicity detection on FWQ traces (times in microseconds).

Definitions (docs/noise.md explains the choices):
  noise_fraction  sum(sample - core minimum) / sum(samples): the share of time lost above the best case
  detour          a sample whose excess over its baseline (the running median of the 31 samples
                  around it) exceeds a threshold (default: the largest of 8 robust sigmas of the
                  samples around their baseline, 2 % of the median and 1 us); back-to-back detour
                  samples merge into one event whose duration is their summed excess
  period          the dominant periodic detour signature: the period with the strongest phase
                  coherence (Rayleigh statistic) among detours of similar duration; its detour_us is the
                  median duration of the events in phase with it
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

PERCENTILES = (50, 90, 99, 99.9)


@dataclass
class Periodicity:
    period_ms: float
    detour_us: float
    events: int          # detours in phase with the period (or, method "interval", regularly spaced)
    coherence: float     # "phase": Rayleigh R of the group, 0 (random) .. 1 (strictly periodic);
                         # "interval": fraction of gaps within 10 % of the period
    method: str = "phase"

    @property
    def frequency_hz(self) -> float:
        return 1e3 / self.period_ms


@dataclass
class CoreStats:
    rank: int
    cpu: int
    host: str
    samples: int
    min_us: float
    mean_us: float
    max_us: float
    std_us: float
    median_us: float
    percentiles_us: dict
    noise_fraction: float
    detours: int
    detour_time_us: float
    detour_histogram: dict        # {"edges_us": [...], "counts": [...]}, log-spaced bins
    period_ms: float | None
    detour_us: float | None
    period_events: int
    period_coherence: float | None
    period_method: str | None

    def as_dict(self) -> dict:
        return asdict(self)


# ------------------------------------------------------------------ detours

BASELINE_WINDOW = 31    # samples in the running median that is a core's undisturbed speed


def baseline_us(durations_us: np.ndarray, window: int = BASELINE_WINDOW) -> np.ndarray:
    """The undisturbed duration of each sample: the running median of the `window` samples around it
    (the whole core's median for a shorter trace). Not one median per core: on a VM the loop's speed
    changes by up to 1.8x from one moment to the next (measured here: a co-tenant on the host takes
    the hyperthread beside the vCPU, then leaves), and against a median taken over both speeds a
    burst on a fast stretch looks short while the slow stretch looks like one long detour. A median
    filter keeps such steps sharp and drops isolated long samples (a detour spans a sample or two)."""
    d = np.asarray(durations_us, dtype=np.float64)
    if d.size <= window:
        return np.full(d.shape, float(np.median(d)) if d.size else 0.0)
    half = window // 2
    padded = np.pad(d, half, mode="reflect")
    return np.median(np.lib.stride_tricks.sliding_window_view(padded, window), axis=1)


def detour_threshold_us(durations_us: np.ndarray, baseline: np.ndarray | None = None) -> float:
    """How far above its baseline a sample must be to count as a detour: the largest of 8 robust sigmas
    of the samples around their baseline, 2 % of the median and 1 us."""
    d = np.asarray(durations_us, dtype=np.float64)
    if d.size == 0:
        return 1.0
    base = baseline_us(d) if baseline is None else baseline
    sigma = 1.4826 * float(np.median(np.abs(d - base)))
    return max(8 * sigma, 0.02 * float(np.median(d)), 1.0)


def find_detours(durations_us: np.ndarray, starts_us: np.ndarray | None = None,
                 threshold_us: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Detour events of one core: (start times us, durations us). Consecutive detour samples merge."""
    d = np.asarray(durations_us, dtype=np.float64)
    if starts_us is None:
        starts_us = np.concatenate(([0.0], np.cumsum(d[:-1])))
    base = baseline_us(d)
    if threshold_us is None:
        threshold_us = detour_threshold_us(d, base)
    excess = d - base
    hit = excess > threshold_us
    if not hit.any():
        return np.empty(0), np.empty(0)
    idx = np.flatnonzero(hit)
    # group runs of consecutive indices
    breaks = np.flatnonzero(np.diff(idx) > 1) + 1
    first = idx[np.concatenate(([0], breaks))]
    sums = np.add.reduceat(excess[idx], np.concatenate(([0], breaks)))
    return np.asarray(starts_us)[first], sums


def detour_histogram(detour_us: np.ndarray, bins_per_decade: int = 10) -> dict:
    if detour_us.size == 0:
        return {"edges_us": [], "counts": []}
    lo = math.floor(math.log10(max(detour_us.min(), 1e-3)) * bins_per_decade) / bins_per_decade
    hi = math.ceil(math.log10(detour_us.max()) * bins_per_decade + 1e-9) / bins_per_decade
    edges = 10 ** np.arange(lo, hi + 0.5 / bins_per_decade, 1 / bins_per_decade)
    if edges.size < 2:
        edges = np.array([10 ** lo, 10 ** (lo + 1 / bins_per_decade)])
    counts, edges = np.histogram(detour_us, bins=edges)
    return {"edges_us": [round(float(e), 4) for e in edges], "counts": [int(c) for c in counts]}


# ------------------------------------------------------------------ periodicity

def _coherence(times_us: np.ndarray, period_us: np.ndarray) -> np.ndarray:
    """Rayleigh R of event phases for each candidate period (vectorised over periods)."""
    phase = 2 * np.pi * times_us[None, :] / period_us[:, None]
    return np.abs(np.exp(1j * phase).mean(axis=1))


def _candidate_periods(times_us: np.ndarray, min_period_us: float, max_period_us: float,
                       resolution_us: float, top: int = 6) -> np.ndarray:
    """Most common gaps between each event and its next few successors. Event times are only known
    to within a sample, so gaps are binned linearly at the sample resolution (3-bin smoothing)."""
    gaps = [times_us[k:] - times_us[:-k] for k in range(1, 9) if times_us.size > k]
    if not gaps:
        return np.empty(0)
    gaps = np.concatenate(gaps)
    gaps = gaps[(gaps >= min_period_us) & (gaps <= max_period_us)]
    if gaps.size == 0:
        return np.empty(0)
    width = max(resolution_us, (gaps.max() - gaps.min()) / 200000, 1e-3)
    bins = np.arange(gaps.min(), gaps.max() + 2 * width, width)
    counts, edges = np.histogram(gaps, bins=bins)
    smooth = np.convolve(counts, np.ones(3), mode="same")
    order = np.argsort(smooth)[::-1][:top]
    order = order[smooth[order] > 0]
    centres = []
    for b in order:  # centre of mass of the gaps in the 3 bins around the peak
        lo, hi = edges[max(b - 1, 0)], edges[min(b + 2, len(edges) - 1)]
        sel = gaps[(gaps >= lo) & (gaps < hi)]
        centres.append(float(sel.mean()) if sel.size else 0.5 * (lo + hi))
    return np.array(centres)


def _refine(times_us: np.ndarray, period_us: float, rel_halfwidth: float, span_us: float):
    """Scan the coherence around period_us finely enough not to miss its peak (width ~ period/span)."""
    for _ in range(2):
        step = period_us / span_us / 4  # a quarter of the peak width, relative
        n = int(np.clip(np.ceil(2 * rel_halfwidth / step), 21, 801))
        grid = period_us * (1 + np.linspace(-rel_halfwidth, rel_halfwidth, n))
        r = _coherence(times_us, grid)
        k = int(np.argmax(r))
        period_us, best = float(grid[k]), float(r[k])
        rel_halfwidth = 2 * rel_halfwidth / (n - 1)
    return period_us, best


def _fit_periods(times_us: np.ndarray, span_us: float, min_period_us: float, resolution_us: float):
    """Candidate (period_us, R) pairs for one set of event times, each refined to its coherence peak."""
    cands = _candidate_periods(times_us, min_period_us, span_us / 4, resolution_us)
    if cands.size:  # the fundamental may hide behind its multiples: add the first one's divisors
        divisors = cands[0] / np.arange(2, 6)
        cands = np.concatenate([cands, divisors[divisors >= min_period_us]])
    if times_us.size > 1000:  # coherence is a mean: a random subset estimates it well and fast
        pick = np.random.default_rng(0).choice(times_us.size, 1000, replace=False)
        times_us = times_us[np.sort(pick)]
    out = []
    for p in cands:
        rel = float(np.clip(resolution_us / p, 0.001, 0.02))  # a candidate is good to ~a sample
        out.append(_refine(times_us, p, rel, span_us))
    return out


def _regular_intervals(t: np.ndarray, min_period_us: float, min_events: int):
    """A sleep-loop source (work, then sleep N) repeats at a steady interval but drifts in phase, so
    phase coherence misses it: accept it when most consecutive gaps are within 10 % of their median.
    Returns (period_us, fraction of regular gaps, events next to a regular gap) or None."""
    gaps = np.diff(t)
    if gaps.size < min_events - 1:
        return None
    period = float(np.median(gaps))
    if period < min_period_us:
        return None
    regular = np.abs(gaps - period) <= 0.1 * period
    fraction = float(regular.mean())
    if fraction < 0.6:
        return None
    events = np.zeros(t.size, bool)
    events[:-1] |= regular
    events[1:] |= regular
    if events.sum() < min_events:
        return None
    return period, fraction, events


MIN_FILL = 0.6  # a source fires in most of its periods; tick-aligned noise and the P/2 harmonic (0.5) do not


def detect_periodicity(starts_us: np.ndarray, detour_us: np.ndarray, span_us: float,
                       quantum_us: float, min_events: int = 4) -> Periodicity | None:
    """The dominant periodic detour signature of one core, or None.

    Detours are grouped by duration (log bins; a periodic source has a narrow duration), each group
    and the whole set are searched for candidate periods. A candidate counts when its phase
    coherence beats random arrivals and detours occur in at least 60 % of its periods (random
    preemptions land on the 4 ms scheduler-tick grid: coherent, but in few of its slots). Among a
    group's candidates the longest strong one wins (harmonics p/2, p/3 are as coherent); across
    groups the one explaining the most detour time (in-phase events x median duration) wins. A group
    without a coherent period may still be a sleep loop with steady intervals (method "interval"). Periods must
    exceed two quanta (FWQ cannot resolve shorter ones) and fit four times into the trace."""
    starts_us = np.asarray(starts_us, dtype=np.float64)
    detour_us = np.asarray(detour_us, dtype=np.float64)
    if starts_us.size < min_events:
        return None
    groups = [np.ones(starts_us.size, bool)]
    logd = np.log(np.maximum(detour_us, 1e-3))
    counts, edges = np.histogram(logd, bins=np.arange(logd.min(), logd.max() + 0.25, 0.2))
    weight = counts * np.exp(0.5 * (edges[:-1] + edges[1:]))
    for b in np.argsort(weight)[::-1][:4]:
        if counts[b] < min_events:
            continue
        centre = np.median(logd[(logd >= edges[b]) & (logd <= edges[b + 1])])
        groups.append(np.abs(logd - centre) <= 0.3)
    best: Periodicity | None = None
    best_score = 0.0
    for mask in groups:
        t, d = starts_us[mask], detour_us[mask]
        if t.size < min_events:
            continue
        valid = []
        for period, r in _fit_periods(t, span_us, 2 * quantum_us, quantum_us):
            if r < max(0.25, 2.5 / math.sqrt(t.size)):
                continue  # indistinguishable from random arrivals
            phase = (t / period) % 1.0
            mean_phase = (np.angle(np.exp(2j * np.pi * phase).mean()) / (2 * np.pi)) % 1.0
            dist = np.abs((phase - mean_phase + 0.5) % 1.0 - 0.5)
            in_phase = dist <= max(0.05, 1.5 * quantum_us / period)
            slots = np.unique(np.rint(t[in_phase] / period - mean_phase))
            fill = slots.size / max(span_us / period, 1.0)
            if in_phase.sum() >= min_events and fill >= MIN_FILL:
                valid.append((period, r, in_phase))
        method = "phase"
        if not valid:
            interval = _regular_intervals(t, 2 * quantum_us, min_events)
            if interval is None:
                continue
            valid, method = [interval], "interval"
        rmax = max(r for _, r, _ in valid)
        period, r, in_phase = max((v for v in valid if v[1] >= 0.8 * rmax), key=lambda v: v[0])
        # the signature's noise time: events x typical (median) detour. A sum would let a frequent
        # small source (the scheduler tick) claim the big detours that happen to share its phase.
        typical = float(np.median(d[in_phase]))
        score = int(in_phase.sum()) * typical
        if score > best_score:
            best_score = score
            best = Periodicity(period_ms=period / 1e3, detour_us=typical, events=int(in_phase.sum()),
                               coherence=r, method=method)
    return best


# ------------------------------------------------------------------ per-core statistics

def _core_stats_from(d: np.ndarray, starts: np.ndarray, rank: dict, quantum_us: float | None) -> CoreStats:
    minimum = float(d.min())
    total = float(d.sum())
    ev_t, ev_d = find_detours(d, starts)
    median = float(np.median(d))
    period = detect_periodicity(ev_t, ev_d, span_us=total, quantum_us=quantum_us or median)
    return CoreStats(
        rank=int(rank.get("rank", 0)), cpu=int(rank.get("cpu", -1)), host=str(rank.get("host", "?")),
        samples=int(d.size), min_us=minimum, mean_us=float(d.mean()), max_us=float(d.max()),
        std_us=float(d.std()), median_us=median,
        percentiles_us={f"p{p:g}": float(v) for p, v in zip(PERCENTILES, np.percentile(d, PERCENTILES))},
        noise_fraction=(total - minimum * d.size) / total if total > 0 else 0.0,
        detours=int(ev_t.size), detour_time_us=float(ev_d.sum()), detour_histogram=detour_histogram(ev_d),
        period_ms=period.period_ms if period else None, detour_us=period.detour_us if period else None,
        period_events=period.events if period else 0, period_coherence=period.coherence if period else None,
        period_method=period.method if period else None)


def core_stats(trace, skip_first: int = 1) -> list[CoreStats]:
    """Statistics of every rank (core) of a trace. The first sample is skipped by default (it
    carries the barrier exit), as the original FWQ tools do."""
    d_all = trace.durations_us()
    s_all = trace.starts_us()
    if trace.nsamples <= skip_first:
        skip_first = 0
    quantum = trace.meta.get("quantum_target_ns") or 0
    return [_core_stats_from(d_all[i, skip_first:], s_all[i, skip_first:], trace.ranks[i],
                             quantum / 1e3 if quantum else None)
            for i in range(trace.nranks)]


def most_affected(stats: list[CoreStats]) -> CoreStats:
    """The core with the largest standard deviation (the Table IV row of the TOSS paper)."""
    return max(stats, key=lambda s: s.std_us)


def most_affected_stats(trace, skip_first: int = 1) -> CoreStats:
    """most_affected(core_stats(trace)) without the detour and period analysis of the other cores:
    the std of every core, the full statistics of the largest only (a Table IV matrix reduces a
    trace after every run)."""
    d_all = trace.durations_us()
    if trace.nsamples <= skip_first:
        skip_first = 0
    i = int(np.argmax(d_all[:, skip_first:].std(axis=1)))
    quantum = trace.meta.get("quantum_target_ns") or 0
    return _core_stats_from(d_all[i, skip_first:], trace.starts_us()[i, skip_first:], trace.ranks[i],
                            quantum / 1e3 if quantum else None)


def node_periodicity(trace, skip_first: int = 1) -> Periodicity | None:
    """The dominant periodic signature of the run's cores taken together (their detours on one time
    base): a source that hits one core or another, a daemon whose bursts move between cores, shows
    its period here although no single core sees enough of its bursts."""
    d_all = trace.durations_us()
    if trace.nsamples <= skip_first:
        skip_first = 0
    starts = trace.starts_aligned_us()
    times, detours = [], []
    for i in range(trace.nranks):
        t, d = find_detours(d_all[i, skip_first:], starts[i, skip_first:])
        times.append(t)
        detours.append(d)
    t, d = np.concatenate(times), np.concatenate(detours)
    order = np.argsort(t)
    span = float(d_all[:, skip_first:].sum(axis=1).max()) if trace.nranks else 0.0
    quantum = trace.meta.get("quantum_target_ns") or 0
    return detect_periodicity(t[order], d[order], span_us=span,
                              quantum_us=quantum / 1e3 if quantum else float(np.median(d_all[:, skip_first:])))


JSON_FIELDS = ("rank", "cpu", "host", "samples", "min_us", "mean_us", "max_us", "std_us", "median_us",
               "percentiles_us", "noise_fraction", "detours", "detour_time_us", "period_ms", "detour_us",
               "period_events", "period_coherence", "period_method", "detour_histogram")


def stats_json(trace, stats: list[CoreStats] | None = None) -> dict:
    """The `stackproof noise stats --json` document for one trace."""
    stats = stats if stats is not None else core_stats(trace)
    cores = [{k: getattr(s, k) for k in JSON_FIELDS} for s in stats]
    worst = most_affected(stats)
    return {"file": trace.path, "label": trace.name(), "nranks": trace.nranks, "nsamples": trace.nsamples,
            "meta": {k: trace.meta.get(k) for k in ("program", "mode", "work_iterations", "quantum_target_ns",
                                                     "calibration_error", "timer", "timer_overhead_ns",
                                                     "ticks_per_second", "version")},
            "cores": cores, "most_affected": {k: getattr(worst, k) for k in JSON_FIELDS}}


# ------------------------------------------------------------------ comparison

def compare(configs: dict, baseline: str | None = None) -> list[dict]:
    """Table IV across configurations: {name: Trace or list[CoreStats]} -> one row per configuration
    with the most-affected core's min/mean/max/std (ms), its noise fraction, and ratios to baseline
    (the first configuration unless `baseline` names another)."""
    if not configs:
        raise ValueError("compare needs at least one configuration")
    rows = []
    for name, value in configs.items():
        stats = value if isinstance(value, list) else core_stats(value)
        w = most_affected(stats)
        rows.append({"config": name, "rank": w.rank, "cpu": w.cpu, "min_ms": w.min_us / 1e3,
                     "mean_ms": w.mean_us / 1e3, "max_ms": w.max_us / 1e3, "std_ms": w.std_us / 1e3,
                     "noise_fraction": w.noise_fraction, "period_ms": w.period_ms, "detour_us": w.detour_us,
                     "node_noise_fraction": float(np.mean([s.noise_fraction for s in stats]))})
    base_name = baseline or rows[0]["config"]
    base = next((r for r in rows if r["config"] == base_name), None)
    if base is None:
        raise ValueError(f"baseline {base_name!r} is not one of {[r['config'] for r in rows]}")
    for r in rows:
        for key in ("mean_ms", "max_ms", "std_ms", "noise_fraction"):
            r[f"{key.split('_')[0]}_ratio"] = r[key] / base[key] if base[key] else None
    return rows


def format_table(rows: list[dict]) -> str:
    """Plain-text (Markdown) rendering of compare() rows."""
    head = ("| Configuration | core (rank/cpu) | Min ms | Mean ms | Max ms | Std ms | noise % | "
            "Std / base | Max / base | period ms | detour us |")
    lines = [head, "|" + "|".join(["---"] * 11) + "|"]
    for r in rows:
        def fmt(v, spec):
            return "-" if v is None else format(v, spec)
        lines.append(f"| {r['config']} | {r['rank']}/{r['cpu']} | {r['min_ms']:.3f} | {r['mean_ms']:.3f} | "
                     f"{r['max_ms']:.3f} | {r['std_ms']:.4f} | {100 * r['noise_fraction']:.2f} | "
                     f"{fmt(r['std_ratio'], '.2f')} | {fmt(r['max_ratio'], '.2f')} | "
                     f"{fmt(r['period_ms'], '.1f')} | {fmt(r['detour_us'], '.0f')} |")
    return "\n".join(lines)
