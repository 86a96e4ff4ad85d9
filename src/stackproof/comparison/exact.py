"""The exact, distribution-free tests of one metric's ratio other / baseline, on log values (no random
numbers: the same data give the same answer). Each test is a rank statistic S over a set of values X
(log differences) whose null distribution is known exactly; the ratio is exp of the median of X
(Hodges-Lehmann), the interval at level 1 - a is [X(k), X(N+1-k)] with the largest k whose coverage
1 - 2 P(S <= k-1) reaches it, and the p-value is the one the intervals imply: with c = min(#X <= 0,
#X >= 0), p = 2 P(S <= c), so the interval at 1 - a excludes 1 exactly when p <= a.

- two samples (`two_sample_test`, TWO): X = every log(other_j) - log(baseline_i), S Mann-Whitney's U;
- pairs (`paired_test`, PAIRS): the per-pair log ratios d_i of launches made one right after the
  other, X their Walsh averages (d_i + d_j) / 2, S Wilcoxon's signed-rank T+;
- blocks (`block_test`, BLOCKS): launches of both stacks inside one job (a block, A B B A), X every
  log(other) - log(baseline) of two launches of the same block, S the sum of the blocks' U: a
  stratified Mann-Whitney test whose null is the convolution of the blocks' own (exact as long as the
  launches of one block are exchangeable; a job's own level cancels);
- `EitherTest`: two of them at once (a within-unit test and two samples), Bonferroni over the two.

Few launches cannot reach small p-values (5 + 5 launches: 2/252; n pairs: 2/2^n; b blocks of 2 + 2:
2/6^b): `min_p` and `within_min_p` say so before a run.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

import numpy as np

LEVEL = 0.95          # the wanted coverage of a single interval
MIN_LEVEL = 0.90      # below this no descriptive interval is reported (too few launches)
TWO, PAIRS, BLOCKS, EITHER = "two samples", "pairs", "blocks", "either"
BLOCK_SHAPE = (2, 2)  # launches of (baseline, other) in one block: A B B A


# ---- exact null distributions -----------------------------------------------------------------

@lru_cache(maxsize=256)
def _u_counts(m: int, n: int) -> tuple[float, ...]:
    """Arrangements of two samples of m and n (no ties) by their Mann-Whitney U = 0..mn."""
    prev = [np.ones(1) for _ in range(n + 1)]                                # i = 0: one arrangement, U = 0
    for i in range(1, m + 1):
        cur = [np.ones(1)]                                                   # j = 0
        for j in range(1, n + 1):
            a = np.zeros(i * j + 1)
            left = prev[j]                                                   # last element an x: U += j
            a[j:j + len(left)] += left
            below = cur[j - 1]                                               # last element a y
            a[:len(below)] += below
            cur.append(a)
        prev = cur
    return tuple(prev[n])


def _u_cdf(m: int, n: int) -> np.ndarray:
    """Null CDF of U over 0..mn: exact up to mn = 4000, the normal approximation beyond."""
    if m * n <= 4000:
        counts = np.asarray(_u_counts(m, n))
        return np.cumsum(counts) / counts.sum()
    mu, sd = m * n / 2, math.sqrt(m * n * (m + n + 1) / 12)
    erf = np.frompyfunc(math.erf, 1, 1)
    return 0.5 * (1 + erf((np.arange(m * n + 1) + 0.5 - mu) / (sd * math.sqrt(2))).astype(float))


@lru_cache(maxsize=256)
def _t_counts(n: int) -> tuple[float, ...]:
    """Sign patterns of n ranks by Wilcoxon's T+ = 0..n(n+1)/2 (no ties, no zeros)."""
    counts = np.zeros(n * (n + 1) // 2 + 1)
    counts[0] = 1.0
    for r in range(1, n + 1):
        counts[r:] = counts[r:] + counts[:-r].copy()
    return tuple(counts)


@lru_cache(maxsize=1024)
def null_cdf(kind: str, sizes: tuple) -> np.ndarray:
    """The null CDF of a test's statistic over 0..N (N = the number of its values): TWO sizes (m, n);
    PAIRS (n,); BLOCKS ((m_1, n_1), (m_2, n_2), ...), the blocks' U added up (a convolution)."""
    if kind == TWO:
        return _u_cdf(*sizes)
    if kind == PAIRS:
        counts = np.asarray(_t_counts(sizes[0]))
        return np.cumsum(counts) / counts.sum()
    if kind == BLOCKS:
        pmf = np.ones(1)
        for m, n in sizes:
            pmf = np.convolve(pmf, np.diff(np.r_[0.0, _u_cdf(m, n)]))
        return np.cumsum(pmf) / pmf.sum()
    raise ValueError(f"test {kind!r}: one of {TWO}, {PAIRS}, {BLOCKS}")


def _rank_from(cdf: np.ndarray, level: float) -> tuple[int, float]:
    """The largest k whose interval [X(k), X(N+1-k)] covers 1 - 2 P(S <= k-1) >= level under the
    statistic's null CDF (the part an interval can use), else k = 1 with its (lower) coverage."""
    k = max(1, int(np.count_nonzero(1 - 2 * cdf >= level)))
    return k, float(1 - 2 * cdf[k - 1])


def _usable(kind: str, cdf: np.ndarray, n_values: int) -> np.ndarray:
    return cdf[:max(1, len(cdf) // 2)] if kind == PAIRS else cdf[:max(1, n_values // 2)]


def interval_rank(m: int, n: int, level: float = LEVEL) -> tuple[int, float]:
    """(k, coverage) of the two-sample interval [D(k), D(mn+1-k)]: the largest k reaching `level`."""
    return _rank_from(_usable(TWO, null_cdf(TWO, (m, n)), m * n), level)


def signed_rank_rank(n: int, level: float = LEVEL) -> tuple[int, float]:
    """(k, coverage) of the interval [W(k), W(N+1-k)] over the N = n(n+1)/2 Walsh averages: the largest
    k reaching `level`, else k = 1 with its (lower) coverage. 6 pairs reach 96.9 % at best, 7 98.4 %."""
    if n < 1:
        return 1, 0.0
    return _rank_from(_usable(PAIRS, null_cdf(PAIRS, (n,)), 0), level)


def min_p(n_baseline: int, n_other: int, paired: bool = False) -> float:
    """The smallest two-sided p-value the exact test can give (all of one stack's launches beyond the
    other's): m + n launches 2 / C(m + n, n) (5 + 5: 2/252), n pairs 2/2^n."""
    if paired:
        return min(1.0, 2 * 0.5 ** n_baseline) if n_baseline >= 1 else 1.0
    if not (n_baseline and n_other):
        return 1.0
    m, n = n_baseline, n_other          # 2 / C(m + n, n), through log-gamma (C(2 x 5000, 5000) has 3000 digits)
    return min(1.0, 2 * math.exp(math.lgamma(m + 1) + math.lgamma(n + 1) - math.lgamma(m + n + 1)))


def within_min_p(n: int, blocks: bool) -> float:
    """The smallest p of the within-unit test at n launches per stack: n // 2 blocks of 2 + 2 (2/6^b),
    or n pairs (2/2^n)."""
    if not blocks:
        return min_p(n, n, paired=True)
    b = n // 2
    return min(1.0, 2 / math.comb(sum(BLOCK_SHAPE), BLOCK_SHAPE[0]) ** b) if b else 1.0


# ---- one metric -------------------------------------------------------------------------------

@dataclass(frozen=True)
class RatioTest:
    """The exact test of the ratio other / baseline of one metric: its kind (TWO, PAIRS, BLOCKS), the
    launches behind it, its sorted values X (log scale), the sizes its null distribution depends on,
    the Hodges-Lehmann ratio and the launches' spread."""
    kind: str
    n: tuple[int, int]                     # launches (baseline, other); pairs: (pairs, pairs)
    values: np.ndarray = field(repr=False)  # sorted X (log scale)
    sizes: tuple = ()                      # what null_cdf needs
    ratio: float = 1.0                     # Hodges-Lehmann estimate of other / baseline
    diffs: np.ndarray | None = field(default=None, repr=False)   # differences of one launch of each stack

    @property
    def paired(self) -> bool:
        return self.kind == PAIRS

    @cached_property
    def spread(self) -> float:
        """One launch's spread on log values (robust, see _spread)."""
        return _spread(self.values if self.diffs is None else self.diffs)

    @cached_property
    def _cdf(self) -> np.ndarray:
        return null_cdf(self.kind, self.sizes)

    def rank(self, level: float) -> tuple[int, float]:
        return _rank_from(_usable(self.kind, self._cdf, len(self.values)), level)

    def interval(self, level: float, strict: bool = False) -> tuple[float | None, float | None, float]:
        """(lo, hi, exact coverage) of the ratio at `level`. Descriptive (default): lo, hi None only when
        even the widest interval [X(1), X(N)] covers less than min(level, MIN_LEVEL); strict: None
        unless the coverage reaches `level` (the interval a call rests on: at a level the launches
        cannot reach, every ratio is left open)."""
        k, cov = self.rank(level)
        if cov < (level * (1 - 1e-12) if strict else min(level, MIN_LEVEL)):
            return None, None, cov
        return float(np.exp(self.values[k - 1])), float(np.exp(self.values[len(self.values) - k])), cov

    @cached_property
    def p(self) -> float:
        """Two-sided exact p-value of ratio = 1, the one the intervals imply (ties at 0 count against
        a call)."""
        x = self.values
        c = int(min(np.count_nonzero(x <= 0), np.count_nonzero(x >= 0)))
        return float(min(1.0, 2 * self._cdf[min(c, len(self._cdf) - 1)]))

    @property
    def min_p(self) -> float:
        return float(min(1.0, 2 * self._cdf[0]))


@dataclass(frozen=True)
class EitherTest:
    """Two exact tests of one metric at once (a within-unit test, pairs or blocks, and two samples),
    Bonferroni over the two: p = 2 min(p_within, p_two); the interval printed is the one of the test
    with the smaller p at 1 - (1 - level) / 2, and the level printed is what picking it after the fact
    guarantees, 1 - (the two intervals' non-coverage added up). The within-unit test cancels the
    host's slow spells and a job's own level; two samples reach smaller p-values with few launches;
    this takes whichever the data favour, for a factor 2 in alpha."""
    within: RatioTest
    two: RatioTest
    kind: str = EITHER

    @property
    def chosen(self) -> RatioTest:
        return self.within if self.within.p <= self.two.p else self.two

    @property
    def paired(self) -> bool:
        return self.chosen.paired

    @property
    def n(self) -> tuple[int, int]:
        return self.chosen.n

    @property
    def ratio(self) -> float:
        return self.chosen.ratio

    @property
    def spread(self) -> float:
        return self.chosen.spread

    @property
    def p(self) -> float:
        return min(1.0, 2 * min(self.within.p, self.two.p))

    @property
    def min_p(self) -> float:
        return min(1.0, 2 * min(self.within.min_p, self.two.min_p))

    def interval(self, level: float, strict: bool = False):
        half = 1 - (1 - level) / 2
        other = self.two if self.chosen is self.within else self.within
        got = [iv for iv in (self.chosen.interval(half, strict=True), other.interval(half, strict=True))
               if iv[0] is not None]
        if not got:
            if strict:
                return None, None, 1 - 2 * (1 - self.chosen.rank(half)[1])
            lo, hi, cov = self.chosen.interval(half)
            return lo, hi, 1 - 2 * (1 - cov)
        return got[0][0], got[0][1], 1 - sum(1 - iv[2] for iv in got)


def _clean(values) -> np.ndarray | None:
    a = np.asarray(values, dtype=float)
    if len(a) == 0 or not np.isfinite(a).all() or (a <= 0).any():
        return None
    return a


def _spread(diffs: np.ndarray) -> float:
    """One launch's spread on log values from differences between one launch of each stack (each
    difference varies by sqrt 2 of it): 1.4826 x their median absolute deviation / sqrt 2."""
    return float(1.4826 * np.median(np.abs(diffs - np.median(diffs))) / math.sqrt(2)) if len(diffs) else 0.0


def _sorted_median(x: np.ndarray) -> float:
    """exp of the median of sorted log values (the Hodges-Lehmann ratio)."""
    h = len(x) // 2
    return float(np.exp(x[h] if len(x) % 2 else (x[h - 1] + x[h]) / 2))


def two_sample_test(baseline, other) -> RatioTest | None:
    """The Mann-Whitney test of other / baseline; None when a sample is empty or a value <= 0 or not
    finite (a ratio is not defined)."""
    b, o = _clean(baseline), _clean(other)
    if b is None or o is None:
        return None
    d = np.sort((np.log(o)[:, None] - np.log(b)[None, :]).ravel())
    return RatioTest(TWO, (len(b), len(o)), d, (len(o), len(b)), _sorted_median(d))


def paired_test(baseline, other) -> RatioTest | None:
    """The Wilcoxon signed-rank test of other / baseline over pairs (baseline[i], other[i]) launched one
    after the other: a slow spell covering both launches of a pair cancels in its ratio. Valid when
    the per-pair log ratios are symmetric about the true one (pairs alternating their order, A B,
    B A, give it under A/A, an order effect included). None as two_sample_test, or lengths differ."""
    b, o = _clean(baseline), _clean(other)
    if b is None or o is None or len(b) != len(o):
        return None
    d = np.log(o) - np.log(b)
    i, j = np.triu_indices(len(d))
    w = np.sort((d[i] + d[j]) / 2)
    return RatioTest(PAIRS, (len(b), len(b)), w, (len(b),), _sorted_median(w), d)


def block_test(baseline, other, baseline_blocks, other_blocks) -> RatioTest | None:
    """The stratified Mann-Whitney test of other / baseline over blocks (launches of both stacks inside
    one job): only differences between launches of the same block count, so a job's own level
    cancels; the null distribution is the convolution of each block's own (exact when the launches of a
    block are exchangeable under no difference; a block's A B B A order, reversed in the next block,
    makes a position effect cancel over two blocks). Blocks holding one stack only are left out. None
    as two_sample_test, when a block index is missing, or when no block holds both stacks."""
    b, o = _clean(baseline), _clean(other)
    if b is None or o is None or baseline_blocks is None or other_blocks is None \
            or len(baseline_blocks) != len(b) or len(other_blocks) != len(o) \
            or any(not isinstance(x, int) or isinstance(x, bool) for x in (*baseline_blocks, *other_blocks)):
        return None
    lb, lo = np.log(b), np.log(o)
    bb, ob = np.asarray(baseline_blocks), np.asarray(other_blocks)
    diffs, sizes, n_b, n_o = [], [], 0, 0
    for blk in sorted(set(bb.tolist()) & set(ob.tolist())):
        x, y = lb[bb == blk], lo[ob == blk]
        diffs.append((y[:, None] - x[None, :]).ravel())
        sizes.append((len(y), len(x)))
        n_b, n_o = n_b + len(x), n_o + len(y)
    if not diffs:
        return None
    d = np.sort(np.concatenate(diffs))
    return RatioTest(BLOCKS, (n_b, n_o), d, tuple(sorted(sizes)), _sorted_median(d))


def ratio_interval(baseline, other, level: float = LEVEL):
    """(ratio, lo, hi, coverage) of other / baseline, two samples; lo/hi None below MIN_LEVEL; None
    when a ratio is not defined."""
    t = two_sample_test(baseline, other)
    return None if t is None else (t.ratio, *t.interval(level))


def paired_ratio_interval(baseline, other, level: float = LEVEL):
    """(ratio, lo, hi, coverage) of other / baseline over pairs; conventions of ratio_interval."""
    t = paired_test(baseline, other)
    return None if t is None else (t.ratio, *t.interval(level))
