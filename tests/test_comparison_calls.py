"""A call never contradicts its interval (issue 43 item 3): the interval printed beside a call excludes 1
exactly when the call is better / worse (higher / lower), at the level the rule used; "no difference"
and "inconclusive" print an interval that holds 1; a metric whose launches cannot reach its level
prints none. Checked on every call of seeded random comparisons under every design, and on every row
of a generated report (report.json and the Markdown table)."""
import json

import numpy as np
import pytest

from stackproof.comparison import (INCONCLUSIVE, NO_VERDICT, NOT_MEASURED, SAME, Design, Metric, Verdict, design,
                                   open_design, sequential_calls)
from stackproof.report import build, load_run


def agrees(verdict, lo, hi, level, alpha, margin=0.05) -> str | None:
    """What is wrong with one call and its interval (None: they agree)."""
    v = Verdict(verdict)
    if v == NOT_MEASURED:
        return None if lo is None else "an interval beside not measured"
    if v == NO_VERDICT:
        return None if lo is None else "an interval beside no verdict"
    if lo is None:
        return "no interval beside a call"
    excludes = lo > 1 or hi < 1
    if v.different:
        if not excludes:
            return "a difference beside an interval holding 1"
        if level < 1 - alpha - 1e-9:
            return f"the interval's level {level} is below the rule's 1 - {alpha}"
        return None
    if excludes:
        return f"{v} beside an interval excluding 1"
    if v == SAME and not (1 / (1 + margin) <= lo and hi <= 1 + margin):
        return "no difference beside an interval outside the margin"
    if v == INCONCLUSIVE and level < 1 - alpha - 1e-9:
        return f"inconclusive printed at {level}, below the rule's 1 - {alpha}"
    return None


