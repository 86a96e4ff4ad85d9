"""A node's noise as a periodic timeline of detours, and how long work takes on it.

The measured FWQ trace gives, per application core, the detours (start, stolen time) on one time
base. A bulk-synchronous node finishes its compute phase when its slowest core does, so the node's
timeline is the union of its cores' detour intervals. The trace spans S us; beyond S the timeline
repeats (periodic noise stays periodic), and each simulated node reads it from its own random phase.

On such a timeline the CPU time available between 0 and t is C(t) = t - (detour time in [0, t]).
Work of W us that starts at t ends at the first t' with C(t') = C(t) + W; with the timeline stored as
its gaps (the detour-free stretches) both C and its inverse are one searchsorted each, for all nodes
at once.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from stackproof.errors import StackproofError


class NoiseModelError(StackproofError):
    """A noise source that cannot drive the projection (no timestamps, empty, malformed)."""


@dataclass(frozen=True)
class NodeNoise:
    """Detour intervals (us, sorted, disjoint) inside one period [0, span_us)."""
    starts_us: np.ndarray
    ends_us: np.ndarray
    span_us: float
    source: str = ""

    def __post_init__(self):
        if not (np.isfinite(self.span_us) and self.span_us > 0):
            raise NoiseModelError(f"{self.source or 'noise'}: the timeline must span a positive time")
        gap_lo = np.concatenate(([0.0], self.ends_us))
        gap_hi = np.concatenate((self.starts_us, [self.span_us]))
        lengths = gap_hi - gap_lo
        if np.any(lengths < -1e-9):
            raise NoiseModelError(f"{self.source or 'noise'}: detours overlap or leave the period")
        object.__setattr__(self, "_gap_lo", gap_lo)
        object.__setattr__(self, "_gap_len", np.maximum(lengths, 0.0))
        object.__setattr__(self, "_cum", np.concatenate(([0.0], np.cumsum(np.maximum(lengths, 0.0))[:-1])))

    @property
    def detour_us(self) -> float:
        return float(np.sum(self.ends_us - self.starts_us))

    @property
    def fraction(self) -> float:
        """Share of the node's time stolen by noise."""
        return self.detour_us / self.span_us

    @property
    def available_per_period(self) -> float:
        return self.span_us - self.detour_us

    def _cpu_time(self, tau: np.ndarray) -> np.ndarray:
        """C(tau) for tau in [0, span)."""
        k = np.searchsorted(self._gap_lo, tau, side="right") - 1
        return self._cum[k] + np.minimum(tau - self._gap_lo[k], self._gap_len[k])

    def _inverse(self, c: np.ndarray) -> np.ndarray:
        """Smallest tau in [0, span] with C(tau) = c, for c in [0, available_per_period]."""
        # side="left": work that completes exactly where a detour begins ends there, not after it
        k = np.maximum(np.searchsorted(self._cum, c, side="left") - 1, 0)
        return self._gap_lo[k] + (c - self._cum[k])

    def finish(self, start_us: np.ndarray, work_us: float | np.ndarray, phase_us: np.ndarray) -> np.ndarray:
        """End times of `work_us` of CPU work started at `start_us` on nodes whose timelines are
        shifted by `phase_us` (all arrays of one length)."""
        avail = self.available_per_period
        if avail <= 0:
            raise NoiseModelError(f"{self.source or 'noise'}: the detours cover the whole timeline")
        shifted = np.asarray(start_us, dtype=np.float64) + phase_us
        periods = np.floor(shifted / self.span_us)
        tau = shifted - periods * self.span_us
        target = self._cpu_time(tau) + work_us
        q = np.floor(target / avail)
        rem = target - q * avail
        # a remainder of exactly 0 finishes at the end of the previous period, not after its detour
        at_edge = (rem <= 0) & (q > 0)
        q = np.where(at_edge, q - 1, q)
        rem = np.where(at_edge, avail, rem)
        end_tau = q * self.span_us + self._inverse(rem)
        return start_us + (end_tau - tau)


def quiet(span_us: float = 1e6) -> NodeNoise:
    return NodeNoise(np.empty(0), np.empty(0), span_us, "no noise")


