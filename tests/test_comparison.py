"""The comparison engine (stackproof.comparison): exact tests and intervals of a ratio, the family rule
over many metrics, the sequential looks. Every random draw has a fixed seed."""
import json

import numpy as np
import pytest

from stackproof.comparison import (BETTER, INCONCLUSIVE, NO_VERDICT, SAME, WORSE, Design, Metric, design,
                                   difference_text, family_levels, headline_weights, interval_rank, min_p,
                                   paired_test, sequential_calls, signed_rank_rank, two_sample_test)


@pytest.mark.parametrize("m,n,k,coverage", [(3, 3, 1, 0.90), (4, 4, 1, 0.9714), (5, 5, 3, 0.9683),
                                            (6, 6, 6, 0.9589), (10, 10, 24, 0.9567)])
def test_exact_mann_whitney_ranks(m, n, k, coverage):
    assert interval_rank(m, n) == (k, pytest.approx(coverage, abs=1e-4))


@pytest.mark.parametrize("n,k,coverage", [(6, 1, 0.96875), (10, 9, 0.951171875), (12, 14, 0.95751953125)])
def test_exact_signed_rank_ranks(n, k, coverage):
    assert signed_rank_rank(n, 0.95) == (k, pytest.approx(coverage))


def test_smallest_p_a_run_can_reach():
    # the note's table: 5 + 5 launches 2/252, n pairs 2/2^n; 8 + 8 launches 2/12870
    assert min_p(5, 5) == pytest.approx(2 / 252)
    assert min_p(8, 8) == pytest.approx(2 / 12870)
    assert min_p(8, 8, paired=True) == pytest.approx(2 / 256)
    assert min_p(10, 10, paired=True) == pytest.approx(2 / 1024)


def test_the_p_value_and_the_interval_never_disagree():
    """For both tests and any level: the interval excludes 1 exactly when p <= 1 - its level (the
    call and the interval printed beside it agree), ties and zeros included."""
    rng = np.random.default_rng(3)
    checked = 0
    for _ in range(1500):
        n, m = rng.integers(3, 9, size=2)
        b = np.round(rng.lognormal(0, 0.1, n), 2)          # rounded: ties happen
        o = np.round(rng.lognormal(rng.normal(0, 0.1), 0.1, m), 2)
        for t in (two_sample_test(b, o), paired_test(b, o[:n]) if m >= n else None):
            if t is None:
                continue
            for a in (0.2, 0.05, 0.01, 0.003):
                lo, hi, cov = t.interval(1 - a)
                if lo is None or cov < 1 - a:
                    continue
                assert (lo > 1 or hi < 1) == (t.p <= a), (b, o, a, t.p, lo, hi)
                checked += 1
    assert checked > 3000


def test_undefined_ratios():
    assert two_sample_test([1.0, 0.0], [1.0]) is None
    assert two_sample_test([], [1.0]) is None
    assert paired_test([1.0, 2.0], [1.0]) is None
    assert two_sample_test([1.0, float("nan")], [1.0]) is None


def test_family_rules():
    p = [0.001, 0.01, 0.02, 0.5]
    # BH at 5 %: the 3rd smallest 0.02 <= 3 * 0.0125: three rejected, each at 3 * 0.05 / 4
    assert family_levels(p, 0.05) == pytest.approx([0.0375] * 4)
    # Holm: 0.001 <= 0.05/4, 0.01 <= 0.05/3, 0.02 <= 0.05/2, then 0.5 > 0.05
    assert family_levels(p, 0.05, rule="holm") == pytest.approx([0.0125, 0.05 / 3, 0.025, 0.05])
    # nothing small: Bonferroni's level for all
    assert family_levels([0.3, 0.9], 0.05) == pytest.approx([0.025, 0.025])
    # weights: the first two carry 4/5 of alpha
    w = headline_weights([True, True, False, False])
    assert w == pytest.approx([1.6, 1.6, 0.4, 0.4]) and sum(w) == pytest.approx(4)
    assert headline_weights([True, True]) == [1.0, 1.0]
    with pytest.raises(ValueError):
        family_levels(p, 0.05, rule="bonferroni")


