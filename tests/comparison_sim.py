"""Simulated stack comparisons with the metrics, spreads and correlations measured on this host, for
the statistics tests (test_comparison_sim.py) and the tables of docs/performance.md.

The host model (tests/data/comparison/host.json, estimated from real A/A runs of `make bench-acceptance`
by `python tests/comparison_sim.py estimate AA_RUN_DIR... real=VENDOR_RUN_DIR`):
- metrics: each verdict metric of the run (check, case, var, headline, better) with `sigma`, the
  launch-to-launch spread on log values within a pair (robust: 1.4826 MAD of the pairs' log ratios
  / sqrt 2), `order` (what being the second launch of a pair adds, on log values) and `ratio`, the
  ratio the real comparison (vendor / commodity) measured, for the power;
- corr: the correlation of the metrics' per-pair log ratios within one check (metrics of one
  launch move together: HPCC's come from one run);
- tau: per metric (and per check, the largest), the spread of a pair's level around the run's (the
  host's slow spells cover both launches of a pair: two samples see it, pairs cancel it); spells: how often a launch is slow beyond
  the normal spread (1.4x or more off its partner, past 4 sigma), how long a slow spell lasts in
  launches and how slow it is.

A simulated comparison draws, per check, 2 x max_pairs launches in time order (pairs alternating A B,
B A as `make acceptance` launches them), every metric of a launch from a correlated normal on log
values, plus the pair's level, the spell the launch falls in and the order effect; then runs
stackproof.comparison.sequential_calls over all metrics at once, as the report does.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from stackproof.comparison import BETTER, WORSE, Design, Metric, sequential_calls

HOST = Path(__file__).parent / "data" / "comparison" / "host.json"


def load_host(path: Path = HOST) -> dict:
    return json.loads(Path(path).read_text())


def _groups(host: dict) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for i, m in enumerate(host["metrics"]):
        out.setdefault(m["case"], []).append(i)
    return out


def _chol(corr: np.ndarray) -> np.ndarray:
    w, v = np.linalg.eigh((corr + corr.T) / 2)
    return v @ np.diag(np.sqrt(np.clip(w, 1e-9, None)))          # nearest positive semi-definite factor


def factors(host: dict) -> dict:
    """Per check, a factor L of its metrics' correlation (L L^T = corr)."""
    corr = np.array(host["corr"])
    return {case: _chol(corr[np.ix_(idx, idx)]) for case, idx in _groups(host).items()}


def launches(rng, host: dict, pairs: int, log_ratio: np.ndarray, spells: bool = True, chol: dict | None = None):
    """(baseline, other): arrays [pairs, metrics] of launch values (times 1 at the run's median)."""
    metrics = host["metrics"]
    chol = chol if chol is not None else factors(host)
    n = len(metrics)
    sigma = np.array([m["sigma"] for m in metrics])
    order = np.array([m.get("order", 0.0) for m in metrics])
    slower = np.array([1.0 if m["better"] == "lower" else -1.0 if m["better"] == "higher" else 0.0 for m in metrics])
    # a pair's level moves the metrics of one check together, each by its own spread (the check's where
    # the model has none per metric)
    tau = np.array([m.get("tau", host["tau"].get(m["case"], 0.0)) for m in metrics])
    a, b = np.zeros((pairs, n)), np.zeros((pairs, n))
    for case, idx in _groups(host).items():
        idx = np.array(idx)
        z = (chol[case] @ rng.standard_normal((len(idx), 2 * pairs))).T * sigma[idx]
        slow = _spell_track(rng, host, 2 * pairs, spells)
        level = rng.standard_normal(pairs)
        for i in range(pairs):
            first, second = 2 * i, 2 * i + 1
            x = z[first] + (slow[first] + level[i] * tau[idx]) * slower[idx]
            y = z[second] + (slow[second] + level[i] * tau[idx]) * slower[idx] + order[idx]
            if i % 2:                                  # B A: the other stack launched first
                x, y = y, x
            a[i, idx], b[i, idx] = x, y + log_ratio[idx]
    return np.exp(a), np.exp(b)


def _spell_track(rng, host: dict, launches: int, spells: bool) -> np.ndarray:
    """Per launch in time order, the log slowdown of the host's slow spell it falls in (0 outside)."""
    p_spell, length, (lo, hi) = host["spells"]["start"], host["spells"]["length"], host["spells"]["factor"]
    slow, left, f = np.zeros(launches), 0, 0.0
    for t in range(launches):
        if spells and left == 0 and rng.random() < p_spell:
            left, f = length, np.log(rng.uniform(lo, hi))
        if left:
            slow[t], left = f, left - 1
    return slow