def merge_intervals(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if starts.size == 0:
        return starts, ends
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    running_end = np.maximum.accumulate(e)
    new = np.concatenate(([True], s[1:] > running_end[:-1]))
    group = np.cumsum(new) - 1
    out_s = s[new]
    out_e = np.zeros(out_s.size)
    np.maximum.at(out_e, group, e)
    return out_s, out_e


def from_intervals(starts_us, lengths_us, span_us: float, source: str = "") -> NodeNoise:
    starts = np.asarray(starts_us, dtype=np.float64)
    ends = starts + np.asarray(lengths_us, dtype=np.float64)
    if starts.size and (not np.all(np.isfinite(ends)) or np.any(ends < starts)):
        raise NoiseModelError(f"{source or 'noise'}: detours must have finite, non-negative lengths")
    lengths = ends - starts
    starts = np.mod(starts, span_us)
    ends = starts + lengths
    # a detour crossing the period's end wraps around to its start
    wrap = ends > span_us
    if np.any(wrap):
        starts = np.concatenate((starts, np.zeros(int(wrap.sum()))))
        ends = np.concatenate((np.minimum(ends, span_us), ends[wrap] - span_us))
    s, e = merge_intervals(starts, ends)
    return NodeNoise(s, np.minimum(e, span_us), float(span_us), source)


def from_signature(freq_hz: float, duration_us: float, source: str = "") -> NodeNoise:
    """One detour of `duration_us` every 1/freq_hz seconds (e.g. 10 Hz x 2500 us)."""
    if not (freq_hz > 0 and np.isfinite(freq_hz)):
        raise NoiseModelError(f"noise signature: frequency must be a positive number of Hz, got {freq_hz}")
    period = 1e6 / freq_hz
    if not (0 <= duration_us < period):
        raise NoiseModelError(f"noise signature: duration {duration_us} us must be >= 0 and shorter "
                              f"than the period ({period:g} us)")
    return NodeNoise(np.array([0.0]), np.array([float(duration_us)]), period,
                     source or f"{freq_hz:g} Hz x {duration_us:g} us")


_SIGNATURE = re.compile(r"^\s*([0-9.]+(?:[eE][-+]?\d+)?)\s*hz\s*[x:*@]\s*([0-9.]+(?:[eE][-+]?\d+)?)\s*(us|ms|s)\s*$",
                        re.IGNORECASE)


def parse_signature(text: str) -> NodeNoise:
    """'10Hz:2.5ms', '100 Hz x 25 us'."""
    m = _SIGNATURE.match(text)
    if not m:
        raise NoiseModelError(f"noise signature {text!r}: expected FREQ Hz:DURATION with a unit, e.g. 10Hz:2.5ms")
    scale = {"us": 1.0, "ms": 1e3, "s": 1e6}[m.group(3).lower()]
    return from_signature(float(m.group(1)), float(m.group(2)) * scale, source=text.strip())


def from_trace(trace, cpus: list[int] | None = None, threshold_us: float | None = None) -> NodeNoise:
    """The node timeline of an FWQ trace: the union of its cores' detours (stolen time placed at
    the detour's start), on the trace's common time base, repeating every trace span."""
    from stackproof.noise.stats import find_detours

    if trace.nsamples < 16:
        raise NoiseModelError(f"{trace.path}: {trace.nsamples} samples per core are too few to model noise")
    ranks = range(trace.nranks)
    if cpus is not None:
        ranks = [i for i, r in enumerate(trace.ranks) if int(r.get("cpu", -1)) in cpus]
        if not ranks:
            raise NoiseModelError(f"{trace.path}: no rank ran on CPUs {cpus}")
    hosts = {trace.ranks[i].get("host") for i in ranks}
    if len(hosts) > 1:   # one node's noise: keep the first host's cores
        first = trace.ranks[next(iter(ranks))].get("host")
        ranks = [i for i in ranks if trace.ranks[i].get("host") == first]
    durations = trace.durations_us()
    starts = trace.starts_aligned_us()
    all_s, all_l = [], []
    span = 0.0
    for i in ranks:
        s, length = find_detours(durations[i, 1:], starts[i, 1:] - starts[i, 1], threshold_us)
        all_s.append(s)
        all_l.append(length)
        span = max(span, float(starts[i, -1] + durations[i, -1] - starts[i, 1]))
    s = np.concatenate(all_s) if all_s else np.empty(0)
    length = np.concatenate(all_l) if all_l else np.empty(0)
    return from_intervals(s, length, span, source=f"{trace.path} ({len(ranks)} cores)")
