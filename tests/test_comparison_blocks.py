"""Launches in blocks inside one job (issue 43 items 1, 2, 4): the block design A B B A, B A A B judged by
the default test (the better of the block-stratified test and two samples, each at half the alpha),
simulated with this host's metrics (tests/data/comparison/host.json) plus a job's own level and a
launch's position in its job (tests/comparison_sim.py block_launches): identical stacks get any better
or worse call in at most 5 % of comparisons, also when jobs differ far more than in the model and the
first launch of a job is 30 % slower; the measured ratios are decided; a lone metric 3x different
among 27 is called at the first look of 8 launches per stack; the open-ended design keeps the bound
over any number of looks; the design refuses a first look that cannot call a lone metric; and the
variance components are estimated back from synthetic A/A blocks. Fixed seeds; no timing is measured."""
import math

import numpy as np
import pytest

from comparison_sim import (any_call_rate, apply_components, block_launches, block_model, compare_blocks, decided_share,
                            found, load_host)
from stackproof.comparison import (Design, design, headline_weights, lone_threshold, metric_flags, open_alpha,
                                   open_design, variance_components)

HOST = load_host()
M = len(HOST["metrics"])
FLAGS = [m["headline"] for m in HOST["metrics"]]
HEAD = [i for i, x in enumerate(FLAGS) if x]
RATIO = np.log([m.get("ratio") or 1.0 for m in HOST["metrics"]])
OPEN = open_design(8, 8, blocks=True, metrics=FLAGS)
STRESS = {**HOST, "blocks": {"tau_job_scale": 6.0, "first_launch": 0.3}}


def test_a_block_runs_a_b_b_a_then_b_a_a_b():
    """Only the position effect (no noise): the first launch of every job is 1.3x slower, so the rows of
    a block show which stack ran first: A in block 0 (pair 0: A1 B2), B in block 1."""
    host = {**HOST, "spells": {**HOST["spells"], "start": 0.0},
            "metrics": [{**m, "sigma": 1e-9, "tau": 0.0, "order": 0.0, "sigma_within": 1e-9, "tau_job": 0.0,
                         "position": None} for m in HOST["metrics"]],
            "blocks": {"first_launch": math.log(1.3)}}
    a, b = block_launches(np.random.default_rng(0), host, 2, np.zeros(M), spells=False)
    lower = [k for k, m in enumerate(HOST["metrics"]) if m["better"] == "lower"]
    assert a.shape == b.shape == (4, M)
    assert np.allclose(a[0, lower], 1.3) and np.allclose(b[0, lower], 1.0)      # block 0: A first
    assert np.allclose(b[2, lower], 1.3) and np.allclose(a[2, lower], 1.0)      # block 1: B first
    assert np.allclose(a[[1, 3]][:, lower], 1.0) and np.allclose(b[[1, 3]][:, lower], 1.0)


@pytest.mark.parametrize("host,launches,runs,seed", [(HOST, 8, 500, 41), (HOST, 24, 250, 42), (STRESS, 8, 300, 43),
                                                      (STRESS, 24, 150, 44)], ids=["model-1look", "model-3looks",
                                                                                   "stress-1look", "stress-3looks"])
def test_identical_stacks_in_blocks_get_any_call_in_at_most_5_percent(host, launches, runs, seed):
    """A/A in blocks, every metric at once, the open design judged at every look its launches fill (8,
    16, 24 per stack): at the model's job spread and position effects, and at 6x the job spread with
    the first launch of a job 30 % slower (launches inside a job far from exchangeable with launches
    across jobs)."""
    assert any_call_rate(compare_blocks(host, OPEN, np.zeros(M), runs, seed, launches)) <= 0.05


