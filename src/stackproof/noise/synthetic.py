"""Synthetic FWQ traces with known detours, on a wall-clock timeline (what a real run records):
a periodic source firing at absolute times t0 + k/f delays whichever sample is running then."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Source:
    """A noise source: periodic (freq_hz > 0) or random arrivals (rate_hz > 0, durations uniform)."""
    freq_hz: float = 0.0
    duration_us: float = 0.0
    phase_us: float = 0.0
    rate_hz: float = 0.0
    duration_range_us: tuple = (0.0, 0.0)


def simulate_core(nsamples: int, quantum_us: float, sources: list[Source], jitter_us: float = 0.5,
                  seed: int = 0) -> np.ndarray:
    """Durations (us) of one core: each sample is quantum + jitter + every detour that starts while it
    runs (a detour that starts during a detour is queued behind it)."""
    rng = np.random.default_rng(seed)
    base = quantum_us + np.abs(rng.normal(0.0, jitter_us, nsamples))
    horizon = float(base.sum()) * 3 + 1e6
    events = []
    for s in sources:
        if s.freq_hz > 0:
            times = np.arange(s.phase_us, horizon, 1e6 / s.freq_hz)
            events.append(np.column_stack([times, np.full(times.size, s.duration_us)]))
        if s.rate_hz > 0:
            n = rng.poisson(s.rate_hz * horizon / 1e6)
            times = np.sort(rng.uniform(0, horizon, n))
            lo, hi = s.duration_range_us
            events.append(np.column_stack([times, rng.uniform(lo, hi, n)]))
    ev = np.concatenate(events) if events else np.empty((0, 2))
    ev = ev[np.argsort(ev[:, 0])]
    out = np.empty(nsamples)
    t, j = 0.0, 0
    for i in range(nsamples):
        end = t + base[i]
        while j < len(ev) and ev[j, 0] < end:  # every detour arriving before the work is done
            end += ev[j, 1]
            j += 1
        out[i] = end - t
        t = end
    return out