def test_design():
    d = design()
    assert d.looks == (5, 8, 10) and not d.paired and d.either
    # 80 % of alpha to the first look (every run makes it; 5 + 5 launches reach only 2/252)
    assert d.alphas == pytest.approx((0.04, 0.005, 0.005)) and sum(d.alphas) == pytest.approx(0.05)
    assert Design(looks=(5, 8)).alphas == pytest.approx((0.04, 0.01))
    assert design(spend=(1, 1, 1)).alphas == pytest.approx((0.05 / 3,) * 3)
    # pairs where the look's pairs can reach its alpha (5 pairs: 2/32; 8 pairs: 2/256 > 0.5 %), either
    # test where they reach half of it (10 pairs: 2/1024 <= 0.5 % / 2)
    assert [k for k, _ in Design(paired=True).plan] == ["two samples", "two samples", "pairs"]
    assert [k for k, _ in Design(paired=True, spend=(1, 1, 1)).plan] == ["two samples", "pairs", "pairs"]
    assert [k for k, _ in d.plan] == ["two samples", "two samples", "either"]
    assert not design(paired=True).either and not design(either=False).either
    with pytest.raises(ValueError, match="at least 4 pairs"):
        design(3, 10, 3)                     # 3 + 3 launches reach 2/20 at best
    assert design(3, 3, 1).looks == (3,) and design(3, 3, 1).alphas == pytest.approx((0.05,))


def correlated_launches(rng, pairs, shift, sd, corr):
    """Launch values of two stacks, pairs alternating A B / B A: metrics of one launch correlated."""
    L = np.linalg.cholesky(corr)
    z = (L @ rng.standard_normal((len(sd), 2 * pairs))).T * sd
    a, b = z[0::2].copy(), z[1::2] + shift
    swap = np.arange(pairs) % 2 == 1
    a[swap], b[swap] = z[1::2][swap], z[0::2][swap] + shift
    return np.exp(a), np.exp(b)


def comparisons(d, shift, runs, seed, m=24, headline=12):
    sd = np.r_[np.full(headline, 0.04), np.full(m - headline, 0.06)]
    corr = np.full((m, m), 0.0)
    for g in range(0, m, 4):
        corr[g:g + 4, g:g + 4] = 0.6
    np.fill_diagonal(corr, 1.0)
    rng = np.random.default_rng(seed)
    idx = list(range(d.max_pairs))
    out = []
    for _ in range(runs):
        a, b = correlated_launches(rng, d.max_pairs, shift, sd, corr)
        out.append(sequential_calls([Metric(a[:, k], b[:, k], idx, idx, "lower", None, k < headline)
                                     for k in range(m)], d))
    return out


@pytest.mark.parametrize("rule", ["bh", "holm"])
def test_identical_stacks_rarely_get_any_call(rule):
    """A/A, 24 correlated metrics, the default looks: at most 5 % of comparisons call any metric
    better or worse (the whole-report error rate, not each metric's)."""
    runs = comparisons(Design(rule=rule), np.zeros(24), 400, seed=5)
    anyfalse = sum(any(c.verdict in (BETTER, WORSE) for c in calls) for calls in runs)
    assert anyfalse <= 0.05 * 400, anyfalse


def test_real_differences_are_found():
    shift = np.log(np.r_[1.3, 0.8, 1.15, 2.0, 10.0, 1.1, np.ones(6), np.full(12, 1.2)])
    runs = comparisons(Design(), shift, 100, seed=6)
    found = np.mean([[c.verdict in (BETTER, WORSE) for c in calls] for calls in runs], axis=0)
    assert (found[:6] >= 0.9).all() and (found[12:] >= 0.8).all(), found
    # with real differences Benjamini-Hochberg bounds the share of false calls among the calls made
    # (the false discovery rate), not the chance of any
    fdr = np.mean([sum(c.verdict in (BETTER, WORSE) for c in calls[6:12])
                   / max(1, sum(c.verdict in (BETTER, WORSE) for c in calls)) for calls in runs])
    assert fdr <= 0.05, fdr
    calls = runs[0]
    assert calls[0].verdict == WORSE and calls[1].verdict == BETTER and calls[0].lo > 1


