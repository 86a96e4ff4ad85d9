"""The report's statistics (stackproof.report.stats, its face over stackproof.comparison) and how runs become
labelled rows. The sequential design and its simulations: test_comparison.py, test_comparison_sim.py."""
import json

import numpy as np
import pytest

from stackproof.report import build, load_run
from stackproof.report.stats import interval_rank, paired_ratio_interval, signed_rank_rank, summarize
from stackproof.comparison import decided
from stackproof.report.calls import judge


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
    assert c.verdict == "no verdict" and "too few repeats" in c.reason and c.lo is None
    assert judge([0.0, 0.0, 0.0], [0.0, 0.1, 0.0], "lower").verdict == "no verdict"


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
    # the same launches as two samples: the slow pairs make the interval wide
    assert judge(base, other, "lower").verdict == "inconclusive"
    # unequal lengths or non-positive values: no ratio
    assert paired_ratio_interval([1.0, 2.0], [1.0], 0.9) is None
    assert paired_ratio_interval([1.0, 0.0], [1.0, 1.0], 0.9) is None


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
