"""Comparing two sets of launches, many metrics at once: the statistical engine on plain numbers (no
report, no ReFrame), for the stack verdict (report/calls.py) and the profile comparison of the noise
package (Table IV).

  exact.py       one metric: the exact, distribution-free tests and intervals of the ratio other /
                 baseline (two samples, pairs, blocks of launches inside one job, either of two)
  family.py      many metrics: the weighted family rule (Benjamini-Hochberg or Holm) at each look
  design.py      the looks: a fixed design (`design`) or an open-ended one (`open_design`, looks added
                 until decided, alpha spent so that any number of looks stays within alpha)
  calls.py       every metric's call at once (`sequential_calls`): `Verdict`, `Call`, the launches an
                 open metric's spread suggests
  components.py  the variance of launches inside one job against launches across jobs (A/A blocks)

The design and its simulation: docs/performance.md.

May import: nothing of stackproof (a basic module).
"""
from stackproof.comparison.calls import (BETTER, HIGHER, INCONCLUSIVE, LOWER, NO_VERDICT, NOT_MEASURED, SAME, WORSE,
                                         Call, Metric, Verdict, call_from, decided, difference_text,
                                         launches_to_decide, open_text, sequential_calls)
from stackproof.comparison.components import Components, variance_components
from stackproof.comparison.design import (ALPHA, FIRST_LOOK_SHARE, LAUNCH_CAP, MARGIN, Design, check_lone, design,
                                          open_alpha, open_design)
from stackproof.comparison.exact import (BLOCKS, EITHER, LEVEL, MIN_LEVEL, PAIRS, TWO, EitherTest, RatioTest,
                                         block_test, interval_rank, min_p, paired_ratio_interval, paired_test,
                                         ratio_interval, signed_rank_rank, two_sample_test, within_min_p)
from stackproof.comparison.family import (HEADLINE_SHARE, RULES, family_levels, headline_weights, lone_threshold,
                                          metric_flags)

__all__ = ["ALPHA", "BETTER", "BLOCKS", "Call", "Components", "Design", "EITHER", "EitherTest", "FIRST_LOOK_SHARE",
           "HEADLINE_SHARE", "HIGHER", "INCONCLUSIVE", "LAUNCH_CAP", "LEVEL", "LOWER", "MARGIN", "MIN_LEVEL", "Metric",
           "NOT_MEASURED", "NO_VERDICT", "PAIRS", "RULES", "RatioTest", "SAME", "TWO", "Verdict", "WORSE",
           "block_test", "call_from", "check_lone", "decided", "design", "difference_text", "family_levels",
           "headline_weights", "interval_rank", "launches_to_decide", "lone_threshold", "metric_flags", "min_p", "open_alpha",
           "open_design", "open_text", "paired_ratio_interval", "paired_test", "ratio_interval", "sequential_calls",
           "signed_rank_rank", "two_sample_test", "variance_components", "within_min_p"]