def test_no_difference_and_what_was_seen():
    idx = list(range(10))
    b = [5.0, 5.01, 5.02, 5.03, 5.04, 5.0, 5.01, 5.02, 5.03, 5.04]
    o = [x * 1.003 for x in b[::-1]]
    noisy = [5.0, 6.0, 4.5, 5.5, 4.8, 5.9, 4.6, 5.2, 5.7, 4.4]
    c, wide = sequential_calls([Metric(b, o, idx, idx, "lower"), Metric(noisy, b, idx, idx, "lower")])
    assert c.verdict == SAME and c.look == 1 and 1 / 1.05 <= c.lo <= c.hi <= 1.05
    assert wide.verdict == INCONCLUSIVE and wide.look == 3 and wide.lo < 1 < wide.hi
    assert wide.reason == (f"differences from {difference_text(wide.lo)} to {difference_text(wide.hi)} not excluded "
                           f"({100 * wide.level:.1f} % interval)")
    assert wide.more and wide.more_look > 3          # the launches per stack its spread suggests
    # a ratio below 1 is a percentage down to -50 %, then a factor (0.11 is not "809 %")
    assert [difference_text(x) for x in (0.11, 0.5, 0.8, 1.0, 1.35, 2.0, 5.45)] == \
        ["0.11x", "-50 %", "-20 %", "+0 %", "+35 %", "+100 %", "5.5x"]
    # too few launches for the interval the call needs: no interval at all, not one at a lower level
    few = sequential_calls([Metric([1.0, 1.1], [2.0, 2.1])], Design(looks=(0,)))[0]
    assert few.verdict == NO_VERDICT and "cannot reach" in few.reason and few.lo is None


def test_only_the_looks_that_ran_are_judged():
    """A run that stopped after its first look (the budget) is judged at that look only, on its pairs and
    its alpha: judging the same launches again at looks that never ran could change a call after the
    check stopped for it."""
    idx = list(range(10))
    b = [1.0, 1.01, 0.99, 1.0, 1.02, 1.0, 1.01, 0.99, 1.0, 1.02]
    o = [x * 1.04 for x in b]
    m = [Metric(b, o, idx, idx, "lower") for _ in range(3)]
    full = sequential_calls(m, Design())
    first = sequential_calls(m, Design(ran=1))
    assert all(c.look <= 3 for c in full) and all(c.look == 1 and c.n == (5, 5) for c in first)
    assert Design(ran=1).as_dict()["looks_run"] == 1
    from stackproof.report.stats import design_from
    assert design_from(Design(ran=2).as_dict()).ran == 2
    with pytest.raises(ValueError):
        design_from({**Design().as_dict(), "looks_run": 4})


def test_launches_an_open_metric_would_need():
    """The projection for an open metric (open design 8 + 8 per look): a ratio of 1 at a 5 % spread fits
    the +-5 % margin at the second look; a 1.5x ratio at 10 % is excluded from 1 there too; at a 300 %
    spread no size within the cap decides it."""
    from stackproof.comparison import launches_to_decide, open_design
    d = open_design(8, 8, blocks=True)
    w = headline_weights([True] * 11 + [False] * 16)[0] / 27
    assert launches_to_decide(1.0, 0.05, 8, 0.05, d, 1, w) == (2, 8)
    assert launches_to_decide(1.5, 0.10, 8, 0.05, d, 1, w) == (2, 8)
    look, more = launches_to_decide(1.02, 0.10, 8, 0.05, d, 1, w)
    assert look > 3 and more == d.size(look) - 8
    assert launches_to_decide(1.0, 3.0, 8, 0.05, d, 1, w) is None
    # a fixed design is continued at its last spacing and alpha
    assert launches_to_decide(1.0, 0.05, 10, 0.05, Design(), 3, w)[1] > 0


def test_the_either_test_prints_the_level_it_guarantees():
    """Picking the test with the smaller p after the fact keeps coverage 1 - (the two intervals'
    non-coverage added up), each at 1 - a/2: that is the level printed, not the chosen test's own."""
    from stackproof.comparison import EitherTest, block_test
    rng = np.random.default_rng(9)
    b, o = rng.lognormal(0, 0.1, 8), rng.lognormal(0.3, 0.1, 8)
    blk = [i // 2 for i in range(8)]
    within, two = block_test(b, o, blk, blk), two_sample_test(b, o)
    t = EitherTest(within, two)
    lo, hi, level = t.interval(0.99)
    own = [x.interval(0.995, strict=True) for x in (within, two)]
    assert level == pytest.approx(1 - sum(1 - c for _, _, c in own)) and level >= 0.99
    assert (lo, hi) == own[[within, two].index(t.chosen)][:2]
    assert t.p == pytest.approx(2 * min(within.p, two.p))


def test_an_open_design_is_recorded_and_read_back():
    from dataclasses import replace

    from stackproof.comparison import open_design
    from stackproof.report.stats import design_from
    d = replace(open_design(8, 8, blocks=True), ran=3)
    rec = d.as_dict()
    assert rec["looks"] == [8, 16, 24] and rec["step"] == 8 and rec["looks_run"] == 3 and rec["blocks"]
    back = design_from(json.loads(json.dumps(rec)))
    assert back.open and back.schedule == d.schedule and back.alphas == pytest.approx(d.alphas)
    with pytest.raises(ValueError):
        design_from({**rec, "step": -1})
