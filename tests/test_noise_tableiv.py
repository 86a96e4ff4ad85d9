"""Table IV as a verdict (stackproof.noise.tableiv) on seeded synthetic traces and run records: a
daemon confined to the system core makes corespec better than baseline, identical traces get no
better / worse call, the table has the paper's shape, and the whole table's chance of any false call
stays under 5 % (a seeded A/A simulation)."""
import json
from dataclasses import replace

import numpy as np
import pytest

from stackproof import noise
from stackproof.acceptance.tableiv import configurations, schedule
from stackproof.errors import InputError
from stackproof.noise import tableiv
from stackproof.noise.synthetic import Source, simulate_core

QUANTUM_US, NSAMPLES = 50.0, 24000          # 1.2 s per synthetic run: 12 bursts of a 10 Hz daemon
DAEMON = Source(freq_hz=10, duration_us=2500)
HOST = Source(rate_hz=3, duration_range_us=(20, 800))  # the host's own noise: random, of every size


def _trace(tmp_path, name, per_core, seed):
    d = np.vstack([simulate_core(NSAMPLES, QUANTUM_US, srcs, jitter_us=1.0, seed=seed * 10 + i)
                   for i, srcs in enumerate(per_core)])
    cpus = [c for c, _ in per_core] if isinstance(per_core[0], tuple) else None
    path = noise.write(tmp_path / f"{name}.dat", d, quantum_target_ns=int(QUANTUM_US * 1000),
                       ranks=[{"rank": i, "cpu": (cpus or list(range(len(per_core))))[i]} for i in range(len(per_core))])
    return noise.load(path)


def _runs(tmp_path, configs, rounds=6):
    """configs: profile -> (cpus text, [sources per core]); phases of the daemon differ per run."""
    runs, seq = [], 0
    for r, prof, cond in schedule(list(configs), ["daemon"], rounds):
        cpus, cores = configs[prof]
        cores = [[Source(s.freq_hz, s.duration_us, phase_us=s.phase_us + 1000.0 * (seq % 97), rate_hz=s.rate_hz,
                         duration_range_us=s.duration_range_us) for s in srcs] for srcs in cores]
        t = _trace(tmp_path, f"{prof}-{r}", cores, seed=seq)
        runs.append(tableiv.reduce_trace(t, profile=prof, condition=cond, round=r, seq=seq, t_s=float(seq),
                                         cpus=cpus, daemon_cpus="0" if prof == "corespec" else ""))
        seq += 1
    return runs


def test_daemon_on_the_system_core_makes_corespec_better(tmp_path):
    """baseline: FWQ on CPUs 0-1, the daemon left to the OS lands on both application cores (here: on
    each of them); corespec: FWQ on CPU 1 only, the daemon on CPU 0 (not measured). Same host noise
    everywhere. Like cores: corespec's CPU 1 against baseline's CPU 1."""
    runs = _runs(tmp_path, {"baseline": ("0-1", [[DAEMON, HOST], [DAEMON, HOST]]),
                            "corespec": ("1", [[HOST]])})
    rows = tableiv.table(runs)
    base, cs = rows
    assert (base.profile, cs.profile) == ("baseline", "corespec")
    assert base.signature_runs == base.n == 6          # the daemon's 100 ms signature on the worst core
    assert cs.signature_runs == 0
    assert (cs.compared_cpus, cs.like_cores) == ("1", True) and base.compared_cpus == "0-1"
    c = cs.calls["std"]
    assert c.verdict == "better", c
    assert c.hi < 1 and c.ratio < 0.5
    assert "better than baseline on std" in tableiv.sentence(cs, rows)
    assert "against baseline on CPU 1" in tableiv.sentence(cs, rows)
    assert "bound to CPU 0" in tableiv.sentence(cs, rows)
    cells = dict(zip(tableiv.header(), tableiv.cells(cs)))
    assert cells["CPUs compared"] == "1" and float(cells["baseline Std ms on these CPUs"]) == \
        pytest.approx(cs.baseline_std_ms, rel=1e-3)


