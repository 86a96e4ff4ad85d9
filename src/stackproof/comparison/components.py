"""Variance components of launches run in blocks (several launches inside one job), from A/A data:
how much launches inside one job vary (`sigma_within`), how much a job's own level moves all of its
launches (`tau_job`), what a launch's position in its job does (`position`), and whether launches
inside a job are exchangeable with launches across jobs (a permutation test of tau_job = 0).

On log values y of one metric: y = stack + job_j + position_k + e. The fixed-effects fit with the
jobs gives the within-job mean square MS_w (sigma_within^2) and the position effects; the fit without
them adds the between-job mean square MS_b; tau_job^2 = (MS_b - MS_w) / n0 (the ANOVA estimator, n0
the launches per job, corrected for unequal jobs), 0 when negative. The permutation test moves the
job labels among launches of the same position and stack (what no job effect would allow) and counts
how often F = MS_b / MS_w is as large as the data's. Seeded: the same data give the same answer.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np


@dataclass(frozen=True)
class Components:
    sigma_within: float          # a launch's spread inside one job (log scale)
    tau_job: float               # the spread of a job's own level (log scale)
    position: tuple              # log effect of each position in a job (mean 0), in position order
    positions: tuple             # the positions seen (as given)
    stack: float                 # log(other / baseline) the fit sees (about 0 in A/A)
    jobs: int
    launches: int
    f: float                     # MS_between / MS_within
    p_exchangeable: float        # permutation p-value of tau_job = 0
    extra: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"sigma_within": round(self.sigma_within, 5), "tau_job": round(self.tau_job, 5),
                "position": [round(x, 5) for x in self.position], "positions": list(self.positions),
                "stack": round(self.stack, 5), "jobs": self.jobs, "launches": self.launches,
                "f": round(self.f, 4), "p_exchangeable": round(self.p_exchangeable, 4)}


def _design(jobs, pos, stack, with_jobs: bool) -> np.ndarray:
    cols = [np.ones(len(pos)), stack.astype(float)]
    for p in sorted(set(pos))[1:]:
        cols.append((pos == p).astype(float))
    if with_jobs:
        for j in sorted(set(jobs))[1:]:
            cols.append((jobs == j).astype(float))
    return np.column_stack(cols)


def _fit(y, x) -> tuple[float, int, np.ndarray]:
    coef, _, rank, _ = np.linalg.lstsq(x, y, rcond=None)
    r = y - x @ coef
    return float(r @ r), int(rank), coef


def _f(y, x0, x1) -> tuple[float, float, float, int, int]:
    rss0, r0, _ = _fit(y, x0)
    rss1, r1, _ = _fit(y, x1)
    df_w, df_b = len(y) - r1, r1 - r0
    ms_w = rss1 / df_w if df_w > 0 else float("nan")
    ms_b = (rss0 - rss1) / df_b if df_b > 0 else float("nan")
    return ms_b / ms_w if ms_w > 0 else float("inf"), ms_b, ms_w, df_b, df_w


def variance_components(values: Sequence[float], stacks: Sequence, jobs: Sequence, positions: Sequence,
                        permutations: int = 2000, seed: int = 43) -> Components:
    """The components of one metric from its A/A launches: `values` (> 0), each launch's stack (two
    labels; the first seen is the baseline), job (block) id and position in its job. Needs at least
    two jobs with two launches or more. ValueError on unusable input."""
    y = np.log(np.asarray(values, dtype=float))
    if len(y) == 0 or not np.isfinite(y).all():
        raise ValueError("variance_components: values must be finite and > 0")
    if not len(stacks) == len(jobs) == len(positions) == len(y):
        raise ValueError("variance_components: one stack, job and position per value")
    labels = list(dict.fromkeys(stacks))
    if len(labels) > 2:
        raise ValueError("variance_components: two stacks at most")
    stack = np.array([labels.index(s) for s in stacks])
    job_ids = list(dict.fromkeys(jobs))
    job = np.array([job_ids.index(j) for j in jobs])
    pos_ids = sorted(set(positions))
    pos = np.array([pos_ids.index(p) for p in positions])
    sizes = np.bincount(job)
    if len(job_ids) < 2 or (sizes >= 2).sum() < 2:
        raise ValueError("variance_components: at least two jobs of two launches or more")
    x0, x1 = _design(job, pos, stack, False), _design(job, pos, stack, True)
    f, ms_b, ms_w, df_b, df_w = _f(y, x0, x1)
    if df_w <= 0 or df_b <= 0:
        raise ValueError("variance_components: too few launches for both mean squares")
    n = len(y)
    n0 = (n - float((sizes ** 2).sum()) / n) / (len(job_ids) - 1)
    tau = math.sqrt(max(0.0, (ms_b - ms_w) / n0))
    _, _, coef = _fit(y, x1)
    eff = np.r_[0.0, coef[2:2 + len(pos_ids) - 1]]
    eff = eff - eff.mean()
    rng = np.random.default_rng(seed)
    cells = [np.nonzero((pos == p) & (stack == s))[0] for p in range(len(pos_ids)) for s in range(len(labels))]
    hits = 0
    for _ in range(permutations):
        perm = job.copy()
        for c in cells:
            perm[c] = perm[rng.permutation(c)]
        hits += _f(y, x0, _design(perm, pos, stack, True))[0] >= f * (1 - 1e-12)
    return Components(math.sqrt(ms_w), tau, tuple(float(x) for x in eff), tuple(pos_ids),
                      float(coef[1]) if len(labels) > 1 else 0.0, len(job_ids), n, f,
                      (1 + hits) / (1 + permutations))