def random_metrics(rng, n_metrics, pairs, blocks):
    out = []
    for k in range(n_metrics):
        shift = rng.choice([0.0, 0.0, 0.01, 0.03, 0.1, 0.5, 1.7])
        sd = rng.choice([0.005, 0.02, 0.1, 0.4])
        b = np.round(rng.lognormal(0, sd, pairs), 3)          # rounded: ties happen
        o = np.round(rng.lognormal(shift, sd, pairs), 3)
        idx = list(range(pairs))
        blk = [i // 2 for i in idx] if blocks else None
        out.append(Metric(b, o, idx, idx, rng.choice(["lower", "higher", None]), None, k < n_metrics // 3, blk, blk))
    return out


@pytest.mark.parametrize("d,blocks", [(design(), False), (design(paired=True, spend=(1, 1, 1)), False),
                                      (Design(looks=(0,)), False), (Design(looks=(4, 8)), False),
                                      (open_design(8, 8, blocks=True), True), (design(8, 24, 3, blocks=True), True),
                                      (Design(looks=(3,)), False)])
def test_every_call_agrees_with_its_interval(d, blocks):
    rng = np.random.default_rng(43)
    seen = set()
    for _ in range(60):
        pairs = d.max_pairs if d.looks != (0,) else int(rng.integers(2, 9))
        if d.open:
            pairs = d.size(int(rng.integers(1, 4)))
        for c in sequential_calls(random_metrics(rng, 12, pairs, blocks), d):
            wrong = agrees(c.verdict, c.lo, c.hi, c.level, c.alpha or 0)
            assert wrong is None, (wrong, c)
            seen.add(c.verdict)
    if d.looks != (3,):
        assert {INCONCLUSIVE} <= seen and seen & {Verdict.BETTER, Verdict.WORSE, Verdict.HIGHER, Verdict.LOWER}
    else:           # 3 + 3 launches reach 2/20 at best: nothing is called different, nothing inconclusive
        assert seen <= {NO_VERDICT, SAME}, seen


def test_the_cases_of_the_issue_print_no_contradiction():
    """NetPIPE 8 B in the busy run (every vendor launch above every commodity one, 5 + 5, among 27 metrics:
    out of the lone metric's reach) and a shift whose descriptive interval excludes 1 below the level the
    rule needs: neither prints an interval excluding 1 beside "inconclusive"."""
    comm = [0.30, 0.31, 0.33, 0.36, 0.32]
    vend = [1.44, 2.0, 499.9, 3.1, 7.7]
    idx = list(range(5))
    noise = [Metric([1.0, 1.1, 0.9, 1.05, 0.95], [1.02, 0.97, 1.08, 0.93, 1.0], idx, idx, "lower", None, i < 10)
             for i in range(26)]
    net, *_ = sequential_calls([Metric(comm, vend, idx, idx, "lower")] + noise, Design(looks=(5,), alpha=0.04))
    assert net.verdict in (NO_VERDICT, INCONCLUSIVE) and agrees(net.verdict, net.lo, net.hi, net.level, net.alpha) is None
    assert net.lo is None and "cannot reach" in net.reason       # 2/252 > the lone metric's 0.0029


def _report(tmp_path, metrics: dict, n=8) -> tuple[dict, str]:
    tcs = []
    for stack, k in (("commodity", 0), ("vendor", 1)):
        for i in range(n):
            tcs.append({"name": f"HPCC %repeat_index={i}", "display_name": f"HPCC %repeat_index={i}",
                        "system": "s", "partition": "p", "environ": stack, "stack": stack, "result": "pass",
                        "perf_better": {v: "lower" for v in metrics}, "perf_headline": list(metrics)[:4],
                        "perfvalues": {f"s:p:{v}": [x[k][i], 0, None, None, "s"] for v, x in metrics.items()}})
    p = tmp_path / "r.json"
    p.write_text(json.dumps({"session_info": {"uuid": "u", "stack": "commodity+vendor"}, "runs": [{"testcases": tcs}]}))
    data = build(load_run(str(p)), tmp_path / "out", "t")
    return data, (tmp_path / "out" / "report.md").read_text()


def test_every_row_of_a_generated_report_agrees(tmp_path):
    """A report of many metrics of every kind: each row's call and interval agree in report.json, and the
    Markdown table prints that interval (or none) beside that call."""
    rng = np.random.default_rng(7)
    metrics = {}
    for i, (shift, sd) in enumerate([(0.7, 0.02), (-0.5, 0.02), (0.0, 0.002), (0.0, 0.3), (0.02, 0.01), (0.3, 0.4),
                                     (1.7, 0.9), (0.0, 0.02), (0.05, 0.03), (-0.2, 0.15), (0.0, 0.001), (0.6, 0.05)]):
        metrics[f"m{i}"] = (list(rng.lognormal(0, sd, 8)), list(rng.lognormal(shift, sd, 8)))
    data, md = _report(tmp_path, metrics)
    rows = data["verdicts"]
    assert len(rows) == len(metrics)
    calls = set()
    for r in rows:
        v = r["vs"]["vendor"]
        wrong = agrees(v["verdict"], v.get("lo"), v.get("hi"), v.get("level"), v.get("alpha") or 0, r["margin"])
        assert wrong is None, (wrong, r["var"], v)
        calls.add(v["verdict"])
        line = next(x for x in md.splitlines() if x.startswith(f"| HPCC: {r['var']} "))
        cells = [c.strip() for c in line.split("|")[1:-1]]
        assert cells[1].startswith(v["verdict"])
        if v.get("lo") is None:
            assert "no interval" in cells[2] or cells[2] == "-"
        else:
            assert cells[2] == f"{v['ratio']:.3g} [{v['lo']:.3g}, {v['hi']:.3g}] {100 * v['level']:.1f} %"
        if v["verdict"] == "inconclusive":
            assert f"not excluded ({100 * v['level']:.1f} % interval)" in cells[1]
    assert {"worse", "better", "inconclusive"} <= calls, calls


def test_calls_for_gives_the_looks_their_calls_on_plain_data(tmp_path):
    """What the acceptance looks need between looks, without a report: every metric's Call for each
    stack against the baseline, its Verdict telling decided from open; the same calls as the report's."""
    from stackproof.report.calls import calls_for
    metrics = {"fast": ([1.0 + 0.01 * i for i in range(8)], [2.0 + 0.01 * i for i in range(8)]),
               "noisy": ([1.0, 1.5, 0.7, 1.2, 0.9, 1.1, 0.8, 1.3], [1.1, 0.6, 1.4, 0.8, 1.3, 1.0, 0.9, 1.2])}
    data, _ = _report(tmp_path, metrics)
    got = calls_for(load_run(str(tmp_path / "r.json")), ["commodity", "vendor"], Design(looks=(8,)))
    assert [(m.var, m.stack, m.headline) for m in got] == [("fast", "vendor", True), ("noisy", "vendor", True)]
    fast, noisy = (m.call for m in got)
    assert fast.verdict.decided and fast.verdict == "worse" and not fast.verdict.open
    assert noisy.verdict.open and not noisy.verdict.decided and noisy.more
    assert [r["vs"]["vendor"]["verdict"] for r in data["verdicts"]] == [fast.verdict, noisy.verdict]
