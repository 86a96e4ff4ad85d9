"""Comparing two sets of launches, many metrics at once: the statistical engine on plain numbers (no
report, no ReFrame), for the stack verdict (report/verdict.py) and the profile comparison of the
noise package.

One metric: the ratio other / baseline, estimated by Hodges-Lehmann on log values, with an exact,
distribution-free test and interval (no random numbers: the same data give the same answer):
- two samples (`two_sample_test`): the m*n differences D = log(other_j) - log(baseline_i), the
  interval [D(k), D(mn+1-k)] with the Mann-Whitney null distribution;
- pairs (`paired_test`): per-pair log ratios d_i of launches made one right after the other, the
  Walsh averages (d_i + d_j) / 2, the interval [W(k), W(N+1-k)] with the Wilcoxon signed-rank null.
Each test's p-value is the one its intervals imply: the interval at level 1 - a excludes 1 exactly
when p <= a, so a call and the interval printed beside it never disagree. Few launches cannot reach
small p-values (5 + 5 launches: 2/252 = 0.0079; n pairs: 2/2^n), and `min_p` says so before a run.

Many metrics (`family_levels`): the chance that two identical stacks get *any* better / worse call
is what a reader of a whole report needs bounded. Each look (below) runs a family rule over all the
metrics of the comparison at that look's alpha: Benjamini-Hochberg (`bh`, the default; under the
global null of an A/A comparison the chance of any call is at most alpha, and with real differences
at most alpha of the calls are expected false) or Holm (`holm`, family-wise under any configuration,
less power). Both are weighted: headline metrics share `headline_share` of the alpha, the secondary
ones the rest, so a center's few headline numbers are not diluted by many secondary ones. A metric
gets its own level 1 - a_i from the rule (its interval is printed at it).

Looks (`Design`, `sequential_calls`): pairs of launches are added in a few looks; at look j every
metric still open is tested with alpha_j (the looks' alphas add up to alpha: a union bound over the
looks, valid whatever earlier looks decided), and stops at the first look that calls it better /
worse (the family rule) or *no difference* (its equivalence interval, a two one-sided test at
alpha_j: the interval at 1 - 2 alpha_j inside [1/(1+margin), 1+margin]); after the last look it is
inconclusive, and says the largest difference its interval leaves open ("no difference larger than
12 % seen"). Metrics decided different at an earlier look count as rejected at later ones, the ones
decided "no difference" as not rejected; under the global null the first case never happens before
a false call, so the bound holds. The design and its simulation: docs/performance.md.

May import: nothing of stackproof (a basic module).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from typing import Sequence

import numpy as np

LEVEL = 0.95          # the wanted coverage of a single interval
MIN_LEVEL = 0.90      # below this no interval is reported (too few launches)
ALPHA = 0.05          # the chance of any false better / worse call over a whole comparison
MARGIN = 0.05         # default equivalence margin: no difference within +-5 %
HEADLINE_SHARE = 0.8  # the part of alpha the headline metrics share (the rest: secondary metrics)
FIRST_LOOK_SHARE = 0.8  # the part of alpha the first look uses (the later looks share the rest)
RULES = ("bh", "holm")

TWO, PAIRS, EITHER = "two samples", "pairs", "either"
BETTER, WORSE, SAME, INCONCLUSIVE, NO_VERDICT = "better", "worse", "no difference", "inconclusive", "no verdict"
HIGHER, LOWER = "higher", "lower"


# ---- exact null distributions -----------------------------------------------------------------

@lru_cache(maxsize=256)
def _u_cdf(m: int, n: int) -> tuple[float, ...]:
    """Exact null CDF of the Mann-Whitney U statistic for samples of m and n (no ties)."""
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


@lru_cache(maxsize=256)
def _t_cdf(n: int) -> tuple[float, ...]:
    """Exact null CDF of the Wilcoxon signed-rank statistic T+ for n pairs (no ties, no zeros): each
    rank 1..n is positive with probability 1/2, independently."""
    counts = np.zeros(n * (n + 1) // 2 + 1)
    counts[0] = 1.0
    for r in range(1, n + 1):
        counts[r:] = counts[r:] + counts[:-r].copy()
    return tuple(np.cumsum(counts) / counts.sum())


@lru_cache(maxsize=512)
def _null_cdf(paired: bool, m: int, n: int) -> np.ndarray:
    """The null CDF of the rank statistic as an array over 0..N//2 (the ranks an interval can use)."""
    if paired:
        cdf = np.asarray(_t_cdf(m))
        return cdf[:max(1, len(cdf) // 2)]
    return np.array([_u_cdf_at(m, n, u) for u in range(max(1, (m * n) // 2))])


def _rank_from(cdf: np.ndarray, level: float) -> tuple[int, float]:
    """The largest k whose interval [X(k), X(N+1-k)] covers 1 - 2 P(S <= k-1) >= level under the
    statistic's null CDF (cached as an array), else k = 1 with its (lower) coverage."""
    k = int(np.count_nonzero(1 - 2 * cdf >= level))
    k = max(1, k)
    return k, float(1 - 2 * cdf[k - 1])


def interval_rank(m: int, n: int, level: float = LEVEL) -> tuple[int, float]:
    """(k, coverage) of the two-sample interval [D(k), D(mn+1-k)]: the largest k reaching `level`."""
    return _rank_from(_null_cdf(False, m, n), level)


def signed_rank_rank(n: int, level: float = LEVEL) -> tuple[int, float]:
    """(k, coverage) of the interval [W(k), W(N+1-k)] over the N = n(n+1)/2 Walsh averages: the largest
    k reaching `level`, else k = 1 with its (lower) coverage. 6 pairs reach 96.9 % at best, 7 98.4 %."""
    if n < 1:
        return 1, 0.0
    return _rank_from(_null_cdf(True, n, n), level)


def min_p(n_baseline: int, n_other: int, paired: bool = False) -> float:
    """The smallest two-sided p-value the exact test can give (all of one stack's launches beyond the
    other's): 5 + 5 launches 2/252, n pairs 2/2^n."""
    if paired:
        return min(1.0, 2 * _t_cdf(n_baseline)[0]) if n_baseline >= 1 else 1.0
    return min(1.0, 2 * _u_cdf_at(n_other, n_baseline, 0)) if n_baseline and n_other else 1.0


# ---- one metric -------------------------------------------------------------------------------

@dataclass(frozen=True)
class RatioTest:
    """The exact test of the ratio other / baseline of one metric: sorted log differences (two samples)
    or Walsh averages (pairs), the null CDF of the rank statistic, and what both give."""
    paired: bool
    n: tuple[int, int]                     # launches (baseline, other); pairs: (pairs, pairs)
    values: np.ndarray = field(repr=False)  # sorted D or W (log scale)
    ratio: float                           # Hodges-Lehmann estimate of other / baseline

    def _cdf(self, s: int) -> float:
        if self.paired:
            cdf = _t_cdf(self.n[0])
            return cdf[min(s, len(cdf) - 1)]
        return _u_cdf_at(self.n[1], self.n[0], s)

    def rank(self, level: float) -> tuple[int, float]:
        return signed_rank_rank(self.n[0], level) if self.paired else interval_rank(self.n[1], self.n[0], level)

    def interval(self, level: float) -> tuple[float | None, float | None, float]:
        """(lo, hi, exact coverage) of the ratio at `level`; lo, hi None when even the widest interval
        [X(1), X(N)] covers less than min(level, MIN_LEVEL) (too few launches)."""
        k, cov = self.rank(level)
        if cov < min(level, MIN_LEVEL):
            return None, None, cov
        return float(np.exp(self.values[k - 1])), float(np.exp(self.values[len(self.values) - k])), cov

    @cached_property
    def p(self) -> float:
        """Two-sided exact p-value of ratio = 1, the one the intervals imply: with c = min(#X <= 0,
        #X >= 0), the interval of rank k excludes 1 iff k > c, and its level is 1 - 2 P(S <= k-1), so
        p = 2 P(S <= c) (ties at 0 count against a call)."""
        x = self.values
        c = int(min(np.count_nonzero(x <= 0), np.count_nonzero(x >= 0)))
        return float(min(1.0, 2 * self._cdf(c)))

    @property
    def min_p(self) -> float:
        return min_p(self.n[0], self.n[1], self.paired)


@dataclass(frozen=True)
class EitherTest:
    """Both exact tests of one metric at once, Bonferroni over the two: p = 2 min(p_pairs, p_two), the
    interval of the test with the smaller p at 1 - (1 - level) / 2 (both intervals at that level hold
    together with the wanted coverage, so picking one after the fact keeps it). Pairs cancel the
    host's slow spells; two samples reach smaller p-values with few launches; this takes whichever
    the data favour, for a factor 2 in alpha."""
    pairs: RatioTest
    two: RatioTest

    @property
    def chosen(self) -> RatioTest:
        return self.pairs if self.pairs.p <= self.two.p else self.two

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
    def p(self) -> float:
        return min(1.0, 2 * min(self.pairs.p, self.two.p))

    @property
    def min_p(self) -> float:
        return min(1.0, 2 * min(self.pairs.min_p, self.two.min_p))

    def interval(self, level: float):
        return self.chosen.interval(1 - (1 - level) / 2)


def _clean(values) -> np.ndarray | None:
    a = np.asarray(values, dtype=float)
    if len(a) == 0 or not np.isfinite(a).all() or (a <= 0).any():
        return None
    return a


def two_sample_test(baseline, other) -> RatioTest | None:
    """The Mann-Whitney test of other / baseline; None when a sample is empty or a value <= 0 or not
    finite (a ratio is not defined)."""
    b, o = _clean(baseline), _clean(other)
    if b is None or o is None:
        return None
    d = np.sort((np.log(o)[:, None] - np.log(b)[None, :]).ravel())
    return RatioTest(False, (len(b), len(o)), d, _sorted_median(d))


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
    return RatioTest(True, (len(b), len(b)), w, _sorted_median(w))


def _sorted_median(x: np.ndarray) -> float:
    """exp of the median of sorted log values (the Hodges-Lehmann ratio)."""
    h = len(x) // 2
    return float(np.exp(x[h] if len(x) % 2 else (x[h - 1] + x[h]) / 2))


def ratio_interval(baseline, other, level: float = LEVEL):
    """(ratio, lo, hi, coverage) of other / baseline, two samples; lo/hi None below MIN_LEVEL; None
    when a ratio is not defined."""
    t = two_sample_test(baseline, other)
    return None if t is None else (t.ratio, *t.interval(level))


def paired_ratio_interval(baseline, other, level: float = LEVEL):
    """(ratio, lo, hi, coverage) of other / baseline over pairs; conventions of ratio_interval."""
    t = paired_test(baseline, other)
    return None if t is None else (t.ratio, *t.interval(level))


def call_from(lo: float, hi: float, better: str | None, margin: float, different: bool) -> str:
    """The call: a difference (`different`, the interval excludes 1) in the declared direction (better
    / worse; higher / lower without one), else no difference when [lo, hi] lies inside the margin,
    else inconclusive."""
    if different:
        higher = lo > 1.0
        if better not in (HIGHER, LOWER):
            return HIGHER if higher else LOWER
        return BETTER if higher == (better == HIGHER) else WORSE
    if 1.0 / (1.0 + margin) <= lo and hi <= 1.0 + margin:
        return SAME
    return INCONCLUSIVE


def largest_open(lo: float, hi: float) -> float:
    """The largest difference an interval leaves open, as a fraction: max(hi, 1/lo) - 1 (an interval
    [0.9, 1.08] has seen no difference larger than 11 %)."""
    return float(max(hi, 1.0 / lo) - 1.0)


# ---- many metrics -----------------------------------------------------------------------------

def headline_weights(headline: Sequence[bool], share: float = HEADLINE_SHARE) -> list[float]:
    """Weights (mean 1) of the family rule: the headline metrics share `share` of alpha, the secondary
    ones the rest; all 1 when one of the groups is empty."""
    m, h = len(headline), sum(bool(x) for x in headline)
    if h in (0, m):
        return [1.0] * m
    return [share * m / h if x else (1 - share) * m / (m - h) for x in headline]


def family_levels(pvalues: Sequence[float], alpha: float, weights: Sequence[float] | None = None,
                  rule: str = "bh") -> list[float]:
    """Each hypothesis' alpha a_i under the family rule at `alpha`: hypothesis i is rejected iff p_i <= a_i,
    and its interval at 1 - a_i excludes 1 exactly then.

    bh (weighted Benjamini-Hochberg, step-up): R = max{k : the k-th smallest p_i / w_i <= k alpha / m},
    a_i = w_i max(R, 1) alpha / m (the non-rejected get the level of the rejected ones' intervals, the
    false-coverage-rate adjustment of Benjamini & Yekutieli 2005, or Bonferroni's when none is).
    holm (weighted Holm, step-down): in increasing p_i / w_i, reject while p_i <= w_i alpha / (sum of
    the weights not yet rejected); a_i = w_i alpha / (that sum at i's step, or at the stop)."""
    p = np.asarray(pvalues, dtype=float)
    m = len(p)
    if m == 0:
        return []
    w = np.ones(m) if weights is None else np.asarray(weights, dtype=float)
    if len(w) != m or (w <= 0).any():
        raise ValueError("family_levels: one positive weight per p-value")
    w = w * m / w.sum()
    order = np.argsort(p / w, kind="stable")
    if rule == "bh":
        scaled = (p / w)[order]
        ok = np.nonzero(scaled <= np.arange(1, m + 1) * alpha / m * (1 + 1e-12))[0]
        r = int(ok[-1]) + 1 if len(ok) else 0
        return [float(x) for x in w * max(r, 1) * alpha / m]
    if rule == "holm":
        out, left = np.empty(m), float(w.sum())
        stopped = None
        for i in order:
            if stopped is None and p[i] <= w[i] * alpha / left * (1 + 1e-12):
                out[i] = w[i] * alpha / left
                left -= w[i]
            else:
                stopped = left if stopped is None else stopped
                out[i] = w[i] * alpha / stopped
        return [float(x) for x in out]
    raise ValueError(f"family rule {rule!r}: one of {', '.join(RULES)}")


# ---- the sequential comparison ----------------------------------------------------------------

@dataclass(frozen=True)
class Design:
    """The sequential design of a comparison: pairs of launches (A B, B A, ...) are added in looks,
    `looks` the cumulative pairs per stack at each; `spend` the part of alpha each look uses (80 % to
    the first look by default, see alphas). The test at each look (`plan`): two samples (Mann-Whitney) by default; with
    `paired`, pairs (signed-rank) at a look whose pairs can reach its alpha (few pairs reach little
    pair by pair: 8 pairs 2/256 at best, where 8 + 8 launches reach 2/12870); with `either`, both
    tests at half the alpha each (EitherTest) where the pairs can reach that. looks == (0,): one look
    over every launch (two samples), as for sessions that were not launched in pairs."""
    looks: tuple = (5, 8, 10)
    alpha: float = ALPHA
    margin: float = MARGIN
    paired: bool = False
    rule: str = "bh"
    headline_share: float = HEADLINE_SHARE
    spend: tuple | None = None
    either: bool = False
    ran: int | None = None          # looks that ran (None: all): later looks' alphas stay unspent

    @property
    def schedule(self) -> tuple:
        """(pairs, test, alpha_j) of each look that ran."""
        return tuple((n, kind, a) for n, (kind, a) in zip(self.looks, self.plan))[:self.ran]

    @property
    def alphas(self) -> tuple:
        """alpha_j of each look (they add up to alpha). By default the first look gets FIRST_LOOK_SHARE
        (80 %) and the later ones share the rest equally: the first look is the one every run makes (a
        10-minute run on a 2-core host makes no other: docs/performance.md) and its 5 + 5 launches reach
        only p = 2/252, where 8 + 8 reach 2/12870, far below even 0.5 % shared among the metrics."""
        n = len(self.looks)
        if self.spend:
            parts = self.spend
        elif n > 1:
            parts = (FIRST_LOOK_SHARE,) + ((1 - FIRST_LOOK_SHARE) / (n - 1),) * (n - 1)
        else:
            parts = (1.0,)
        total = float(sum(parts))
        return tuple(self.alpha * x / total for x in parts)

    @property
    def plan(self) -> tuple:
        """(test, alpha_j) per look, test one of TWO, PAIRS, EITHER (see the class text)."""
        out = []
        for n, a in zip(self.looks, self.alphas):
            kind = TWO
            if self.either and n and 2 * min_p(n, n, True) <= a:
                kind = EITHER
            elif self.paired and n and min_p(n, n, True) <= a:
                kind = PAIRS
            out.append((kind, a))
        return tuple(out)

    @property
    def min_pairs(self) -> int:
        return self.looks[0]

    @property
    def max_pairs(self) -> int:
        return self.looks[-1]

    def as_dict(self) -> dict:
        return {"looks": list(self.looks), "alpha": self.alpha, "margin": self.margin, "paired": self.paired,
                "either": self.either, "rule": self.rule, "headline_share": self.headline_share,
                "alphas": list(self.alphas), "tests": [k for k, _ in self.plan],
                **({"looks_run": self.ran} if self.ran is not None else {})}


def design(min_pairs: int = 5, max_pairs: int = 10, n_looks: int = 3, alpha: float = ALPHA,
           margin: float = MARGIN, paired: bool = False, rule: str = "bh", spend: tuple | None = None,
           either: bool = True) -> Design:
    """At most n_looks looks from min_pairs to max_pairs pairs, evenly spaced; by default (`either`) each
    look with enough pairs takes the better of both tests (EitherTest). The first look must be able to
    call one metric at its alpha (3 + 3 launches reach 2/20 at best, more than 4 %)."""
    if not 1 <= min_pairs <= max_pairs:
        raise ValueError(f"pairs: need 1 <= min ({min_pairs}) <= max ({max_pairs})")
    if not 0 < alpha < 1 or not 0 < margin < 1:
        raise ValueError("alpha and margin must lie in (0, 1)")
    if rule not in RULES:
        raise ValueError(f"family rule {rule!r}: one of {', '.join(RULES)}")
    n = max(1, min(n_looks, max_pairs - min_pairs + 1))
    looks = sorted({round(min_pairs + i * (max_pairs - min_pairs) / max(1, n - 1)) for i in range(n)})
    if spend is not None and (len(spend) != len(looks) or any(not x > 0 for x in spend)):
        raise ValueError(f"spend: one positive part per look ({len(looks)})")
    d = Design(tuple(int(x) for x in looks), alpha, margin, paired, rule, HEADLINE_SHARE, spend, either)
    first = d.alphas[0]
    if paired or either is False:
        d = replace(d, either=False)
    if len(d.looks) > 1 and min_p(min_pairs, min_pairs) > first:
        need = next(m for m in range(1, 64) if min_p(m, m) <= first)
        raise ValueError(f"{min_pairs} pairs cannot reach the first look's alpha {100 * first:.2f} %: "
                         f"at least {need} pairs (or fewer looks)")
    return d


@dataclass(frozen=True)
class Metric:
    """One metric of a comparison: each stack's launches and the pair index of each launch (None: not
    known, the launches are then compared as two samples at one look over all of them)."""
    baseline: Sequence[float]
    other: Sequence[float]
    baseline_pairs: Sequence[int | None] | None = None
    other_pairs: Sequence[int | None] | None = None
    better: str | None = None              # higher | lower | None (no declared direction)
    margin: float | None = None            # equivalence margin (None: the design's)
    headline: bool = True


@dataclass(frozen=True)
class Call:
    """A metric's call and what it rests on: the ratio with the interval printed beside the call, that
    interval's exact coverage, the p-value and the metric's alpha at the look that decided it (or the
    last one), the launches used and the largest difference the interval leaves open."""
    verdict: str
    ratio: float | None = None
    lo: float | None = None
    hi: float | None = None
    level: float | None = None
    p: float | None = None
    alpha: float | None = None
    look: int | None = None                # 1-based; None: one look over every launch
    n: tuple = (0, 0)
    paired: bool = False
    seen: float | None = None              # largest difference left open by [lo, hi] (fraction)
    why: str = ""


def _up_to(values, pairs, look: int | None):
    """The launches below pair `look`; all of them when the pair indices are not known."""
    if look is None or pairs is None or len(pairs) != len(values) or any(not isinstance(i, int) for i in pairs):
        return list(values)
    return [v for v, i in zip(values, pairs) if i < look]


def _paired_values(m: Metric, look: int):
    """(baseline, other) of the pairs both stacks launched below `look`, or None when the pair indices
    are missing or repeated (then the launches cannot be paired)."""
    out = []
    for vals, idx in ((m.baseline, m.baseline_pairs), (m.other, m.other_pairs)):
        if idx is None or len(idx) != len(vals) or any(not isinstance(i, int) for i in idx) or len(set(idx)) != len(idx):
            return None
        out.append({i: v for v, i in zip(vals, idx) if i < look})
    common = sorted(set(out[0]) & set(out[1]))
    return [out[0][i] for i in common], [out[1][i] for i in common]


def _test_at(m: Metric, look: int | None, kind: str):
    """The metric's test at a look: `kind` pairs, two samples or either (EitherTest); pairs need the
    pair indices (else two samples)."""
    two = two_sample_test(_up_to(m.baseline, m.baseline_pairs, look), _up_to(m.other, m.other_pairs, look))
    if kind != TWO and look is not None:
        pv = _paired_values(m, look)
        pairs = paired_test(*pv) if pv is not None and len(pv[0]) >= 1 else None
        if pairs is not None:
            return pairs if kind == PAIRS or two is None else EitherTest(pairs, two)
    return two


def _has_pairs(m: Metric) -> bool:
    return all(idx is not None and len(idx) == len(v) and all(isinstance(i, int) for i in idx)
               for v, idx in ((m.baseline, m.baseline_pairs), (m.other, m.other_pairs)))


def sequential_calls(metrics: Sequence[Metric], d: Design = Design()) -> list[Call]:
    """Every metric's call under the design: the looks in turn; at each, the family rule over all
    metrics at that look's alpha (a metric decided at an earlier look enters as rejected, p = 0, when
    it was called different, else as not rejected, p = 1); a metric stops at its first decided look.
    A metric without pair indices is tested on all its launches at every look; looks == (0,) is one
    look over every launch at the whole alpha, as two samples. Only the looks that ran are judged
    (Design.ran): the same launches judged again at a look that did not run would let a metric's
    call change after its check stopped for it."""
    weights = headline_weights([m.headline for m in metrics], d.headline_share)
    staged = d.looks != (0,)
    schedule = list(d.schedule) if staged else [(None, TWO, d.alpha)]
    calls: list[Call] = [Call(NO_VERDICT, why="not compared")] * len(metrics)
    done = [False] * len(metrics)
    for j, (look, kind, a_j) in enumerate(schedule, start=1):
        tests = [None if done[i] else _test_at(m, look, kind) for i, m in enumerate(metrics)]
        p = [(1.0 if calls[i].verdict == SAME else 0.0) if done[i] else 1.0 if t is None else t.p
             for i, t in enumerate(tests)]
        levels = family_levels(p, a_j, weights, d.rule)
        for i, (m, t) in enumerate(zip(metrics, tests)):
            if not done[i]:
                calls[i] = _call(m, t, levels[i], a_j, d.margin if m.margin is None else m.margin,
                                 j if staged else None)
                done[i] = decided(calls[i].verdict)
    return calls


def _call(m: Metric, t: RatioTest | None, a_i: float, a_j: float, margin: float, look: int | None) -> Call:
    """One metric at one look: different when p <= a_i (its interval at 1 - a_i excludes 1); else no
    difference when the equivalence interval (1 - 2 alpha_j) lies inside the margin; else open."""
    if t is None:
        return Call(NO_VERDICT, look=look, why="no launches to compare, or values <= 0: a ratio is not defined")
    lo, hi, cov = t.interval(1 - a_i)
    different = lo is not None and t.p <= a_i * (1 + 1e-12)
    why = ""
    if not different:
        elo, ehi, ecov = t.interval(1 - 2 * a_j)
        if elo is not None and 1 / (1 + margin) <= elo and ehi <= 1 + margin:
            lo, hi, cov = elo, ehi, ecov
        elif lo is not None and (lo > 1 or hi < 1):
            why = (f"{100 * cov:.1f} % interval: {_n_text(t)} cannot reach the {100 * (1 - a_i):.2f} % this "
                   "metric needs in the whole comparison")
    if lo is None:
        return Call(NO_VERDICT, t.ratio, p=t.p, alpha=a_i, look=look, n=t.n, paired=t.paired,
                    why=f"too few launches ({_n_text(t)}) for an interval")
    return Call(call_from(lo, hi, m.better, margin, different), t.ratio, lo, hi, cov, t.p, a_i, look, t.n,
                t.paired, largest_open(lo, hi), why)


def _n_text(t: RatioTest) -> str:
    return f"{t.n[0]} pairs" if t.paired else f"{t.n[0]} and {t.n[1]} launches"


def decided(verdict: str) -> bool:
    """True when more launches cannot change the call."""
    return verdict in (BETTER, WORSE, SAME, HIGHER, LOWER)
