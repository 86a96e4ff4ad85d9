"""The report's statistics (stackproof.report.stats) and how runs become labelled rows."""
import json

import numpy as np
import pytest

from stackproof.report import build, load_run
from stackproof.report.stats import Design, design, interval_rank, paired_ratio_interval, signed_rank_rank, summarize
from stackproof.report.verdict import decided, judge


@pytest.mark.parametrize("m,n,k,coverage", [(3, 3, 1, 0.90), (4, 4, 1, 0.9714), (5, 5, 3, 0.9683),
                                            (6, 6, 6, 0.9589), (10, 10, 24, 0.9567)])
def test_exact_mann_whitney_interval_ranks(m, n, k, coverage):
    # the table of ../shared/notes/benchmarks.md section 6, and the usual critical values for 10 + 10
    assert interval_rank(m, n) == (k, pytest.approx(coverage, abs=1e-4))


def test_ratio_interval_and_declared_direction():
    lat_b, lat_o = [5.0, 5.1, 5.2, 5.05, 5.15], [10.0, 10.1, 10.2, 10.05, 10.15]
    c = judge(lat_b, lat_o, "lower")
    assert c.verdict == "worse" and c.lo > 1.9 and c.hi < 2.1 and c.level > 0.95
    assert c.ratio == pytest.approx(2.0, rel=0.02) and c.pct == pytest.approx(98.0, abs=0.5)
    assert judge(lat_b, lat_o, "higher").verdict == "better"
    # no declared direction: the call says higher or lower, never better or worse
    assert judge(lat_b, lat_o, None).verdict == "higher"
    # overlapping samples, wide interval: inconclusive
    c = judge([5.0, 5.3, 5.1, 5.2, 5.4], [5.25, 5.05, 5.35, 5.15, 5.45], "lower")
    assert c.verdict == "inconclusive" and c.lo < 1 < c.hi and not decided(c.verdict)
    # tight samples around the same value: no difference (interval inside +-5 %)
    c = judge([5.0, 5.01, 5.02, 5.03, 5.04], [5.005, 5.015, 5.025, 5.035, 5.045], "lower")
    assert c.verdict == "no difference" and decided(c.verdict)
    # too few repeats: a ratio but no interval and no call
    c = judge([5.0, 5.1], [9.0, 9.1], "lower")
    assert c.verdict == "no verdict" and "too few repeats" in c.why and c.lo is None
    assert judge([0.0, 0.0, 0.0], [0.0, 0.1, 0.0], "lower").verdict == "no verdict"


def test_design_looks_and_level():
    d = design(5, 10, 3, paired=False)
    assert d.looks == (5, 8, 10) and d.levels[0] >= 1 - 0.05 / 3 and sum(1 - x for x in d.levels) <= 0.05
    assert design(4, 4, paired=False).looks == (4,)
    # two samples: the first look reaches the adjusted level with 5 + 5 launches ([D(2), D(24)])
    assert interval_rank(5, 5, 1 - 0.05 / 3) == (2, pytest.approx(d.levels[0]))
    with pytest.raises(ValueError):
        design(6, 5)
    # the default: looks after 5, 8, 10 pairs; 5 pairs cannot reach 98.3 % pair by pair (93.8 % at
    # best), so the first look compares two samples (5 + 5, [D(2), D(24)], 98.4 %), the later ones
    # pairs (8: [W(2), W(35)], 98.4 %; 10: [W(5), W(51)], 98.6 %); each spends only what it uses
    d = design()
    assert d.paired and d.looks == (5, 8, 10)
    assert [p for p, _ in d.plan] == [False, True, True]
    assert d.levels == (pytest.approx(interval_rank(5, 5, 0.98)[1]), pytest.approx(1 - 4 / 256),
                        pytest.approx(1 - 14 / 1024))
    assert sum(1 - x for x in d.levels) <= 0.05
    assert signed_rank_rank(8, d.levels[1])[0] == 2 and signed_rank_rank(10, d.levels[2])[0] == 5
    # two looks of 7 and 10 pairs: both pair by pair
    assert [p for p, _ in design(7, 10, 2).plan] == [True, True]
    # a first look that cannot reach its share either way is refused with the pairs it needs
    with pytest.raises(ValueError, match="at least 5 pairs"):
        design(4, 10, 3)
    # a single look that cannot reach 95 % (3 pairs) is allowed: judged at the level it reaches
    assert design(3, 3, 1).levels == (None,)
    for looks in ((7, 8, 10), (7, 9, 12), (8, 12), (6, 10), (5, 6, 7, 8, 9, 10)):
        assert sum(1 - x for x in Design(looks, paired=True).levels if x is not None) <= 0.05 + 1e-12


