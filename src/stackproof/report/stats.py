"""Statistics for comparing two stacks: medians, spread, and the ratio other/baseline with an exact,
distribution-free confidence interval.

Two samples (documented in docs/acceptance.md, "Reading the verdict"): Hodges-Lehmann estimate of the
ratio on log values, interval from the Mann-Whitney distribution over the m*n pairwise differences
D(1) <= ... <= D(mn) of log(other) - log(baseline): [D(k), D(mn+1-k)] with the largest k whose exact
coverage 1 - 2 P(U <= k-1) is at least the wanted level. Few repeats cannot reach the level (3 + 3
runs: 90 % at best); the interval is then the widest one, [D(1), D(mn)], and its real level is printed
instead. Below 90 % no interval is given.
Pairs (paired_ratio_interval, what `make acceptance` uses): the launches of the two stacks made one
after the other (A B, A B, ...) are analysed by the log ratio of each pair, d_i, so that whatever the
host does to both launches of a pair (a slow spell of tens of seconds) cancels: Hodges-Lehmann
estimate over the Walsh averages (d_i + d_j) / 2 and the exact Wilcoxon signed-rank interval.
No random numbers: the same data give the same report.
The sequential design (Design: looks, their levels, equivalence margin) is documented in
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
    return _widest_rank(lambda u: _u_cdf_at(m, n, u), (m * n) // 2, level)


def _widest_rank(null_cdf, k_max: int, level: float) -> tuple[int, float]:
    """The largest k <= k_max whose interval [X(k), X(N+1-k)] covers 1 - 2 P(S <= k-1) >= level under
    the statistic's null CDF, else k = 1 with its (lower) coverage: shared by both exact intervals."""
    best, k = (1, float(1 - 2 * null_cdf(0))), 1
    while k <= k_max:
        cov = 1 - 2 * null_cdf(k - 1)
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