def block_model(host: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sigma_within, tau_job, position [metrics, 4]) of the block model: a metric's own `sigma_within`,
    `tau_job`, `position` where host.json has them (measured from A/A blocks: `components`), else the
    pair model's: sigma, tau (a pair's level spread across jobs), and its `order` (what following
    another launch does) as the position effect of launches 2-4 against the job's first; `blocks`
    in host.json may scale the job spread (`tau_job_scale`) and add to the first launch
    (`first_launch`, log, in the slower direction) for stress tests."""
    metrics, blocks = host["metrics"], host.get("blocks", {})
    sigma = np.array([m.get("sigma_within", m["sigma"]) for m in metrics])
    tau = np.array([m.get("tau_job", m.get("tau", host["tau"].get(m["case"], 0.0))) for m in metrics]) \
        * blocks.get("tau_job_scale", 1.0)
    pos = np.array([m.get("position") or [0.0] + [m.get("order", 0.0)] * 3 for m in metrics], dtype=float)
    pos[:, 0] += blocks.get("first_launch", 0.0)
    return sigma, tau, pos


def block_launches(rng, host: dict, blocks: int, log_ratio: np.ndarray, spells: bool = True,
                   chol: dict | None = None):
    """(baseline, other): arrays [2 blocks, metrics] of launches run in blocks inside one job each: block
    j runs A B B A (j even) or B A A B (j odd), four separate launches; every metric of a launch from a
    correlated normal (spread sigma_within), plus the job's own level (tau_job, shared by its four
    launches and the metrics of its check), the launch's position in its job, the host's slow spells
    in time. Row 2j of each array is the first pair of block j ((A1, B2) or (B1, A2)), row 2j+1 the
    second ((A4, B3) or (B4, A3)): pair index = row, block index = row // 2."""
    metrics = host["metrics"]
    chol = chol if chol is not None else factors(host)
    n = len(metrics)
    sigma, tau, pos = block_model(host)
    slower = np.array([1.0 if m["better"] == "lower" else -1.0 if m["better"] == "higher" else 0.0 for m in metrics])
    a, b = np.zeros((2 * blocks, n)), np.zeros((2 * blocks, n))
    for case, idx in _groups(host).items():
        idx = np.array(idx)
        z = (chol[case] @ rng.standard_normal((len(idx), 4 * blocks))).T * sigma[idx]
        slow = _spell_track(rng, host, 4 * blocks, spells)
        level = rng.standard_normal(blocks)
        for j in range(blocks):
            v = [z[4 * j + k] + (slow[4 * j + k] + level[j] * tau[idx] + pos[idx, k]) * slower[idx] for k in range(4)]
            if j % 2 == 0:                     # A B B A
                a[2 * j, idx], b[2 * j, idx], b[2 * j + 1, idx], a[2 * j + 1, idx] = v
            else:                              # B A A B
                b[2 * j, idx], a[2 * j, idx], a[2 * j + 1, idx], b[2 * j + 1, idx] = v
    return np.exp(a), np.exp(b + log_ratio)