def test_a_daemon_that_stays_off_the_profiles_core_is_no_difference_there(tmp_path):
    """Like cores: when baseline's daemon never reaches CPU 1, corespec on CPU 1 is not called better than
    baseline on CPU 1 (the old comparison, baseline's most affected core of both, called it better)."""
    runs = _runs(tmp_path, {"baseline": ("0-1", [[DAEMON, HOST], [HOST]]),
                            "corespec": ("1", [[HOST]])})
    rows = tableiv.table(runs)
    assert rows[1].calls["std"].verdict not in ("better", "worse"), rows[1].calls["std"]
    unlike = tableiv.table([replace(r, per_cpu={}) for r in runs])          # no per-core figures
    assert unlike[1].calls["std"].verdict == "better" and not unlike[1].like_cores
    assert "(baseline: its most affected core)" in tableiv.cells(unlike[1])[2]


def test_identical_traces_get_no_better_or_worse_call(tmp_path):
    runs = _runs(tmp_path, {"baseline": ("1", [[DAEMON, HOST]])}, rounds=6)
    twin = [tableiv.Run(**{**r.__dict__, "profile": "corespec"}) for r in runs]
    rows = tableiv.table(runs + twin)
    for m in tableiv.METRICS:
        c = rows[1].calls[m]
        assert c.verdict not in ("better", "worse"), (m, c)
        assert c.ratio == pytest.approx(1.0)
        assert c.verdict == "no difference"


def _record(profile, condition, rnd, std, mx=3000.0, nf=0.02, cpu=1, per_cpu=None):
    return tableiv.Run(profile=profile, condition=condition, round=rnd, seq=rnd, t_s=0.0, cpus="1", rank=0, cpu=cpu,
                       samples=1000, min_us=7.0, mean_us=8.0, max_us=mx, std_us=std, noise_fraction=nf,
                       period_ms=100.0 if condition != "none" else None, per_cpu=per_cpu or {})


def test_the_table_has_the_papers_shape():
    runs = [_record(p, c, r, 10.0 + r + i) for r in range(3) for i, p in enumerate(tableiv.PROFILE_ORDER)
            for c in tableiv.CONDITIONS]
    runs += [_record("hunt-clean", "daemon", r, 9.0 + r) for r in range(3)]
    rows = tableiv.table(runs)
    assert [(r.condition, r.profile) for r in rows] == \
        [("daemon", p) for p in (*tableiv.PROFILE_ORDER, "hunt-clean")] + \
        [(c, p) for c in ("none", "injected") for p in tableiv.PROFILE_ORDER]
    assert tableiv.header()[:9] == ["noise", "configuration", "CPUs compared", "n", "Min ms", "Mean ms", "Max ms",
                                    "Std ms", "noise %"]
    assert tableiv.header()[-3:] == ["baseline Std ms on these CPUs", "Std / baseline: median of run ratios [interval]",
                                     "call"]
    md = tableiv.markdown(rows).splitlines()
    assert len(md) == 2 + len(rows)
    assert all(line.count("|") == len(tableiv.header()) + 1 for line in md)
    base = rows[0]
    assert tableiv.cells(base)[1:9] == ["baseline", "1", "3", "0.0070", "0.0080", "3.000", "0.0110", "2.00"]
    # baseline's own interval: its median std over its 3 runs, [min, max] (75 % for 3 runs)
    assert tableiv.cells(base)[9:] == ["0.0110 [0.0100, 0.0120]", "1 [0.91, 1.09] (75 % interval of its median)", "-"]
    assert base.reference == pytest.approx((0.010, 0.012, 0.75))
    injected = [r for r in rows if r.condition == "injected"]
    assert all("no profile can move it" in tableiv.cells(r)[0] for r in injected)
    assert all("no profile can move it" in s for s in tableiv.sentences(injected))
    assert len(tableiv.sentences(rows)) == len(rows)
    # every non-baseline row has a call on each metric; baseline rows none
    for r in rows:
        assert set(r.calls) == (set() if r.profile == "baseline" else set(tableiv.METRICS))
    doc = json.loads(json.dumps(tableiv.rows_as_dicts(rows), default=str))
    assert doc[3]["calls"]["std"]["verdict"] in ("better", "worse", "no difference", "inconclusive", "no verdict")


