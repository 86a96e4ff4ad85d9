"""The design of a comparison: how many launches per stack each look judges, which test it uses and
the part of alpha it spends.

Fixed (`design`): a few looks from a first to a last size, their alphas adding up to alpha (80 % to the
first look by default, `FIRST_LOOK_SHARE`).
Open-ended (`open_design`, for `--until-decided --budget`): a first look, then one look every `step`
launches per stack for as long as the budget allows, with alpha_j = alpha x 6 / (pi^2 j^2) (or, with
`first_share`, that share of alpha at the first look and the rest as 6 / (pi^2 (j - 1)^2) after it):
the alphas of any number of looks add up to at most alpha (sum of 1/k^2 = pi^2 / 6), so the union
bound over the looks holds however many run. The look sizes are fixed in advance: the driver may stop (a budget, every headline
metric decided) but not choose a look's size from the data, which would void the bound.

The test at a look (`Design.kind_at`): two samples (TWO); with `paired`, the within-unit test (pairs,
or blocks when the launches come in blocks of A B B A inside one job) at a look where it can reach
the look's alpha; with `either` (the default of `design`) both at half the alpha each (EITHER) where
the within-unit test can reach that. A design must be able to call a lone headline metric at its
first look (`lone_threshold`: w x alpha_1 / m); `design` and `open_design` refuse one that cannot,
given the comparison's metrics, and say the launches it needs.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Sequence

from stackproof.comparison.exact import EITHER, PAIRS, TWO, min_p, within_min_p
from stackproof.comparison.family import HEADLINE_SHARE, RULES, lone_threshold

ALPHA = 0.05          # the chance of any false better / worse call over a whole comparison
MARGIN = 0.05         # default equivalence margin: no difference within +-5 %
FIRST_LOOK_SHARE = 0.8  # the part of alpha the first look uses (the later looks share the rest)
BLOCK = 4             # launches of one block (A B B A): 2 per stack
LAUNCH_CAP = 10_000   # launches per stack beyond which no projection is made


def open_alpha(j: int, alpha: float, first_share: float | None = None) -> float:
    """alpha_j of look j (1-based) of an open-ended design: first_share x alpha at the first, then
    (1 - first_share) x alpha x 6 / (pi^2 (j - 1)^2); first_share None: alpha x 6 / (pi^2 j^2). Either
    sums to alpha over infinitely many looks."""
    if j < 1:
        raise ValueError("looks count from 1")
    if first_share is None:
        return alpha * 6 / (math.pi ** 2 * j ** 2)
    return alpha * first_share if j == 1 else alpha * (1 - first_share) * 6 / (math.pi ** 2 * (j - 1) ** 2)


@dataclass(frozen=True)
class Design:
    """The design of a comparison (see the module text). `looks`: launches per stack (pairs of launches)
    at each look; an open design (`step` > 0) keeps its first look there and adds `step` launches per
    look. `ran`: the looks that ran (None: all of a fixed design; an open design's judged as far as
    the launches go). `blocks`: launches come in blocks of 2 + 2 inside one job (the within-unit test
    is then the block test). looks == (0,): one look over every launch (two samples), as for sessions
    that were not launched in pairs."""
    looks: tuple = (5, 8, 10)
    alpha: float = ALPHA
    margin: float = MARGIN
    paired: bool = False
    rule: str = "bh"
    headline_share: float = HEADLINE_SHARE
    spend: tuple | None = None
    either: bool = False
    ran: int | None = None          # looks that ran (None: all): later looks' alphas stay unspent
    step: int = 0                   # open-ended: launches per stack each further look adds
    blocks: bool = False            # launches in blocks of A B B A (within-unit test: blocks)
    first_share: float | None = None   # open-ended: the first look's part of alpha (None: 6 / pi^2)

    @property
    def open(self) -> bool:
        return self.step > 0

    def size(self, j: int) -> int:
        """Launches per stack at look j (1-based)."""
        return self.looks[0] + (j - 1) * self.step if self.open else self.looks[j - 1]

    def alpha_at(self, j: int) -> float:
        return open_alpha(j, self.alpha, self.first_share) if self.open else self._fixed_alphas[j - 1]

    def kind_at(self, j: int) -> str:
        """The test of look j: TWO, PAIRS (the within-unit test) or EITHER (see the class text)."""
        return self._kind(self.size(j), self.alpha_at(j))

    def _kind(self, n: int, a: float) -> str:
        if n and self.either and 2 * within_min_p(n, self.blocks) <= a:
            return EITHER
        if n and self.paired and within_min_p(n, self.blocks) <= a:
            return PAIRS
        return TWO

    def test_min_p(self, j: int) -> float:
        """The smallest p the test of look j can give."""
        n, kind = self.size(j), self.kind_at(j)
        return {TWO: min_p(n, n), PAIRS: within_min_p(n, self.blocks),
                EITHER: 2 * min(min_p(n, n), within_min_p(n, self.blocks))}[kind]

    @cached_property
    def _fixed_alphas(self) -> tuple:
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
    def n_looks(self) -> int:
        """The looks judged: a fixed design's (or those that ran); an open design's that ran (1 when
        not recorded)."""
        if self.open:
            return self.ran or 1
        return len(self.looks) if self.ran is None else min(self.ran, len(self.looks))

    def looks_within(self, launches: int) -> int:
        """How many looks launches per stack fill (an open design judged from its data)."""
        if not self.open:
            return self.n_looks
        k = 0
        while self.size(k + 1) <= launches and (self.ran is None or k < self.ran):
            k += 1
        return k

    @property
    def alphas(self) -> tuple:
        """alpha_j of each look judged (a fixed design's add up to alpha; an open design's to less)."""
        if not self.open:
            return self._fixed_alphas
        return tuple(self.alpha_at(j) for j in range(1, self.n_looks + 1))

    @property
    def plan(self) -> tuple:
        """(test, alpha_j) per look (a fixed design's all; an open design's judged)."""
        n = len(self.looks) if not self.open else self.n_looks
        return tuple((self.kind_at(j), self.alpha_at(j)) for j in range(1, n + 1))

    @property
    def schedule(self) -> tuple:
        """(launches per stack, test, alpha_j) of each look that ran."""
        return tuple((self.size(j), self.kind_at(j), self.alpha_at(j)) for j in range(1, self.n_looks + 1))

    def projected(self, k: int) -> tuple[int, float]:
        """(launches per stack, alpha) of look k, also beyond a fixed design's last look: more looks at
        its last spacing and alpha (what a larger run would give)."""
        if self.open or k <= len(self.looks):
            return self.size(k), self.alpha_at(k)
        last = len(self.looks)
        gap = self.looks[-1] - self.looks[-2] if last > 1 else max(1, self.looks[-1])
        return self.looks[-1] + (k - last) * gap, self._fixed_alphas[-1]

    @property
    def min_pairs(self) -> int:
        return self.looks[0]

    @property
    def max_pairs(self) -> int:
        return self.size(self.n_looks) if self.open else self.looks[-1]

    def as_dict(self) -> dict:
        looks = [self.size(j) for j in range(1, self.n_looks + 1)] if self.open else list(self.looks)
        out = {"looks": looks, "alpha": self.alpha, "margin": self.margin, "paired": self.paired,
               "either": self.either, "rule": self.rule, "headline_share": self.headline_share,
               "alphas": list(self.alphas), "tests": [k for k, _ in self.plan], "blocks": self.blocks}
        if self.open:
            out.update(step=self.step, first_share=self.first_share)
        if self.ran is not None:
            out["looks_run"] = self.ran
        return out


def _check(alpha: float, margin: float, rule: str) -> None:
    if not 0 < alpha < 1 or not 0 < margin < 1:
        raise ValueError("alpha and margin must lie in (0, 1)")
    if rule not in RULES:
        raise ValueError(f"family rule {rule!r}: one of {', '.join(RULES)}")


def _check_blocks(sizes: Sequence[int]) -> None:
    bad = [n for n in sizes if n % BLOCK]
    if bad:
        raise ValueError(f"blocks: a look's launches per stack must be a multiple of {BLOCK} (an even number "
                         f"of A B B A / B A A B blocks, so a launch's position in its job cancels); got "
                         f"{', '.join(map(str, bad))}")


def check_lone(d: Design, headline: Sequence[bool]) -> None:
    """Refuse (ValueError, one line) a design whose first look cannot call a lone headline metric among
    the comparison's metrics (`headline`: one flag per metric it will judge): the smallest p of the
    first look's test must be at most w x alpha_1 / m. The message says the launches it needs."""
    flags = list(headline)
    if not flags:
        return
    a1 = d.alpha_at(1)
    need_p = lone_threshold(flags, a1, d.headline_share)
    got = d.test_min_p(1)
    if got <= need_p * (1 + 1e-12):
        return
    step = BLOCK if d.blocks else 1
    need = next((n for n in range(step, LAUNCH_CAP, step)
                 if _min_p_at(d, n, a1) <= need_p * (1 + 1e-12)), None)
    h = sum(bool(x) for x in flags)
    raise ValueError(f"{d.size(1)} launches per stack at the first look cannot call a lone headline metric: "
                     f"its smallest p ({d.kind_at(1)}) is {got:.2g}, above the {need_p:.2g} one of {h} headline "
                     f"metrics among {len(flags)} needs (w x alpha_1 / m at alpha_1 = {a1:.3g}); "
                     + (f"at least {need} launches per stack at the first look" if need else "no size reaches it"))