@pytest.mark.parametrize("n,k,coverage", [(6, 1, 0.96875), (7, 1, 0.984375), (8, 2, 0.984375),
                                          (10, 9, 0.951171875), (12, 14, 0.95751953125)])
def test_exact_signed_rank_interval_ranks(n, k, coverage):
    # the usual two-sided critical values of Wilcoxon's signed-rank test at 5 % (n=10: T <= 8,
    # n=12: T <= 13) and the smallest interval at 98.3 % (7, 8 pairs)
    level = 0.95 if n in (10, 12) else 0.983
    assert signed_rank_rank(n, level) == (k, pytest.approx(coverage))


def test_paired_interval_cancels_what_both_launches_of_a_pair_share():
    # the host slows 3x for pairs 2-4: both stacks, so every pair's ratio stays at 1.01
    base = np.array([5.0, 5.1, 15.0, 15.3, 14.8, 5.05, 4.95, 5.0])
    other = base * np.array([1.01, 1.012, 1.008, 1.01, 1.011, 1.009, 1.01, 1.01])
    ratio, lo, hi, cov = paired_ratio_interval(base, other, 0.98)
    assert ratio == pytest.approx(1.01, abs=0.002) and 1.0 < lo <= hi < 1.02 and cov >= 0.98
    assert judge(base, other, "lower", design(), design().levels[1], paired=True).verdict == "worse"
    # the same launches as two samples: the slow pairs make the interval wide
    assert judge(base, other, "lower", design(paired=False)).verdict == "inconclusive"
    # unequal lengths or non-positive values: no ratio
    assert paired_ratio_interval([1.0, 2.0], [1.0], 0.9) is None
    assert paired_ratio_interval([1.0, 0.0], [1.0, 1.0], 0.9) is None


def launches(rng, n, ratio, sigma, spells, second=0.0, alternate=True):
    """n pairs of launches: each lognormal with spread sigma, times the host's slow factor at that
    moment, times (1 + second) for the second launch of its pair (an order effect). Pairs alternate
    A B, B A, ... as `make acceptance` launches them (alternate=False: A always first). spells: (chance
    a slow spell starts at a launch, its length in launches, its factor range); a spell covers
    consecutive launches, so it may start or end inside a pair."""
    p, length, (lo, hi) = spells
    slow, left = np.ones(2 * n), 0
    for t in range(2 * n):
        if left == 0 and rng.random() < p:
            left, factor = length, rng.uniform(lo, hi)
        if left:
            slow[t], left = factor, left - 1
    b_first = alternate & (np.arange(n) % 2 == 1)
    first, later = slow[0::2], slow[1::2] * (1 + second)
    a = rng.lognormal(1.6, sigma, n) * np.where(b_first, later, first)
    b = rng.lognormal(1.6 + np.log(ratio), sigma, n) * np.where(b_first, first, later)
    return a, b


def simulate(d, ratio, sigma, runs, seed, spells=(0.0, 1, (1.0, 1.0)), **order):
    """The sequential procedure as sequential_judge applies it, on simulated launches: per run, pairs
    up to each look at that look's level, the metric stops at its first decided look. {call: count}."""
    rng = np.random.default_rng(seed)
    calls = {}
    for _ in range(runs):
        a, b = launches(rng, d.max_pairs, ratio, sigma, spells, **order)
        for n, (paired, level) in zip(d.looks, d.plan):
            if level is None:
                continue
            c = judge(a[:n], b[:n], "lower", d, level, paired=paired)
            if decided(c.verdict):
                break
        calls[c.verdict] = calls.get(c.verdict, 0) + 1
    return calls