def test_two_samples_over_blocks_stay_conservative():
    """The same stress judged as two samples only (the block ignored): the balanced blocks make the
    job's level fall on both stacks alike, so the two-sample test stays within its alpha too (it only
    loses power: docs/performance.md)."""
    two = open_design(8, 8, blocks=True, either=False)
    assert any_call_rate(compare_blocks(STRESS, two, np.zeros(M), 300, 45, 8, blocks_known=False)) <= 0.05


def test_the_measured_ratios_are_decided():
    """Power on the vendor / commodity ratios: the 3x-and-more headline differences (NetPIPE's and
    allgather's latency) called in at least 95 % of comparisons at the first look, about half the
    headline metrics decided there (5.0-5.7 of 11 in the simulation) and more at the third look."""
    first = compare_blocks(HOST, OPEN, RATIO, 150, 46, 8)
    huge = [i for i in HEAD if abs(RATIO[i]) >= math.log(3)]
    assert huge and all(found(first)[i] >= 0.95 for i in huge)
    assert 11 * decided_share(first, HEAD) >= 4.5
    third = compare_blocks(HOST, OPEN, RATIO, 100, 47, 24)
    assert decided_share(third, HEAD) > decided_share(first, HEAD) + 0.05


def test_a_lone_metric_is_called_at_the_first_look():
    """One headline metric 3x different, the other 26 identical: at 8 + 8 launches in blocks it is
    called at the first look (5 + 5 could never: 2/252 > 0.0029). Every headline metric whose spread is
    at most 0.3 (9 of 11 here): in every comparison without the host's slow launches, in at least 80 %
    with them (a launch 1.4-4.8x slow crosses a 3x gap)."""
    ok = [i for i in HEAD if HOST["metrics"][i]["sigma"] <= 0.3]
    assert len(ok) >= 8
    for k in ok:
        lr = np.zeros(M)
        lr[k] = math.log(3)
        quiet = compare_blocks(HOST, OPEN, lr, 40, 48 + k, 8, spells=False)
        noisy = compare_blocks(HOST, OPEN, lr, 60, 148 + k, 8)
        assert found(quiet)[k] == 1.0 and found(noisy)[k] >= 0.8, (HOST["metrics"][k]["var"], found(noisy)[k])
        assert all(c.look == 1 for calls in quiet for c in [calls[k]])


def test_the_open_design_spends_at_most_alpha_over_any_number_of_looks():
    for share in (None, 0.8):
        total = sum(open_alpha(j, 0.05, share) for j in range(1, 20_001))
        assert 0.05 * (1 - 1e-4) < total <= 0.05           # the tail beyond 20,000 looks: 6 / (pi^2 20,000)
    assert open_alpha(1, 0.05) == pytest.approx(0.05 * 6 / math.pi ** 2)
    assert [OPEN.size(j) for j in (1, 2, 5)] == [8, 16, 40]
    # six looks of A/A in blocks (48 launches per stack): still within 5 %
    assert any_call_rate(compare_blocks(HOST, OPEN, np.zeros(M), 150, 49, 48)) <= 0.05


def test_a_design_that_cannot_call_a_lone_metric_is_refused():
    """27 metrics, 11 headline: the lone headline metric needs p <= 1.96 x 4 % / 27 = 0.0029 at the first
    look; 5 + 5 launches reach 2/252 at best; the refusal says the launches needed, in one line."""
    assert lone_threshold(FLAGS, 0.04) == pytest.approx(headline_weights(FLAGS)[HEAD[0]] * 0.04 / M)
    with pytest.raises(ValueError) as exc:
        design(5, 10, 3, metrics=FLAGS)
    msg = str(exc.value)
    assert "\n" not in msg and "cannot call a lone headline metric" in msg and "at least 6 launches per stack" in msg
    assert design(6, 10, 3, metrics=FLAGS).looks[0] == 6
    assert metric_flags(27, 11) == sorted(FLAGS, reverse=True)          # the same check from the counts
    with pytest.raises(ValueError, match="at least 6 launches"):
        design(5, 10, 3, metrics=metric_flags(27, 11))
    with pytest.raises(ValueError, match="at least 8 launches per stack"):
        design(4, 24, 3, blocks=True, metrics=FLAGS)
    assert design(8, 24, 3, blocks=True, metrics=FLAGS).looks == (8, 16, 24)
    with pytest.raises(ValueError, match="multiple of 4"):
        open_design(6, 8, blocks=True)
    # the either-test's factor 2 counts: its smallest p is twice the two-sample one
    d = Design(looks=(8,), either=True, blocks=True)
    assert d.kind_at(1) == "either" and d.test_min_p(1) == pytest.approx(2 * 2 / 12870)
    # 200 metrics, all headline: p <= alpha_1 / 200 = 1.5e-4 needs 12 launches per stack (the next even
    # number of blocks), where 8 reach 2 x 2/12870 = 3.1e-4
    with pytest.raises(ValueError, match="at least 12 launches per stack"):
        open_design(8, 8, blocks=True, metrics=[True] * 200)


