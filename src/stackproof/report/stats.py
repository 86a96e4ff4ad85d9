"""Statistics for comparing two stacks: medians, spread, and the ratio other/baseline with an exact,
distribution-free confidence interval.

Method (documented in docs/acceptance.md, "Reading the verdict"): Hodges-Lehmann estimate of the
ratio on log values, interval from the Mann-Whitney distribution over the m*n pairwise differences
D(1) <= ... <= D(mn) of log(other) - log(baseline): [D(k), D(mn+1-k)] with the largest k whose exact
coverage 1 - 2 P(U <= k-1) is at least 95 %. No random numbers: the same data give the same report.
Few repeats cannot reach 95 % (3 + 3 runs: 90 % at best); the interval is then the widest one,
[D(1), D(mn)], and its real level is printed instead of "95 %". Below 90 % no verdict is called.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

LEVEL = 0.95          # wanted coverage
MIN_LEVEL = 0.90      # below this no interval is reported (too few repeats)

# Direction of a metric: +1 higher is better, -1 lower is better, 0 unknown.
_LOWER_UNITS = {"us", "ms", "s", "ns", "sec", "seconds", "usec"}


def direction(var: str, unit: str | None) -> int:
    v, u = var.lower(), (unit or "").strip().lower()
    if v.startswith(("lat", "time")) or "time" in v or v in ("min", "mean", "max", "std", "noise_fraction"):
        return -1
    if v.startswith(("bw", "fom")) or "fom" in v or "copy" in v or "bandwidth" in v or "flops" in v:
        return +1
    if u in _LOWER_UNITS:
        return -1
    if u.endswith("/s"):
        return +1
    return 0


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


@dataclass(frozen=True)
class Comparison:
    ratio: float | None            # Hodges-Lehmann ratio other/baseline (None: not computable)
    lo: float | None               # interval of the ratio
    hi: float | None
    level: float | None            # the interval's exact coverage
    pct: float | None              # (median other / median baseline - 1) * 100
    verdict: str                   # better | worse | no significant difference | ... (see `verdict`)
    why: str = ""                  # why no verdict could be called


def compare(baseline, other, direction_: int) -> Comparison:
    b, o = np.asarray(baseline, dtype=float), np.asarray(other, dtype=float)
    mb, mo = float(np.median(b)), float(np.median(o))
    pct = 100.0 * (mo - mb) / mb if mb else None
    if (b <= 0).any() or (o <= 0).any():
        return Comparison(mo / mb if mb else None, None, None, None, pct, "no verdict",
                          "values <= 0: a ratio is not defined")
    k, cov = interval_rank(len(o), len(b))
    d = np.sort((np.log(o)[:, None] - np.log(b)[None, :]).ravel())
    ratio = float(np.exp(np.median(d)))
    if cov < MIN_LEVEL:
        return Comparison(ratio, None, None, None, pct, "no verdict",
                          f"too few repeats (n={len(b)} and {len(o)}) for a {100 * MIN_LEVEL:.0f} % interval")
    lo, hi = float(np.exp(d[k - 1])), float(np.exp(d[len(d) - k]))
    return Comparison(ratio, lo, hi, cov, pct, verdict(lo, hi, direction_))


def verdict(lo: float, hi: float, direction_: int) -> str:
    if lo <= 1.0 <= hi:
        return "no significant difference"
    higher = lo > 1.0
    if direction_ == 0:
        return "higher" if higher else "lower"
    return "better" if (higher == (direction_ > 0)) else "worse"