SLOW_SPELLS = (0.04, 8, (2.0, 4.0))     # what this host showed: 2-4x for tens of seconds (8 launches)


@pytest.mark.parametrize("paired", [True, False])
def test_a_stack_against_itself_rarely_differs_despite_repeated_looks(paired):
    """A/A: 2,000 simulated sequential comparisons under the default looks: at most 5 % may call a
    difference (better or worse), quiet or with slow spells; with 2 % noise most stop at no difference."""
    d = design(paired=paired)
    calls = simulate(d, 1.0, 0.02, 2000, seed=7)
    assert calls.get("better", 0) + calls.get("worse", 0) <= 0.05 * 2000, calls
    assert calls.get("no difference", 0) >= 0.8 * 2000, calls
    # heavy-tailed noisy machine (30 % spread): still few false differences
    calls = simulate(d, 1.0, 0.30, 2000, seed=8)
    assert calls.get("better", 0) + calls.get("worse", 0) <= 0.05 * 2000, calls
    # slow spells of the host covering whole pairs and sometimes half of one
    calls = simulate(d, 1.0, 0.02, 2000, seed=11, spells=SLOW_SPELLS)
    assert calls.get("better", 0) + calls.get("worse", 0) <= 0.05 * 2000, calls


def test_pairs_reach_no_difference_where_two_samples_cannot():
    """The reason for pairs: with slow spells on the host, a stack against itself is called 'no
    difference' far more often pair by pair than as two samples."""
    paired = simulate(design(), 1.0, 0.02, 1000, seed=12, spells=SLOW_SPELLS)
    two = simulate(design(paired=False), 1.0, 0.02, 1000, seed=12, spells=SLOW_SPELLS)
    assert paired.get("no difference", 0) >= 0.65 * 1000, paired
    assert paired.get("no difference", 0) > two.get("no difference", 0) + 100, (paired, two)


def test_alternating_pairs_cancel_an_order_effect():
    """A/A where the second launch of a pair runs 7 % slower (AMG's setup in an A/A run here): with A
    always first, pairs call B worse nearly every time; alternating A B / B A, at most 5 % differ."""
    d = design()
    fixed = simulate(d, 1.0, 0.02, 500, seed=13, second=0.07, alternate=False)
    assert fixed.get("worse", 0) >= 0.9 * 500, fixed
    alternating = simulate(d, 1.0, 0.02, 500, seed=13, second=0.07)
    assert alternating.get("better", 0) + alternating.get("worse", 0) <= 0.05 * 500, alternating


@pytest.mark.parametrize("paired", [True, False])
def test_a_real_difference_is_found(paired):
    d = design(paired=paired)
    calls = simulate(d, 1.3, 0.05, 500, seed=9)       # other stack 30 % slower, 5 % noise
    assert calls.get("worse", 0) >= 0.95 * 500, calls
    calls = simulate(d, 0.8, 0.10, 500, seed=10)      # 20 % faster, 10 % noise
    assert calls.get("better", 0) >= 0.9 * 500, calls


def test_summary_spread():
    s = summarize([3.0, 1.0, 2.0, 10.0])
    assert (s.n, s.median, s.lo, s.hi) == (4, 2.5, 1.0, 10.0)


def _report(tmp_path, name, uuid, stack_values, env_field="environ", reason=None):
    tcs = []
    for stack, values in stack_values.items():
        for i, v in enumerate(values):
            tcs.append({"name": f"NetPIPE %repeat_index={i}", "display_name": f"NetPIPE %repeat_index={i}",
                        "unique_name": f"NetPIPE_{i}", "system": "s", "partition": "p", env_field: stack,
                        "environ": stack, "result": "pass", "fail_phase": None, "fail_reason": None,
                        "repeat_index": i, "perfvalues": {"s:p:lat_8B": [v, 0, None, None, "us", "pass"]}})
    if reason:
        tcs.append({"name": "AMGBenchmark", "unique_name": "AMG", "system": "s", "partition": "p",
                    "environ": next(iter(stack_values)), "result": "fail", "fail_phase": "sanity",
                    "fail_reason": reason, "perfvalues": {}})
    p = tmp_path / name
    p.write_text(json.dumps({"session_info": {"uuid": uuid, "stack": "+".join(stack_values)},
                             "runs": [{"testcases": tcs}]}))
    return p