@pytest.mark.parametrize("tau,first,exchangeable", [(0.0, 0.0, True), (0.15, 0.2, False)])
def test_variance_components_are_estimated_back(tau, first, exchangeable):
    """Synthetic A/A blocks (40 jobs of A B B A / B A A B, within-job spread 0.05): the estimator gives the
    spread inside a job, the job's own spread and the first launch's effect back, and its permutation
    test tells exchangeable launches from a job effect."""
    rng = np.random.default_rng(11)
    values, stacks, jobs, pos = [], [], [], []
    for j in range(40):
        level = rng.normal(0, tau)
        order = "ABBA" if j % 2 == 0 else "BAAB"
        for k in range(4):
            values.append(math.exp(level + (first if k == 0 else 0.0) + rng.normal(0, 0.05)))
            stacks.append(order[k])
            jobs.append(f"job{j}")
            pos.append(k + 1)
    c = variance_components(values, stacks, jobs, pos, permutations=400)
    assert c.sigma_within == pytest.approx(0.05, rel=0.2)
    assert c.tau_job == pytest.approx(tau, abs=0.04)
    assert c.position[0] - np.mean(c.position[1:]) == pytest.approx(first, abs=0.03)
    assert abs(c.stack) < 0.03 and c.jobs == 40 and c.launches == 160
    assert (c.p_exchangeable > 0.05) == exchangeable, c
    assert set(c.as_dict()) >= {"sigma_within", "tau_job", "position", "p_exchangeable"}
    with pytest.raises(ValueError):
        variance_components(values[:3], stacks[:3], jobs[:3], pos[:3])


def test_measured_components_are_a_data_change():
    """A/A launches in blocks for one metric (the shape the live A/A block runs give) go into the host
    model's metric as sigma_within, tau_job and position, which the block simulation then uses."""
    rng = np.random.default_rng(12)
    m0 = HOST["metrics"][0]
    level = rng.normal(0, 0.3, 30)                     # each job's own level
    launches = [{"case": m0["case"], "var": m0["var"], "stack": "ABBA"[k] if j % 2 == 0 else "BAAB"[k], "job": j,
                 "position": k + 1, "value": math.exp(level[j] + rng.normal(0, 0.02))}
                for j in range(30) for k in range(4)]
    bare = {**HOST, "metrics": [{k: v for k, v in m.items() if k not in ("sigma_within", "tau_job", "position")}
                                for m in HOST["metrics"]]}      # the host model before any measured block
    host = apply_components(bare, launches, "synthetic")
    m = host["metrics"][0]
    assert m["sigma_within"] == pytest.approx(0.02, rel=0.3) and m["tau_job"] > 0.15 and len(m["position"]) == 4
    sigma, tau, _ = block_model(host)
    assert sigma[0] == m["sigma_within"] and tau[0] == m["tau_job"]
    assert "sigma_within" not in host["metrics"][1] and host["blocks"]["components"]