def test_a_whole_table_of_identical_profiles_rarely_gets_a_call():
    """A/A over the whole table (5 profiles x 3 conditions x 3 metrics, 6 rounds, values from one
    distribution): the share of tables with any better / worse call stays within 5 % (seeded)."""
    rng = np.random.default_rng(35)
    trials, false = 300, 0
    for _ in range(trials):
        runs = [_record(p, c, r, float(rng.lognormal(3, 0.3)), float(rng.lognormal(8, 0.4)),
                        float(rng.lognormal(-4, 0.3)))
                for r in range(6) for p in tableiv.PROFILE_ORDER for c in tableiv.CONDITIONS]
        rows = tableiv.table(runs)
        false += any(c.verdict in ("better", "worse") for r in rows for c in r.calls.values())
    # binomial: at alpha = 5 % the count exceeds 25 of 300 with probability < 3 %
    assert false <= 25, false


CORES = {"baseline": "0-1", "freecore-first": "1", "freecore-last": "0", "corespec": "1", "clean": "1"}


def _core_runs(rng, rounds=8):
    """A/A with identical noise on every core: each run a host-wide level (drifting over the matrix) and
    every core's std, max and noise fraction drawn alike; a run's own figures are its most affected
    core's among its CPUs (as reduce_trace does)."""
    from stackproof.acceptance.tableiv import schedule
    runs = []
    for seq, (r, p, c) in enumerate(schedule(list(tableiv.PROFILE_ORDER), list(tableiv.CONDITIONS), rounds)):
        level = rng.normal(0, 0.2) + 0.3 * seq / (rounds * 12)
        per = {str(k): {"std_us": float(np.exp(3 + level + rng.normal(0, 0.3))),
                        "max_us": float(np.exp(8 + level + rng.normal(0, 0.4))),
                        "noise_fraction": float(np.exp(-4 + level + rng.normal(0, 0.3)))} for k in (0, 1)}
        mine = {k: v for k, v in per.items() if int(k) in tableiv.parse_list(CORES[p])}
        worst = max(mine, key=lambda k: mine[k]["std_us"])
        runs.append(tableiv.Run(profile=p, condition=c, round=r, seq=seq, t_s=float(seq), cpus=CORES[p], rank=0,
                                cpu=int(worst), samples=1000, min_us=7.0, mean_us=8.0,
                                max_us=mine[worst]["max_us"], std_us=mine[worst]["std_us"],
                                noise_fraction=mine[worst]["noise_fraction"], per_cpu=per))
    return runs


def test_identical_noise_on_every_core_gets_calls_at_no_more_than_alpha():
    """Table IV on like cores, seeded: the same noise on every core, every profile on its own CPUs
    (baseline on both), 8 rounds: tables with any better / worse call at most 5 % (the table's alpha).
    Comparing baseline's most affected of two cores with one core's instead (no per-core figures) calls
    far more, almost always 'better' (the issue's 15-23 %)."""
    rng = np.random.default_rng(43)
    trials, like, unlike = 200, 0, 0
    for _ in range(trials):
        runs = _core_runs(rng)
        like += any(c.verdict in ("better", "worse") for r in tableiv.table(runs) for c in r.calls.values())
        unlike += any(c.verdict in ("better", "worse") for r in tableiv.table([replace(x, per_cpu={}) for x in runs])
                      for c in r.calls.values())
    assert like <= 0.05 * trials, like
    assert unlike >= 2 * max(like, 5), (like, unlike)


def test_the_in_job_injector_runs_under_baseline_and_corespec_only():
    configs = configurations(list(tableiv.PROFILE_ORDER), list(tableiv.CONDITIONS))
    assert [p for p, c in configs if c == "injected"] == ["baseline", "corespec"]
    assert len(configs) == 2 * len(tableiv.PROFILE_ORDER) + 2


