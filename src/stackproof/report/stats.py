"""The report's face over the comparison engine (stackproof.comparison, a basic module on plain
numbers, documented there and in docs/performance.md): a stack's launches summarised (median, min,
max, quartiles), the exact intervals and the design re-exported, and the design a run recorded read
back (design_from). No random numbers: the same data give the same report.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stackproof.comparison import (LEVEL, MIN_LEVEL, RULES, Design, design, interval_rank,
                                   open_design, paired_ratio_interval, ratio_interval, signed_rank_rank)

__all__ = ["LEVEL", "MIN_LEVEL", "RULES", "Summary", "summarize", "interval_rank", "signed_rank_rank", "ratio_interval",
           "paired_ratio_interval", "Design", "design", "open_design", "design_from"]


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


def design_from(d: dict | None) -> Design:
    """The design recorded in a run (report JSON `stackproof.design`); one look at 95 % when absent.
    A record without `paired` (written before pairs were analysed) is read as two samples, one without
    `rule` (written before the family rule) as Benjamini-Hochberg: the report applies today's rule. A
    record with `step` is an open design (stackproof.comparison.open_design) judged at its looks that
    ran."""
    if not isinstance(d, dict):
        return Design(looks=(0,), alpha=1 - LEVEL, margin=0.05)
    looks = d.get("looks")
    ok = isinstance(looks, list) and looks and all(isinstance(x, int) and not isinstance(x, bool) and 0 < x < 10_000
                                                     for x in looks)
    alpha, margin, paired, rule = d.get("alpha"), d.get("margin"), d.get("paired", False), d.get("rule", "bh")
    if not ok or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < 1 for v in (alpha, margin)):
        raise ValueError("design: looks must be positive integers, alpha and margin in (0, 1)")
    if not isinstance(paired, bool):
        raise ValueError("design: paired must be true or false")
    if rule not in RULES:
        raise ValueError(f"design: rule must be one of {', '.join(RULES)}")
    spend = d.get("alphas")
    if not (isinstance(spend, list) and len(spend) == len(looks)
            and all(isinstance(x, (int, float)) and not isinstance(x, bool) and 0 < x < 1 for x in spend)):
        spend = None
    ran = d.get("looks_run")
    if ran is not None and (isinstance(ran, bool) or not isinstance(ran, int) or not 0 <= ran <= len(looks)):
        raise ValueError(f"design: looks_run must be an integer in 0..{len(looks)}")
    either, blocks = d.get("either", False), d.get("blocks", False)
    if not isinstance(either, bool) or not isinstance(blocks, bool):
        raise ValueError("design: either and blocks must be true or false")
    step = d.get("step", 0)
    if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step < 10_000:
        raise ValueError("design: step must be an integer in 0..9999")
    if step:          # an open design: its first look and its spending; the looks that ran
        share = d.get("first_share")
        if share is not None and (isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share < 1):
            raise ValueError("design: first_share must lie in (0, 1)")
        return Design((looks[0],), float(alpha), float(margin), paired, rule, either=either, step=step,
                      blocks=blocks, first_share=share, ran=ran if ran is not None else len(looks))
    return Design(tuple(looks), float(alpha), float(margin), paired, rule, spend=tuple(spend) if spend else None,
                  either=either, ran=ran, blocks=blocks)