def compare_blocks(host: dict, design: Design, log_ratio, runs: int, seed: int, launches_per_stack: int,
                   spells: bool = True, blocks_known: bool = True) -> list[list]:
    """`runs` simulated comparisons in blocks (block_launches) with `launches_per_stack` launches per
    stack, judged by `design` (every look its launches fill): each a list of Calls, one per metric.
    blocks_known False: the launches carry their pair indices only (the two-sample and pair tests)."""
    rng = np.random.default_rng(seed)
    log_ratio = np.asarray(log_ratio, dtype=float)
    idx = list(range(launches_per_stack))
    blk = [i // 2 for i in idx] if blocks_known else None
    out, chol = [], factors(host)
    for _ in range(runs):
        a, b = block_launches(rng, host, launches_per_stack // 2, log_ratio, spells, chol)
        ms = [Metric(a[:, k], b[:, k], idx, idx, m["better"], None, m["headline"], blk, blk)
              for k, m in enumerate(host["metrics"])]
        out.append(sequential_calls(ms, design))
    return out


def compare(host: dict, design: Design, log_ratio, runs: int, seed: int, spells: bool = True) -> list[list]:
    """`runs` simulated comparisons: each a list of Calls, one per metric."""
    rng = np.random.default_rng(seed)
    log_ratio = np.asarray(log_ratio, dtype=float)
    idx = list(range(design.max_pairs))
    out, chol = [], factors(host)
    for _ in range(runs):
        a, b = launches(rng, host, design.max_pairs, log_ratio, spells, chol)
        ms = [Metric(a[:, k], b[:, k], idx, idx, m["better"], None, m["headline"])
              for k, m in enumerate(host["metrics"])]
        out.append(sequential_calls(ms, design))
    return out


def any_call_rate(runs: list[list], among=None) -> float:
    """The share of comparisons with at least one better / worse call (among: metric indices)."""
    pick = range(len(runs[0])) if among is None else among
    return float(np.mean([any(calls[k].verdict in (BETTER, WORSE) for k in pick) for calls in runs]))


def found(runs: list[list]) -> np.ndarray:
    """Per metric, the share of comparisons calling it better or worse."""
    return np.mean([[c.verdict in (BETTER, WORSE) for c in calls] for calls in runs], axis=0)


def decided_share(runs: list[list], among) -> float:
    """Mean share of the `among` metrics decided (better, worse, no difference; higher, lower)."""
    from stackproof.comparison import decided
    return float(np.mean([np.mean([decided(calls[k].verdict) for k in among]) for calls in runs]))


# ---- estimating the host model from real runs -------------------------------------------------------

def _pairs(run_dir: Path):
    """{(case, var): (better, headline, {index: (a, b)})} of a run's verdict metrics."""
    from stackproof.report.rows import cases_from_report, perf_rows
    report = json.loads((run_dir / "report.json").read_text())
    doc = json.loads((run_dir / "reframe-report.json").read_text())
    stacks = report["stacks"]
    _, cases = cases_from_report(doc, None, str(run_dir))
    rows = {(r.case, r.var): r for r in perf_rows(cases)}
    out = {}
    for v in report["verdicts"]:
        r = rows.get((v["case"], v["var"]))
        if r is None or not all(r.samples.get(s) for s in stacks[:2]):
            continue
        by = [dict(zip(r.repeats[s], r.samples[s])) for s in stacks[:2]]
        common = sorted(i for i in by[0] if isinstance(i, int) and i in by[1] and by[0][i] > 0 and by[1][i] > 0)
        out[(r.case, r.var)] = (r.better, bool(v.get("headline")), {i: (by[0][i], by[1][i]) for i in common})
    return out


def estimate(aa_dirs: list[Path], real_dir: Path | None = None) -> dict:
    """The host model from A/A runs, their pairs pooled (and the ratios of a real comparison, for the
    power). A pair's index keeps its run's parity (even: A B, odd: B A)."""
    aa: dict = {}
    for r, d in enumerate(aa_dirs):
        for key, (better, head, pairs) in _pairs(d).items():
            entry = aa.setdefault(key, (better, head, {}))
            entry[2].update({100 * r + i: v for i, v in pairs.items()})
    real = _pairs(real_dir) if real_dir else {}
    metrics, d = [], {}
    for (case, var), (better, head, pairs) in sorted(aa.items()):
        if len(pairs) < 4 or better not in ("higher", "lower"):
            continue
        idx = sorted(pairs)
        lr = np.array([np.log(pairs[i][1] / pairs[i][0]) for i in idx])
        sign = np.array([1.0 if i % 2 == 0 else -1.0 for i in idx])     # A B pairs: b is second
        order = float(np.median(lr * sign))
        resid = lr - order * sign
        sigma = float(1.4826 * np.median(np.abs(resid - np.median(resid))) / np.sqrt(2)) or 1e-4
        levels = np.array([np.log(pairs[i][0] * pairs[i][1]) / 2 for i in idx])
        run = np.array([i // 100 for i in idx])        # each level around its own run's (runs may differ)
        levels = levels - np.array([np.median(levels[run == r]) for r in run])
        rp = real.get((case, var))
        ratio = float(np.median([b / a for a, b in rp[2].values()])) if rp and rp[2] else None
        metrics.append({"case": case, "var": var, "headline": head, "better": better, "sigma": round(sigma, 5),
                        "order": round(order, 5), "ratio": ratio, "_lr": resid, "_idx": idx, "_levels": levels})
        d[(case, var)] = metrics[-1]
    n = len(metrics)
    corr = np.eye(n)
    for i in range(n):
        for j in range(i + 1, n):
            mi, mj = metrics[i], metrics[j]
            if mi["case"] != mj["case"]:
                continue
            common = [k for k in mi["_idx"] if k in mj["_idx"]]
            x = [mi["_lr"][mi["_idx"].index(k)] for k in common]
            y = [mj["_lr"][mj["_idx"].index(k)] for k in common]
            if len(common) >= 4 and np.std(x) > 0 and np.std(y) > 0:
                corr[i, j] = corr[j, i] = round(float(np.corrcoef(x, y)[0, 1]), 3)
    tau = {}
    for m in metrics:
        lv = m["_levels"] * (1 if m["better"] == "lower" else -1)
        spread = float(1.4826 * np.median(np.abs(lv - np.median(lv))))
        m["tau"] = round(float(np.sqrt(max(0.0, spread ** 2 - m["sigma"] ** 2 / 2))), 5)
        tau[m["case"]] = max(tau.get(m["case"], 0.0), m["tau"])
    # slow launches beyond the normal spread (one launch of a pair 1.4x or more off its partner, past 4
    # sigma): how often a launch is one, and how slow (a spell of one launch)
    out_n, out_f, launches = 0, [], 0
    for m in metrics:
        big = np.abs(m["_lr"])[np.abs(m["_lr"]) > max(4 * m["sigma"], np.log(1.4))]
        out_n, out_f, launches = out_n + len(big), out_f + list(big), launches + 2 * len(m["_lr"])
    spells = {"start": round(out_n / max(1, launches), 4), "length": 1,
              "factor": [1.4, round(float(np.exp(np.max(out_f))), 2) if out_f else 1.4]}
    for m in metrics:
        for k in ("_lr", "_idx", "_levels"):
            del m[k]
    return {"source": {"aa": [str(d) for d in aa_dirs], "real": str(real_dir) if real_dir else None},
            "metrics": metrics, "corr": corr.round(3).tolist(), "tau": tau, "spells": spells}


def apply_components(host: dict, launches: list[dict], source: str = "") -> dict:
    """The host model with the variance components of A/A launches in blocks (stackproof.comparison.
    variance_components per metric): each metric that has them gets `sigma_within`, `tau_job` and
    `position` (the block model reads them before the pair model's sigma, tau and order), and
    host["blocks"] says where they came from. `launches`: one dict per launch {case, var, stack, job,
    position, value}, as the lead's A/A block runs give them."""
    from stackproof.comparison import variance_components
    by: dict = {}
    for x in launches:
        by.setdefault((x["case"], x["var"]), []).append(x)
    out = {**host, "metrics": [dict(m) for m in host["metrics"]],
           "blocks": {**host.get("blocks", {}), "source": source, "components": {}}}
    for m in out["metrics"]:
        xs = by.get((m["case"], m["var"]))
        if not xs:
            continue
        c = variance_components([x["value"] for x in xs], [x["stack"] for x in xs], [x["job"] for x in xs],
                                [x["position"] for x in xs])
        m.update(sigma_within=round(c.sigma_within, 5), tau_job=round(c.tau_job, 5),
                 position=[round(p, 5) * (1 if m["better"] == "lower" else -1) for p in c.position])
        out["blocks"]["components"][f"{m['case']} {m['var']}"] = c.as_dict()
    return out


def table(host: dict, runs_aa: int = 2000, runs_real: int = 300) -> str:
    """The docs' simulation table (docs/performance.md): per design, the A/A any-call rate and the power
    on the real comparison's ratios."""
    from dataclasses import replace

    from stackproof.comparison import design
    m = len(host["metrics"])
    head = [i for i, x in enumerate(host["metrics"]) if x["headline"]]
    ratio = np.log([x.get("ratio") or 1.0 for x in host["metrics"]])
    rows = ["| design | A/A: any better / worse (of %d) | A/A, no slow launches | vendor ratios: headline decided | "
            "headline with a difference of 20 %% or more called |" % runs_aa, "|---|---:|---:|---:|---:|"]
    big = [i for i in head if abs(ratio[i]) >= np.log(1.2)]
    for name, d in (("default (looks 5, 8, 10; 80 % of alpha at the first; BH)", design()),
                    ("equal alphas over the looks", design(spend=(1, 1, 1))),
                    ("Holm instead of BH", design(rule="holm")),
                    ("pairs (signed-rank) where they reach the look's alpha", design(paired=True)),
                    ("only the first look (the 7-minute budget here)", replace(design(), ran=1))):
        aa = compare(host, d, np.zeros(m), runs_aa, seed=31)
        quiet = compare(host, d, np.zeros(m), runs_aa // 2, seed=32, spells=False)
        real = compare(host, d, ratio, runs_real, seed=33)
        share = found(real)
        rows.append(f"| {name} | {100 * any_call_rate(aa):.1f} % | {100 * any_call_rate(quiet):.1f} % | "
                    f"{100 * decided_share(real, head):.0f} % | "
                    f"{100 * float(np.mean([share[i] for i in big])) if big else 0:.0f} % of {len(big)} |")
    return "\n".join(rows)


def block_table(host: dict, runs: int = 400) -> str:
    """The docs' table of the block design (docs/performance.md): per test, the A/A any-call rate at the
    model's components and under stress (6x the job spread, a job's first launch 30 % slower), the
    headline metrics decided on the vendor ratios at the first look (8 + 8) and at the third (24 + 24),
    and how often a lone 3x headline metric is called at the first look (the mean over the headline
    metrics with a spread of at most 0.3)."""
    from dataclasses import replace

    from stackproof.comparison import design, open_design
    m = len(host["metrics"])
    head = [i for i, x in enumerate(host["metrics"]) if x["headline"]]
    ratio = np.log([x.get("ratio") or 1.0 for x in host["metrics"]])
    stress = {**host, "blocks": {"tau_job_scale": 6.0, "first_launch": 0.3}}
    lone = [i for i in head if host["metrics"][i]["sigma"] <= 0.3]
    o = open_design(8, 8, blocks=True)
    rows = [f"| design (blocks A B B A / B A A B) | A/A any better / worse, 1 look / 3 looks ({runs} / {runs // 2}) | "
            "A/A, jobs 6x apart and the first launch 30 % slower | vendor ratios: headline decided at 8 + 8 / 24 + 24 "
            f"(of {len(head)}) | lone 3x metric called at 8 + 8 (with / without slow launches) |",
            "|---|---:|---:|---:|---:|"]
    for name, d, known in (("either: blocks or two samples (default)", o, True),
                           ("two samples only", replace(o, either=False), False),
                           ("blocks only", replace(o, either=False, paired=True), True),
                           ("one look at the whole alpha, either", design(8, 8, 1, blocks=True), True)):
        aa1 = compare_blocks(host, d, np.zeros(m), runs, 61, 8, blocks_known=known)
        aa3 = compare_blocks(host, d, np.zeros(m), runs // 2, 62, 24, blocks_known=known) if d.open else None
        st = compare_blocks(stress, d, np.zeros(m), runs // 2, 63, 8, blocks_known=known)
        r1 = compare_blocks(host, d, ratio, runs // 2, 64, 8, blocks_known=known)
        r3 = compare_blocks(host, d, ratio, runs // 4, 65, 24, blocks_known=known) if d.open else None
        calls = []
        for sp in (True, False):
            got = []
            for k in lone:
                lr = np.zeros(m)
                lr[k] = np.log(3)
                got.append(found(compare_blocks(host, d, lr, runs // 8, 66 + k, 8, spells=sp, blocks_known=known))[k])
            calls.append(f"{100 * np.mean(got):.0f} %")
        rows.append(f"| {name} | {100 * any_call_rate(aa1):.1f} % / "
                    f"{'-' if aa3 is None else f'{100 * any_call_rate(aa3):.1f} %'} | {100 * any_call_rate(st):.1f} % | "
                    f"{len(head) * decided_share(r1, head):.1f} / "
                    f"{'-' if r3 is None else f'{len(head) * decided_share(r3, head):.1f}'} | {' / '.join(calls)} |")
    return "\n".join(rows)


if __name__ == "__main__":
    if len(sys.argv) == 2 and sys.argv[1] == "table":
        print(table(load_host()))
    elif len(sys.argv) == 3 and sys.argv[1] == "blocks-table":
        print(block_table(load_host(), int(sys.argv[2])))
    elif len(sys.argv) == 3 and sys.argv[1] == "components":
        measured = json.loads(Path(sys.argv[2]).read_text())["launches"]
        print(json.dumps(apply_components(load_host(), measured, sys.argv[2]), indent=1))
    elif len(sys.argv) >= 3 and sys.argv[1] == "estimate":
        aa_dirs = [Path(x) for x in sys.argv[2:] if not x.startswith("real=")]
        real = next((Path(x[5:]) for x in sys.argv[2:] if x.startswith("real=")), None)
        print(json.dumps(estimate(aa_dirs, real), indent=1))
    else:
        print("usage: python tests/comparison_sim.py estimate AA_RUN_DIR... [real=REAL_RUN_DIR] | table | "
              "blocks-table RUNS | components LAUNCHES.json (prints host.json with the measured block components)",
              file=sys.stderr)
        sys.exit(2)