def test_the_schedule_interleaves_and_reverses_every_other_round():
    s = schedule(["baseline", "corespec"], ["daemon", "none"], 4)
    assert len(s) == 16
    for r in range(4):
        mine = [(p, c) for rr, p, c in s if rr == r]
        assert sorted(mine) == sorted([(p, c) for p in ("baseline", "corespec") for c in ("daemon", "none")])
    assert [x[1:] for x in s[:4]] == [x[1:] for x in s[4:8]][::-1]
    # on average over two rounds every configuration sits at the same position
    pos = {}
    for i, (r, p, c) in enumerate(s[:8]):
        pos.setdefault((p, c), []).append(i % 4)
    assert len({sum(v) for v in pos.values()}) == 1


def test_run_records_round_trip_and_bad_ones_are_refused():
    runs = [_record("baseline", "none", 0, 5.0, per_cpu={"0": {"std_us": 5.0, "max_us": 9.0, "noise_fraction": 0.1},
                                                         "1": {"std_us": 4.0, "max_us": 8.0, "noise_fraction": 0.1}}),
            _record("corespec", "none", 0, 4.0)]
    doc = json.loads(json.dumps(tableiv.runs_to_json(runs, samples=10)))
    assert tableiv.runs_from_json(doc) == runs
    assert runs[0].on({1}) == {"cpu": 1, "std": 4.0, "max": 8.0, "noise_fraction": 0.1}
    assert runs[0].on({0, 1})["cpu"] == 0 and runs[0].on({2}) is None and runs[1].on({1}) is None
    for bad in ({"runs": 3}, {"runs": [{"profile": "x"}]}, {"runs": [{**doc["runs"][0], "std_us": float("nan")}]},
                {"runs": [{**doc["runs"][0], "evil": 1}]}, {"runs": [{**doc["runs"][0], "round": "0"}]},
                {"runs": [{**doc["runs"][0], "std_us": -1}]}, {"runs": [{**doc["runs"][0], "profile": "<b>x"}]},
                {"runs": [{**doc["runs"][0], "condition": "other"}]}, {"runs": [{**doc["runs"][0], "cpus": "1;rm"}]},
                {"runs": [{**doc["runs"][0], "trace": "../../etc/passwd"}]},
                {"runs": [{**doc["runs"][0], "per_cpu": {"0": {"std_us": -1, "max_us": 1, "noise_fraction": 0}}}]},
                {"runs": [{**doc["runs"][0], "per_cpu": {"x": {"std_us": 1, "max_us": 1, "noise_fraction": 0}}}]},
                {"runs": [{**doc["runs"][0], "per_cpu": []}]}):
        with pytest.raises(InputError):
            tableiv.runs_from_json(json.loads(json.dumps(bad)))


def test_a_roaming_daemon_shows_on_the_cores_together_and_corespec_is_better(tmp_path):
    """The cluster's noise daemon roams (fwq-noise --roam): under baseline its bursts alternate
    between CPU 0 and CPU 1, so each core sees every other burst (a 200 ms train) and only the cores
    taken together show the 100 ms signature; on like cores corespec's CPU 1 (no bursts) is still
    better than baseline's CPU 1 (half of them)."""
    half = Source(freq_hz=5, duration_us=2500)
    other_half = Source(freq_hz=5, duration_us=2500, phase_us=100_000)
    runs = _runs(tmp_path, {"baseline": ("0-1", [[half, HOST], [other_half, HOST]]),
                            "corespec": ("1", [[HOST]])})
    for r in runs:
        if r.profile == "baseline":
            assert r.node_period_ms == pytest.approx(100, rel=0.02), r
            assert r.period_ms is None or abs(r.period_ms - 100) > 10, r   # no single core shows 100 ms
    base, cs = tableiv.table(runs)
    assert base.signature_runs == base.n == 6 and cs.signature_runs == 0
    assert cs.calls["std"].verdict == "better"
    assert "on these cores in 6 of 6 runs" in tableiv.sentence(base, [base, cs])