def test_the_same_stack_in_two_sessions_is_never_merged_silently(tmp_path):
    a = _report(tmp_path, "a.json", "aaaaaaaa-1", {"vendor": [5.0, 5.1, 5.2], "commodity": [4.0, 4.1, 4.2]})
    b = _report(tmp_path, "b.json", "bbbbbbbb-2", {"vendor": [6.0, 6.1, 6.2]})
    data = build(load_run(str(a)) + load_run(str(b)), tmp_path / "r", "t")
    # recorded order stack=vendor+commodity: vendor is the first stack, hence the default baseline
    assert data["stacks"] == ["vendor@aaaaaaaa", "commodity", "vendor@bbbbbbbb"]
    assert data["baseline"] == "vendor@aaaaaaaa"
    assert any("ran in sessions aaaaaaaa-1, bbbbbbbb-2" in n for n in data["notes"])
    md = (tmp_path / "r" / "report.md").read_text()
    assert "shown separately as vendor@aaaaaaaa, vendor@bbbbbbbb" in md
    # the same LABEL= given to both: merged, and the report says so
    data = build(load_run(f"v={a}") + load_run(f"v={b}"), tmp_path / "r2", "t")
    assert data["stacks"] == ["v"] and any("merges sessions" in n for n in data["notes"])


def test_a_long_failure_reason_is_kept_whole(tmp_path):
    reason = "sanity error: " + " ".join(f"line{i}" for i in range(120)) + "\nsecond line of the reason"
    a = _report(tmp_path, "a.json", "u1", {"commodity": [4.0, 4.1, 4.2]}, reason=reason)
    build(load_run(str(a)), tmp_path / "r", "t")
    md = (tmp_path / "r" / "report.md").read_text()
    assert reason in md and len(reason) > 600


def test_extra_sections_reach_both_formats(tmp_path):
    from stackproof.report import Section, Table
    a = _report(tmp_path, "a.json", "u1", {"commodity": [4.0, 4.1, 4.2], "vendor": [4.0, 4.2, 4.1]})

    def who_stole_the_time(ctx):
        return Section("Who stole the time", text=[f"{len(ctx.cases)} cases, baseline {ctx.baseline}"],
                       tables=[Table(["culprit", "share"], [["kworker", "61 %"]])],
                       markdown="*from the noise hunt*", html="<p class='hunt'>from the noise hunt</p>")
    build(load_run(str(a)), tmp_path / "r", "t", extra_sections=[who_stole_the_time, lambda ctx: None])
    md, html = (tmp_path / "r" / "report.md").read_text(), (tmp_path / "r" / "report.html").read_text()
    assert "## Who stole the time" in md and "| kworker | 61 % |" in md and "*from the noise hunt*" in md
    assert "6 cases, baseline commodity" in md
    assert "<h2>Who stole the time</h2>" in html and "<p class='hunt'>from the noise hunt</p>" in html
    assert "<td>kworker</td>" in html


def test_pairs_that_would_decide_an_inconclusive_metric():
    from stackproof.report.verdict import pairs_to_decide
    # +-10 % after 10 pairs around 1: the interval must shrink ~2.3x to fit +-5 %: ~5x the pairs
    assert 45 <= pairs_to_decide(0.9, 1.1, 10, 0.05) <= 60
    # centred at 1.2 (+-15 %): leaving 1 out comes first, at a few more pairs
    assert pairs_to_decide(1.2 / 1.15, 1.2 * 1.15, 10, 0.05) <= 12
    assert pairs_to_decide(1.0, 1.0, 10, 0.05) is None            # zero width
    assert pairs_to_decide(0.01, 100.0, 10, 0.05) is None         # beyond 10,000 pairs