@lru_cache(maxsize=256)
def _t_cdf(n: int) -> tuple[float, ...]:
    """Exact null CDF of the Wilcoxon signed-rank statistic T+ for n pairs (no ties, no zeros): each
    rank 1..n is positive with probability 1/2, independently."""
    counts = np.zeros(n * (n + 1) // 2 + 1)
    counts[0] = 1.0
    for r in range(1, n + 1):
        counts[r:] = counts[r:] + counts[:-r].copy()
    return tuple(np.cumsum(counts) / counts.sum())


def signed_rank_rank(n: int, level: float = LEVEL) -> tuple[int, float]:
    """(k, coverage) of the interval [W(k), W(N+1-k)] over the N = n(n+1)/2 Walsh averages: the largest
    k reaching `level`, else k = 1 with its (lower) coverage. 6 pairs reach 96.9 % at best, 7 98.4 %."""
    if n < 1:
        return 1, 0.0
    cdf = _t_cdf(n)
    return _widest_rank(cdf.__getitem__, len(cdf) // 2, level)


def paired_ratio_interval(baseline, other, level: float = LEVEL):
    """(ratio, lo, hi, coverage) of other/baseline from pairs (baseline[i], other[i]) launched one after
    the other: the Hodges-Lehmann estimate of the per-pair log ratios d_i (median of the Walsh averages
    (d_i + d_j) / 2, i <= j) and the exact Wilcoxon signed-rank interval [W(k), W(N+1-k)]. A slow
    spell of the host that covers both launches of a pair cancels in d_i. Valid when d_i is symmetric
    about the true log ratio: an A/A comparison whose pairs alternate their order (A B, B A, ...) has
    it by construction, an order effect included. Same conventions as ratio_interval."""
    b, o = np.asarray(baseline, dtype=float), np.asarray(other, dtype=float)
    if len(b) == 0 or len(b) != len(o) or (b <= 0).any() or (o <= 0).any() or not np.isfinite(np.r_[b, o]).all():
        return None
    d = np.log(o) - np.log(b)
    i, j = np.triu_indices(len(d))
    w = np.sort((d[i] + d[j]) / 2)
    k, cov = signed_rank_rank(len(d), level)
    ratio = float(np.exp(np.median(w)))
    if cov < min(level, MIN_LEVEL):
        return ratio, None, None, cov
    return ratio, float(np.exp(w[k - 1])), float(np.exp(w[len(w) - k])), cov


@dataclass(frozen=True)
class Design:
    """The sequential design of a stack comparison: pairs of launches (A B, B A, ...) are added in
    looks; at each look every undecided metric gets an interval at that look's level, and stops at
    the first look where its interval excludes 1 (a difference) or lies inside [1/(1+margin),
    1+margin] (no difference); after the last look it is inconclusive, with its interval.

    Coverage over the looks (Bonferroni): the looks' alphas (1 - level) add up to at most `alpha`, so
    the chance that *any* look of an A/A comparison excludes 1 stays below alpha whatever the looks
    decide, and whichever interval each look uses. Look j may use (alpha - spent) / (looks left) and
    spends 1 - the exact coverage of the widest interval reaching that at its pairs:
    paired=False: two samples (Mann-Whitney) at every look;
    paired=True: the per-pair ratios (signed-rank) wherever the look's pairs can reach its share, two
    samples at a look with too few pairs for that (5 pairs reach 93.8 % at best pair by pair, 98.4 %
    as 5 + 5 launches). A look that reaches its share neither way calls nothing (design() refuses
    such a first look)."""
    looks: tuple = (5, 8, 10)          # cumulative pairs per stack at each look
    alpha: float = 0.05
    margin: float = 0.05
    paired: bool = False

    @property
    def plan(self) -> tuple:
        """(paired, level) per look; level None: that look cannot make a call."""
        if self.looks == (0,):
            return ((False, 1.0 - self.alpha),)
        out, spent = [], 0.0
        for j, n in enumerate(self.looks):
            allowed = (self.alpha - spent) / (len(self.looks) - j)
            step = (False, None)
            for paired in ((True, False) if self.paired else (False,)):
                cov = (signed_rank_rank(n, 1.0 - allowed) if paired else interval_rank(n, n, 1.0 - allowed))[1]
                if cov >= 1.0 - allowed:
                    step = (paired, cov)
                    spent += 1.0 - cov
                    break
            out.append(step)
        return tuple(out)

    @property
    def levels(self) -> tuple:
        """Each look's level (None: that look cannot make a call)."""
        return tuple(level for _, level in self.plan)

    @property
    def level(self) -> float:
        """The lowest level of the looks that can call (what the report prints as the interval's level)."""
        return min((x for x in self.levels if x is not None), default=1.0 - self.alpha)

    @property
    def min_pairs(self) -> int:
        return self.looks[0]

    @property
    def max_pairs(self) -> int:
        return self.looks[-1]

    def as_dict(self) -> dict:
        return {"looks": list(self.looks), "alpha": self.alpha, "margin": self.margin, "level": self.level,
                "levels": list(self.levels), "paired": self.paired,
                "pairs_at": [p for p, _ in self.plan]}


def design(min_pairs: int = 5, max_pairs: int = 10, n_looks: int = 3, alpha: float = 0.05,
           margin: float = 0.05, paired: bool = True) -> Design:
    """At most n_looks looks from min_pairs to max_pairs pairs, evenly spaced. With several looks the
    first must be able to make a call at its level (4 + 4 launches never reach 98.3 %); a single look
    that cannot reach 1 - alpha (3 pairs: 90 % at best) is judged at the level its launches reach,
    which the report prints beside the interval."""
    if not 1 <= min_pairs <= max_pairs:
        raise ValueError(f"pairs: need 1 <= min ({min_pairs}) <= max ({max_pairs})")
    if not 0 < alpha < 1 or not 0 < margin < 1:
        raise ValueError("alpha and margin must lie in (0, 1)")
    n = max(1, min(n_looks, max_pairs - min_pairs + 1))
    looks = sorted({round(min_pairs + i * (max_pairs - min_pairs) / max(1, n - 1)) for i in range(n)})
    d = Design(tuple(int(x) for x in looks), alpha, margin, paired)
    if len(d.looks) > 1 and d.levels[0] is None:
        share = alpha / len(d.looks)
        need = next(m for m in range(1, 64) if interval_rank(m, m, 1 - share)[1] >= 1 - share)
        raise ValueError(f"{min_pairs} pairs cannot reach the first look's level {100 * (1 - share):.1f} %: "
                         f"at least {need} pairs (or fewer looks)")
    return d


def design_from(d: dict | None) -> Design:
    """The design recorded in a run (report JSON `stackproof.design`); one look at 95 % when absent.
    A record without `paired` (written before pairs were analysed) is read as two samples."""
    if not isinstance(d, dict):
        return Design(looks=(0,), alpha=1 - LEVEL, margin=0.05)
    looks = d.get("looks")
    ok = isinstance(looks, list) and looks and all(isinstance(x, int) and 0 < x < 10_000 for x in looks)
    alpha, margin, paired = d.get("alpha"), d.get("margin"), d.get("paired", False)
    if not ok or not all(isinstance(v, (int, float)) and 0 < v < 1 for v in (alpha, margin)):
        raise ValueError("design: looks must be positive integers, alpha and margin in (0, 1)")
    if not isinstance(paired, bool):
        raise ValueError("design: paired must be true or false")
    return Design(tuple(looks), float(alpha), float(margin), paired)
