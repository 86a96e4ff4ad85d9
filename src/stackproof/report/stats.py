"""Statistics for comparing two stacks: medians, spread, and the ratio other/baseline with an exact,
distribution-free confidence interval.

Method (documented in docs/acceptance.md, "Reading the verdict"): Hodges-Lehmann estimate of the
ratio on log values, interval from the Mann-Whitney distribution over the m*n pairwise differences
D(1) <= ... <= D(mn) of log(other) - log(baseline): [D(k), D(mn+1-k)] with the largest k whose exact
coverage 1 - 2 P(U <= k-1) is at least the wanted level. No random numbers: the same data give the same
report. Few repeats cannot reach the level (3 + 3 runs: 90 % at best); the interval is then the widest
one, [D(1), D(mn)], and its real level is printed instead. Below 90 % no interval is given.
The sequential design (Design: looks, Bonferroni-adjusted level, equivalence margin) is documented in
docs/performance.md; the call made from an interval is in verdict.py.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

LEVEL = 0.95          # wanted coverage
MIN_LEVEL = 0.90      # below this no interval is reported (too few repeats)


@dataclass(frozen=True)
class Summary:
    n: int
    median: float
    lo: float       # min
    hi: float       # max
    q1: float
    q3: float


def summarize(values) -> Summary:
    a = np.asarray(values, dtype=float)
    return Summary(len(a), float(np.median(a)), float(a.min()), float(a.max()),
                   float(np.percentile(a, 25)), float(np.percentile(a, 75)))


@lru_cache(maxsize=256)
def _u_cdf(m: int, n: int) -> tuple[float, ...]:
    """Exact null CDF of the Mann-Whitney U statistic for samples of m and n (no ties)."""
    # counts[i][j][u]: arrangements of i x's and j y's with U = u; rolling over i.
    prev = [np.zeros(1, dtype=float) + 1.0 for _ in range(n + 1)]          # i = 0: one arrangement, U = 0
    for i in range(1, m + 1):
        cur = [np.zeros(1, dtype=float) + 1.0]                              # j = 0
        for j in range(1, n + 1):
            a = np.zeros(i * j + 1)
            left = prev[j]                                                  # last element an x: U += j
            a[j:j + len(left)] += left
            below = cur[j - 1]                                              # last element a y
            a[:len(below)] += below
            cur.append(a)
        prev = cur
    counts = prev[n]
    return tuple(np.cumsum(counts) / counts.sum())


def _u_cdf_at(m: int, n: int, u: int) -> float:
    if u < 0:
        return 0.0
    if m * n <= 4000:
        cdf = _u_cdf(m, n)
        return cdf[min(u, len(cdf) - 1)]
    mu, sd = m * n / 2, math.sqrt(m * n * (m + n + 1) / 12)                 # normal approximation
    return 0.5 * (1 + math.erf((u + 0.5 - mu) / (sd * math.sqrt(2))))


def interval_rank(m: int, n: int, level: float = LEVEL) -> tuple[int, float]:
    """(k, coverage) of the interval [D(k), D(mn+1-k)]: the largest k reaching `level`, else k = 1."""
    best = (1, float(1 - 2 * _u_cdf_at(m, n, 0)))
    k = 1
    while k <= (m * n) // 2:
        cov = 1 - 2 * _u_cdf_at(m, n, k - 1)
        if cov < level:
            break
        best = (k, float(cov))
        k += 1
    return best


def ratio_interval(baseline, other, level: float = LEVEL):
    """(ratio, lo, hi, coverage) of other/baseline: Hodges-Lehmann estimate on log values and the exact
    Mann-Whitney interval [D(k), D(mn+1-k)] reaching `level` (coverage below `level` when too few
    values; lo/hi None when even [D(1), D(mn)] is below MIN_LEVEL). None when a value is <= 0."""
    b, o = np.asarray(baseline, dtype=float), np.asarray(other, dtype=float)
    if len(b) == 0 or len(o) == 0 or (b <= 0).any() or (o <= 0).any() or not np.isfinite(np.r_[b, o]).all():
        return None
    k, cov = interval_rank(len(o), len(b), level)
    d = np.sort((np.log(o)[:, None] - np.log(b)[None, :]).ravel())
    ratio = float(np.exp(np.median(d)))
    if cov < min(level, MIN_LEVEL):
        return ratio, None, None, cov
    return ratio, float(np.exp(d[k - 1])), float(np.exp(d[len(d) - k])), cov


@dataclass(frozen=True)
class Design:
    """The sequential design of a stack comparison: pairs of launches (A B, A B, ...) are added in
    looks; at each look every undecided metric's interval is computed at level 1 - alpha/len(looks)
    (Bonferroni over the looks), so that the chance that *any* look of an A/A comparison excludes 1
    stays below alpha whatever the looks decide. A metric stops at the first look where its interval
    excludes 1 (a difference) or lies inside [1/(1+margin), 1+margin] (no difference); after the last
    look it is inconclusive, with its interval."""
    looks: tuple = (5, 7, 10)          # cumulative pairs per stack at each look
    alpha: float = 0.05
    margin: float = 0.05

    @property
    def level(self) -> float:
        return 1.0 - self.alpha / len(self.looks)

    @property
    def min_pairs(self) -> int:
        return self.looks[0]

    @property
    def max_pairs(self) -> int:
        return self.looks[-1]

    def as_dict(self) -> dict:
        return {"looks": list(self.looks), "alpha": self.alpha, "margin": self.margin, "level": self.level}


def design(min_pairs: int = 5, max_pairs: int = 10, n_looks: int = 3, alpha: float = 0.05,
           margin: float = 0.05) -> Design:
    """At most n_looks looks from min_pairs to max_pairs pairs, evenly spaced. The first look must be
    able to reach the Bonferroni-adjusted level at all: 4 + 4 launches never reach 98.3 %."""
    if not 1 <= min_pairs <= max_pairs:
        raise ValueError(f"pairs: need 1 <= min ({min_pairs}) <= max ({max_pairs})")
    if not 0 < alpha < 1 or not 0 < margin < 1:
        raise ValueError("alpha and margin must lie in (0, 1)")
    n = max(1, min(n_looks, max_pairs - min_pairs + 1))
    looks = sorted({round(min_pairs + i * (max_pairs - min_pairs) / max(1, n - 1)) for i in range(n)})
    return Design(tuple(int(x) for x in looks), alpha, margin)


def design_from(d: dict | None) -> Design:
    """The design recorded in a run (report JSON `stackproof.design`); one look at 95 % when absent."""
    if not isinstance(d, dict):
        return Design(looks=(0,), alpha=1 - LEVEL, margin=0.05)
    looks = d.get("looks")
    ok = isinstance(looks, list) and looks and all(isinstance(x, int) and 0 < x < 10_000 for x in looks)
    alpha, margin = d.get("alpha"), d.get("margin")
    if not ok or not all(isinstance(v, (int, float)) and 0 < v < 1 for v in (alpha, margin)):
        raise ValueError("design: looks must be positive integers, alpha and margin in (0, 1)")
    return Design(tuple(looks), float(alpha), float(margin))
