"""The bulk-synchronous application of the projection, and its slowdown under noise.

Every iteration each node computes for `interval_us` of CPU time (stretched by its own noise
timeline, read from its own random phase), then joins an allreduce; the next iteration starts when
the allreduce has delivered its result to that node. With `overlap` > 0 (a non-blocking collective)
the last `overlap` share of the compute runs while the collective is in flight and the node goes on
when both are done. Slowdown = time of the run with noise / time of the same run without noise - 1.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from stackproof.noise.scale.collectives import ALGORITHMS, allreduce
from stackproof.noise.scale.loggp import LogGP
from stackproof.noise.scale.noisemodel import NodeNoise, NoiseModelError

PLACEMENTS = ("random", "block")


@dataclass(frozen=True)
class Scenario:
    nodes: int
    collective: str = "binomial"
    noisy_fraction: float = 1.0
    placement: str = "random"
    overlap: float = 0.0            # share of the interval overlapped with a non-blocking collective
    interval_us: float = 1000.0
    iterations: int = 1000
    message_bytes: int = 8
    seed: int = 0
    synchronized: bool = False      # every node reads its timeline from the same phase

    def check(self) -> None:
        if self.nodes < 1:
            raise NoiseModelError(f"node count must be >= 1, got {self.nodes}")
        if self.collective not in ALGORITHMS:
            raise NoiseModelError(f"unknown collective {self.collective!r}: choose from {', '.join(ALGORITHMS)}")
        if not 0 <= self.noisy_fraction <= 1:
            raise NoiseModelError(f"noisy fraction must be in [0, 1], got {self.noisy_fraction}")
        if self.placement not in PLACEMENTS:
            raise NoiseModelError(f"unknown placement {self.placement!r}: choose from {', '.join(PLACEMENTS)}")
        if not 0 <= self.overlap < 1:
            raise NoiseModelError(f"overlap must be in [0, 1), got {self.overlap}")
        if not (self.interval_us > 0 and np.isfinite(self.interval_us)):
            raise NoiseModelError(f"interval must be a positive time, got {self.interval_us} us")
        if self.iterations < 1:
            raise NoiseModelError(f"iterations must be >= 1, got {self.iterations}")
        if self.message_bytes < 0:
            raise NoiseModelError(f"message size must be >= 0 bytes, got {self.message_bytes}")


@dataclass
class Outcome:
    scenario: Scenario
    noise_fraction: float           # the node timeline's own share of stolen time
    time_us: float                  # makespan with noise
    quiet_time_us: float            # same run without noise
    noisy_nodes: int

    @property
    def slowdown(self) -> float:
        return self.time_us / self.quiet_time_us - 1.0

    def as_dict(self) -> dict:
        return {**asdict(self.scenario), "noise_fraction": self.noise_fraction, "time_us": self.time_us,
                "quiet_time_us": self.quiet_time_us, "noisy_nodes": self.noisy_nodes, "slowdown": self.slowdown}


def noisy_mask(s: Scenario, rng: np.random.Generator) -> np.ndarray:
    count = int(round(s.noisy_fraction * s.nodes))
    if s.noisy_fraction > 0:
        count = max(count, 1)
    mask = np.zeros(s.nodes, dtype=bool)
    if s.placement == "block":
        mask[:count] = True
    else:
        mask[rng.choice(s.nodes, size=count, replace=False)] = True
    return mask


def _run(s: Scenario, noise: NodeNoise | None, loggp: LogGP, mask: np.ndarray, phase: np.ndarray) -> float:
    before = s.interval_us * (1.0 - s.overlap)
    after = s.interval_us * s.overlap
    t = np.zeros(s.nodes)
    idx = np.flatnonzero(mask) if noise is not None else np.empty(0, dtype=int)
    ph = phase[idx]

    def compute(start: np.ndarray, work: float) -> np.ndarray:
        end = start + work
        if idx.size and work > 0:
            end[idx] = noise.finish(start[idx], work, ph)
        return end

    shape = None
    for i in range(s.iterations):
        posted = compute(t, before)
        done = allreduce(s.collective, posted, loggp, s.message_bytes)
        step = np.maximum(done, compute(posted, after)) if after > 0 else done
        if noise is None:
            # without noise every iteration is the same max-plus map of the previous one: once the
            # ranks' offsets repeat, the rest of the run is that iteration's advance times the count
            new_shape = step - step.max()
            if shape is not None and np.allclose(new_shape, shape, rtol=0.0, atol=1e-9 * max(1.0, step.max())):
                return float(step.max() + (s.iterations - 1 - i) * (step.max() - t.max()))
            shape = new_shape
        t = step
    return float(t.max())


def simulate(s: Scenario, noise: NodeNoise, loggp: LogGP) -> Outcome:
    s.check()
    rng = np.random.default_rng(s.seed)
    mask = noisy_mask(s, rng)
    phase = np.zeros(s.nodes) if s.synchronized else rng.uniform(0.0, noise.span_us, s.nodes)
    noisy = _run(s, noise, loggp, mask, phase)
    quiet = _run(s, None, loggp, mask, phase)
    return Outcome(s, noise.fraction, noisy, quiet, int(mask.sum()))
