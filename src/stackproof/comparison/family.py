"""The family rule over many metrics (`family_levels`): the chance that two identical stacks get *any*
better / worse call is what a reader of a whole report needs bounded. Each look runs a family rule
over all the metrics of the comparison at that look's alpha: Benjamini-Hochberg (`bh`, the default;
under the global null of an A/A comparison the chance of any call is at most alpha, and with real
differences at most alpha of the calls are expected false) or Holm (`holm`, family-wise under any
configuration, less power). Both are weighted (`headline_weights`): headline metrics share
`HEADLINE_SHARE` of the alpha, the secondary ones the rest, so a center's few headline numbers are not
diluted by many secondary ones. A metric gets its own level 1 - a_i from the rule (its interval is
printed at it).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

HEADLINE_SHARE = 0.8  # the part of alpha the headline metrics share (the rest: secondary metrics)
RULES = ("bh", "holm")


def headline_weights(headline: Sequence[bool], share: float = HEADLINE_SHARE) -> list[float]:
    """Weights (mean 1) of the family rule: the headline metrics share `share` of alpha, the secondary
    ones the rest; all 1 when one of the groups is empty."""
    m, h = len(headline), sum(bool(x) for x in headline)
    if h in (0, m):
        return [1.0] * m
    return [share * m / h if x else (1 - share) * m / (m - h) for x in headline]


def metric_flags(total: int, headline: int) -> list[bool]:
    """The headline flags of a comparison known by its counts (`total` metrics, `headline` of them
    headline), for design(..., metrics=) and lone_threshold."""
    if not 0 <= headline <= total:
        raise ValueError(f"metrics: need 0 <= headline ({headline}) <= total ({total})")
    return [True] * headline + [False] * (total - headline)


def lone_threshold(headline: Sequence[bool], alpha: float, share: float = HEADLINE_SHARE) -> float:
    """The p-value a lone headline metric needs under the family rule at `alpha` when no other metric
    is called (Benjamini-Hochberg's first threshold, Holm's first step): w x alpha / m, w its weight
    among the m metrics (share x m / h for h headline metrics of m; 1 when all or none are)."""
    flags = list(headline)
    if not flags:
        raise ValueError("lone_threshold: no metrics")
    heads = [w for w, x in zip(headline_weights(flags, share), flags) if x] or headline_weights(flags, share)
    return max(heads) * alpha / len(flags)


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
