"""Every metric's call, made for all the metrics of a comparison at once (`sequential_calls`): the
looks in turn; at each, the family rule over all the metrics at the look's alpha; a metric stops at
the first look that decides it. Calls are data (`Verdict`, `Call`), never strings to parse.

One interval beside each call, at the level the rule used, so that the two never disagree: better /
worse (higher / lower without a declared direction) when the rule rejects ratio = 1 (the interval at
the metric's level 1 - a_i then excludes 1); *no difference* when the equivalence interval (two
one-sided tests at the look's alpha_j: the interval at 1 - 2 alpha_j) lies inside the margin and holds
1 (each such call is controlled per metric, at alpha_j); otherwise open, with the interval at 1 - a_i,
which then holds 1: inconclusive ("differences from -20 % to +35 % not excluded"), or *no verdict*
when the launches cannot reach the level at all (every ratio is then left open: no interval is
printed rather than one at a lower level). After the last look an open metric says how many more
launches per stack its measured spread suggests (`launches_to_decide`, `Call.more`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from statistics import NormalDist
from typing import Sequence

from stackproof.comparison.design import LAUNCH_CAP, Design
from stackproof.comparison.exact import (PAIRS, TWO, EitherTest, RatioTest, block_test, min_p, paired_test,
                                         two_sample_test)
from stackproof.comparison.family import family_levels, headline_weights


class Verdict(str, Enum):
    """A metric's call. A str (its value) in JSON and text; `decided`: more launches cannot change it;
    `open`: more launches could decide it."""
    BETTER = "better"
    WORSE = "worse"
    SAME = "no difference"
    HIGHER = "higher"
    LOWER = "lower"
    INCONCLUSIVE = "inconclusive"
    NO_VERDICT = "no verdict"
    NOT_MEASURED = "not measured"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    @property
    def decided(self) -> bool:
        return self in _DECIDED

    @property
    def different(self) -> bool:
        """Called different (better, worse, higher, lower): the interval beside it excludes 1."""
        return self in _DIFFERENT

    @property
    def open(self) -> bool:
        return self in (Verdict.INCONCLUSIVE, Verdict.NO_VERDICT)


_DIFFERENT = frozenset({Verdict.BETTER, Verdict.WORSE, Verdict.HIGHER, Verdict.LOWER})
_DECIDED = _DIFFERENT | {Verdict.SAME}
BETTER, WORSE, SAME, HIGHER, LOWER = Verdict.BETTER, Verdict.WORSE, Verdict.SAME, Verdict.HIGHER, Verdict.LOWER
INCONCLUSIVE, NO_VERDICT, NOT_MEASURED = Verdict.INCONCLUSIVE, Verdict.NO_VERDICT, Verdict.NOT_MEASURED


def decided(verdict) -> bool:
    """True when more launches cannot change the call (a Verdict or its value)."""
    try:
        return Verdict(verdict).decided
    except ValueError:
        return False


@dataclass(frozen=True)
class Metric:
    """One metric of a comparison: each stack's launches, the pair index of each launch (None: not
    known, the launches are then compared as two samples at one look over all of them) and, where the
    launches ran in blocks inside one job, the block index of each (None: not known)."""
    baseline: Sequence[float]
    other: Sequence[float]
    baseline_pairs: Sequence[int | None] | None = None
    other_pairs: Sequence[int | None] | None = None
    better: str | None = None              # higher | lower | None (no declared direction)
    margin: float | None = None            # equivalence margin (None: the design's)
    headline: bool = True
    baseline_blocks: Sequence[int] | None = None
    other_blocks: Sequence[int] | None = None


@dataclass(frozen=True)
class Call:
    """A metric's call and what it rests on: the ratio with the interval printed beside the call (at the
    level the rule used: `level`, the exact coverage, or for the either-test the one it guarantees),
    the p-value and the metric's alpha at the look that decided it (or the last one), the launches and
    the test used; for an open metric the launches' spread and the launches per stack more it
    suggests (`more`, at look `more_look`)."""
    verdict: Verdict
    reason: str = ""
    ratio: float | None = None
    lo: float | None = None
    hi: float | None = None
    level: float | None = None
    p: float | None = None
    alpha: float | None = None
    look: int | None = None                # 1-based; None: one look over every launch
    n: tuple = (0, 0)
    test: str = ""                         # TWO, PAIRS, BLOCKS (the one an either-test chose)
    spread: float | None = None            # one launch's spread on log values
    more: int | None = None                # launches per stack more that its spread suggests
    more_look: int | None = None

    @property
    def paired(self) -> bool:
        return self.test == PAIRS


def call_from(lo: float, hi: float, better: str | None, margin: float, different: bool) -> Verdict:
    """The call: a difference (`different`, the interval excludes 1) in the declared direction (better
    / worse; higher / lower without one), else no difference when [lo, hi] holds 1 and lies inside the
    margin, else inconclusive."""
    if different:
        higher = lo > 1.0
        if better not in ("higher", "lower"):
            return HIGHER if higher else LOWER
        return BETTER if higher == (better == "higher") else WORSE
    if 1.0 / (1.0 + margin) <= lo <= 1.0 <= hi <= 1.0 + margin:
        return SAME
    return INCONCLUSIVE


def difference_text(r: float) -> str:
    """A ratio as a difference in words: within a factor 2 in percent (0.8 -> "-20 %", 1.35 ->
    "+35 %"), beyond as a factor (0.11 -> "0.11x", 5.4 -> "5.4x")."""
    if 0.5 <= r <= 2:
        return f"{100 * (r - 1):+.0f} %".replace("+-", "-")
    return f"{r:.2g}x"


def open_text(lo: float, hi: float, level: float) -> str:
    """What an open interval leaves: "differences from -20 % to +35 % not excluded (99.7 % interval)"."""
    return f"differences from {difference_text(lo)} to {difference_text(hi)} not excluded ({100 * level:.1f} % interval)"


def _launches(values, pairs, blocks, look: int | None):
    """(values, blocks) of the launches below pair `look`; all when the pair indices are not known."""
    vals = list(values)
    blks = list(blocks) if blocks is not None and len(blocks) == len(vals) else None
    if look is None or pairs is None or len(pairs) != len(vals) or any(not isinstance(i, int) for i in pairs):
        return vals, blks
    keep = [k for k, i in enumerate(pairs) if i < look]
    return [vals[k] for k in keep], ([blks[k] for k in keep] if blks is not None else None)


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
    """The metric's test at a look: two samples, the within-unit test (blocks where the launches carry
    block indices, else pairs) or either (EitherTest); the within-unit test needs its indices (else
    two samples)."""
    b, bb = _launches(m.baseline, m.baseline_pairs, m.baseline_blocks, look)
    o, ob = _launches(m.other, m.other_pairs, m.other_blocks, look)
    two = two_sample_test(b, o)
    if kind == TWO:
        return two
    within = None
    if bb is not None and ob is not None:
        within = block_test(b, o, bb, ob)
    elif look is not None:
        pv = _paired_values(m, look)
        within = paired_test(*pv) if pv is not None and len(pv[0]) >= 1 else None
    if within is None or two is None:
        return two if within is None else within
    return within if kind == PAIRS else EitherTest(within, two)


def _max_launches(metrics: Sequence[Metric]) -> int:
    """Launches per stack the comparison holds: one more than the largest pair index both stacks have
    (all launches where the indices are not known)."""
    best = 0
    for m in metrics:
        ok = [isinstance(i, int) for i in (*(m.baseline_pairs or [None]), *(m.other_pairs or [None]))]
        if all(ok) and m.baseline_pairs and m.other_pairs:
            best = max(best, 1 + min(max(m.baseline_pairs), max(m.other_pairs)))
        else:
            best = max(best, min(len(m.baseline), len(m.other)))
    return best


def sequential_calls(metrics: Sequence[Metric], d: Design = Design()) -> list[Call]:
    """Every metric's call under the design: the looks in turn; at each, the family rule over all
    metrics at that look's alpha (a metric decided at an earlier look enters as rejected, p = 0, when
    it was called different, else as not rejected, p = 1); a metric stops at its first decided look.
    A metric without pair indices is tested on all its launches at every look; looks == (0,) is one
    look over every launch at the whole alpha, as two samples. Only the looks that ran are judged
    (Design.ran; an open design without it: the looks its launches fill): the same launches judged
    again at a look that did not run would let a metric's call change after its check stopped for it.
    An open metric gets the launches its spread suggests (launches_to_decide)."""
    weights = headline_weights([m.headline for m in metrics], d.headline_share)
    staged = d.looks != (0,)
    if not staged:
        schedule = [(None, TWO, d.alpha)]
    elif d.open and d.ran is None:
        n = d.looks_within(_max_launches(metrics))
        schedule = [(d.size(j), d.kind_at(j), d.alpha_at(j)) for j in range(1, n + 1)]
    else:
        schedule = list(d.schedule)
    why = "not compared" if schedule else f"fewer launches than the first look's {d.size(1)} per stack"
    calls: list[Call] = [Call(NO_VERDICT, why)] * len(metrics)
    done = [False] * len(metrics)
    last: list = [None] * len(metrics)
    for j, (look, kind, a_j) in enumerate(schedule, start=1):
        tests = [last[i] if done[i] else _test_at(m, look, kind) for i, m in enumerate(metrics)]
        last = tests
        p = [(1.0 if calls[i].verdict == SAME else 0.0) if done[i] else 1.0 if t is None else t.p
             for i, t in enumerate(tests)]
        levels = family_levels(p, a_j, weights, d.rule)
        for i, (m, t) in enumerate(zip(metrics, tests)):
            if not done[i]:
                calls[i] = _call(m, t, levels[i], a_j, d.margin if m.margin is None else m.margin,
                                 j if staged else None)
                done[i] = calls[i].verdict.decided
    out = []
    for i, (m, c, t) in enumerate(zip(metrics, calls, last)):
        if c.verdict.open and t is not None:        # its spread, and the launches it suggests
            more = {"spread": t.spread}
            got = launches_to_decide(c.ratio, t.spread, min(c.n), d.margin if m.margin is None else m.margin,
                                     d, len(schedule), weights[i] / len(metrics)) if staged else None
            if got is not None:
                more.update(more_look=got[0], more=got[1])
            c = Call(**{**c.__dict__, **more})
        out.append(c)
    return out


def _call(m: Metric, t: RatioTest | EitherTest | None, a_i: float, a_j: float, margin: float,
          look: int | None) -> Call:
    """One metric at one look: different when p <= a_i (its interval at 1 - a_i excludes 1); else no
    difference when the equivalence interval (1 - 2 alpha_j) holds 1 and lies inside the margin; else
    open, with the interval at 1 - a_i (which holds 1), or no interval when the launches cannot reach
    that level."""
    if t is None:
        return Call(NO_VERDICT, "no launches to compare, or values <= 0: a ratio is not defined", look=look)
    test = t.chosen.kind if isinstance(t, EitherTest) else t.kind
    common = dict(ratio=t.ratio, p=t.p, alpha=a_i, look=look, n=t.n, test=test)
    lo, hi, cov = t.interval(1 - a_i, strict=True)
    if lo is not None and t.p <= a_i * (1 + 1e-12):
        return Call(call_from(lo, hi, m.better, margin, True), lo=lo, hi=hi, level=cov, **common)
    elo, ehi, ecov = t.interval(1 - 2 * a_j, strict=True)
    if elo is not None and 1 / (1 + margin) <= elo <= 1 <= ehi <= 1 + margin:
        return Call(SAME, f"within ±{100 * margin:.0f} %", lo=elo, hi=ehi, level=ecov, **common)
    if lo is None:
        reach = f"they reach {100 * (1 - t.min_p):.2f} % at most" if t.min_p < 1 else "they reach none"
        return Call(NO_VERDICT, f"{_n_text(t)} cannot reach the {100 * (1 - a_i):.2f} % interval this metric "
                                f"needs in the whole comparison ({reach})", **common)
    return Call(INCONCLUSIVE, open_text(lo, hi, cov), lo=lo, hi=hi, level=cov, **common)


def _n_text(t) -> str:
    return f"{t.n[0]} pairs" if t.paired else f"{t.n[0]} + {t.n[1]} launches"


_NORMAL = NormalDist()


def _z(p: float) -> float:
    return _NORMAL.inv_cdf(1 - p)


def launches_to_decide(ratio: float, spread: float, n: int, margin: float, d: Design, look: int,
                       weight: float) -> tuple[int, int] | None:
    """(look, launches per stack more) at which an open metric would be decided if its ratio and
    spread stayed as measured: the first look after `look` (a fixed design continued at its last
    look's spacing and alpha: Design.projected) where an interval of its launches, spread x sqrt(2 / N)
    per normal quantile, either excludes 1 at the metric's lone-metric level (weight x alpha_j, weight
    its family weight / m; Benjamini-Hochberg may give it more) or holds 1 and fits inside the margin
    at 1 - 2 alpha_j. A projection, not a promise; None beyond LAUNCH_CAP launches per stack."""
    if not (ratio > 0 and spread >= 0 and n >= 1):
        return None
    shift, room = abs(math.log(ratio)), math.log1p(margin)

    def decides(k: int) -> bool:
        size, a = d.projected(k)
        se = spread * math.sqrt(2 / size)
        a_i = weight * a
        if min_p(size, size) * (2 if d.either else 1) <= a_i and shift > _z(a_i / 2) * se:
            return True
        return shift <= _z(a) * se and shift + _z(a) * se <= room

    # the condition turns true once and stays (the interval narrows faster than alpha_j shrinks):
    # double the step until it holds, then bisect
    lo, step = look, 1
    while True:
        k = lo + step
        size = d.projected(k)[0]
        if size > LAUNCH_CAP:
            hi = None
            break
        if size > n and decides(k):
            hi = k
            break
        lo, step = k, step * 2
    if hi is None:
        return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if d.projected(mid)[0] > n and decides(mid):
            hi = mid
        else:
            lo = mid
    return hi, d.projected(hi)[0] - n
