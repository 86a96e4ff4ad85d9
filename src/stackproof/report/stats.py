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

from dataclasses import dataclass

import numpy as np

from stackproof.comparison import (LEVEL, MIN_LEVEL, interval_rank, paired_ratio_interval, ratio_interval,
                                   signed_rank_rank)

__all__ = ["LEVEL", "MIN_LEVEL", "Summary", "summarize", "interval_rank", "signed_rank_rank", "ratio_interval",
           "paired_ratio_interval", "Design", "design", "design_from"]


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