def _min_p_at(d: Design, n: int, a: float) -> float:
    kind = d._kind(n, a)
    return {TWO: min_p(n, n), PAIRS: within_min_p(n, d.blocks),
            EITHER: 2 * min(min_p(n, n), within_min_p(n, d.blocks))}[kind]


def design(min_pairs: int = 5, max_pairs: int = 10, n_looks: int = 3, alpha: float = ALPHA,
           margin: float = MARGIN, paired: bool = False, rule: str = "bh", spend: tuple | None = None,
           either: bool = True, blocks: bool = False, metrics: Sequence[bool] | None = None) -> Design:
    """At most n_looks looks from min_pairs to max_pairs launches per stack, evenly spaced (with blocks,
    each a multiple of 4); by default (`either`) each look with enough launches takes the better of both
    tests (EitherTest). The first look must be able to call one metric at its alpha (3 + 3 launches
    reach 2/20 at best, more than 4 %) and, given `metrics` (one headline flag per metric the
    comparison will judge), a lone headline metric among them (check_lone)."""
    if not 1 <= min_pairs <= max_pairs:
        raise ValueError(f"pairs: need 1 <= min ({min_pairs}) <= max ({max_pairs})")
    _check(alpha, margin, rule)
    n = max(1, min(n_looks, max_pairs - min_pairs + 1))
    looks = sorted({round(min_pairs + i * (max_pairs - min_pairs) / max(1, n - 1)) for i in range(n)})
    if blocks:
        looks = sorted({BLOCK * max(1, round(x / BLOCK)) for x in looks})
        _check_blocks([min_pairs, max_pairs])
    if spend is not None and (len(spend) != len(looks) or any(not x > 0 for x in spend)):
        raise ValueError(f"spend: one positive part per look ({len(looks)})")
    d = Design(tuple(int(x) for x in looks), alpha, margin, paired, rule, HEADLINE_SHARE, spend,
               either and not paired, blocks=blocks)
    first = d.alpha_at(1)
    if len(d.looks) > 1 and min_p(d.looks[0], d.looks[0]) > first:
        need = next(m for m in range(1, 64) if min_p(m, m) <= first)
        raise ValueError(f"{d.looks[0]} pairs cannot reach the first look's alpha {100 * first:.2f} %: "
                         f"at least {need} pairs (or fewer looks)")
    if metrics is not None:
        check_lone(d, metrics)
    return d


def open_design(first: int = 8, step: int = 8, alpha: float = ALPHA, margin: float = MARGIN,
                rule: str = "bh", either: bool = True, paired: bool = False, blocks: bool = False,
                first_share: float | None = None, metrics: Sequence[bool] | None = None) -> Design:
    """An open-ended design: a first look at `first` launches per stack, then one look every `step`
    more, as long as the caller goes on (open_alpha: any number of looks spends at most alpha; by
    default alpha 6 / (pi^2 j^2), which decides more from the third look on than giving the first look
    80 %: docs/performance.md). With blocks both are multiples of 4. `metrics` as in design()."""
    if first < 1 or step < 1:
        raise ValueError(f"open design: first look ({first}) and step ({step}) must be at least 1 launch per stack")
    if first_share is not None and not 0 < first_share < 1:
        raise ValueError("open design: first_share must lie in (0, 1)")
    _check(alpha, margin, rule)
    if blocks:
        _check_blocks([first, step])
    d = Design((first,), alpha, margin, paired, rule, HEADLINE_SHARE, None, either and not paired, step=step,
               blocks=blocks, first_share=first_share)
    if metrics is not None:
        check_lone(d, metrics)
    return d
