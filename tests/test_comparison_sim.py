"""The whole comparison simulated with this host's metrics, spreads and correlations (tests/data/comparison/
host.json, estimated from a real A/A run: tests/comparison_sim.py): identical stacks get any better or
worse call in at most 5 % of 2,000 comparisons, and the differences vendor vs commodity shows are found.
Fixed seeds; no timing is measured."""
import numpy as np
import pytest

from comparison_sim import any_call_rate, compare, decided_share, found, load_host
from stackproof.comparison import Design, design

HOST = load_host()
M = len(HOST["metrics"])
HEAD = [i for i, m in enumerate(HOST["metrics"]) if m["headline"]]
DEFAULT = design()


def test_the_host_model_is_whole():
    assert M >= 20 and 8 <= len(HEAD) < M
    corr = np.array(HOST["corr"])
    assert corr.shape == (M, M) and np.allclose(corr, corr.T) and np.allclose(np.diag(corr), 1)
    assert all(m["sigma"] > 0 and m["better"] in ("higher", "lower") for m in HOST["metrics"])


@pytest.mark.parametrize("spells", [True, False])
def test_identical_stacks_get_any_call_in_at_most_5_percent(spells):
    """2,000 A/A comparisons under the default design, every metric at once, correlated as measured,
    with and without the host's slow spells: the share with any better / worse call <= 5 %."""
    runs = compare(HOST, DEFAULT, np.zeros(M), 2000 if spells else 1000, seed=21 if spells else 22, spells=spells)
    assert any_call_rate(runs) <= 0.05


def test_the_other_rules_keep_it_too():
    for d in (Design(rule="holm"), Design(paired=True), Design(either=True)):
        assert any_call_rate(compare(HOST, d, np.zeros(M), 300, seed=23)) <= 0.05, d


def test_an_order_effect_is_not_a_difference():
    """A/A where the second launch of a pair runs 7 % slower on every metric: the pairs alternate
    their order, so no call."""
    host = {**HOST, "metrics": [{**m, "order": 0.07 if m["better"] == "lower" else -0.07} for m in HOST["metrics"]]}
    assert any_call_rate(compare(host, DEFAULT, np.zeros(M), 300, seed=24)) <= 0.05


def test_the_differences_vendor_vs_commodity_shows_are_found():
    """Power on the ratios the real comparison measured: every headline metric that differs by 20 % or
    more is called in at least 90 % of comparisons, and none is called the wrong way."""
    ratio = np.array([m.get("ratio") or 1.0 for m in HOST["metrics"]])
    runs = compare(HOST, DEFAULT, np.log(ratio), 200, seed=25)
    share = found(runs)
    big = [i for i in HEAD if abs(np.log(ratio[i])) >= np.log(1.2)]
    assert big and all(share[i] >= 0.8 for i in big), {HOST["metrics"][i]["var"]: share[i] for i in big}
    wrong = np.mean([[(c.ratio - 1) * (r - 1) < 0 and c.lo is not None and (c.lo > 1 or c.hi < 1)
                      for c, r in zip(calls, ratio) if r != 1.0] for calls in runs])
    assert wrong == 0
    assert decided_share(runs, HEAD) >= 0.5
