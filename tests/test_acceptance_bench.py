"""`make bench-acceptance`'s summary (acceptance/bench.py) from finished runs' report directories: the
times, the harness share and every metric's call; bad input exits 2 with one line."""
import json

from stackproof.acceptance import bench
from stackproof.acceptance.bench import RUNS, EXPERIMENTS
from stackproof.stacks.model import load_stack


def fake_run(d, stacks, calls):
    d.mkdir(parents=True)
    (d / "summary.json").write_text(json.dumps({"stacks": stacks, "total_s": 512.3,
                                                "steps": [{"step": "x", "ok": True, "seconds": 1.0}]}))
    (d / "reframe-report.json").write_text(json.dumps({"runs": [], "stackproof": {"timing": {
        "wall_s": 300.0, "launch_s": 200.0, "launches": 100, "target_s": 2.0,
        "looks": [{"pairs": 5, "decided": 3, "metrics": 4, "wall_s": 300.0}]}}}))
    rows = [{"case": f"C{i}", "var": f"v{i}", "vs": {stacks[1]: {"verdict": c}}} for i, c in enumerate(calls)]
    (d / "report.json").write_text(json.dumps({"verdicts": rows}))


def test_summary_counts_calls_and_harness_share(tmp_path, capsys):
    fake_run(tmp_path / "aa", ["commodity", "commodity-copy"],
             ["no difference", "no difference", "inconclusive", "not measured"])
    assert bench.main(["-o", str(tmp_path), "--runs", "aa", "--summarize-only"]) == 0
    row = json.loads((tmp_path / "summary.json").read_text())[0]
    assert row["calls"] == {"no difference": 2, "inconclusive": 1, "not measured": 1}
    assert row["harness_x"] == 1.5 and row["total_s"] == 512.3 and row["failed_steps"] == []
    md = (tmp_path / "summary.md").read_text()
    assert ("| aa | commodity vs commodity-copy | 512.3 s | 300.0 s | 100 | 1.5x | 0 of 0 | - | 0 | "
            "0 | 0 | 2 | 0 | 0 | 1 | 0 | - |") in md


def test_a_run_without_results_is_reported_not_invented(tmp_path, capsys):
    assert bench.main(["-o", str(tmp_path), "--runs", "worse", "--summarize-only"]) == 1
    assert "worse: no result" in capsys.readouterr().err


def test_unknown_run_is_an_input_error(capsys):
    assert bench.main(["--runs", "vendor,bogus"]) == 2
    assert "unknown run(s) bogus" in capsys.readouterr().err


def test_the_experiment_stacks_differ_from_commodity_only_where_they_say(monkeypatch):
    monkeypatch.setenv("STACKPROOF_STACKS_DIR", str(EXPERIMENTS))
    base = load_stack("commodity")
    copy, slow = load_stack("commodity-copy"), load_stack("commodity-slow")
    assert set(RUNS) == {"vendor", "aa", "worse"}
    assert copy.env == base.env and copy.prefix == base.prefix and copy.benchmarks == base.benchmarks
    assert slow.prefix == base.prefix and slow.benchmarks == base.benchmarks
    assert {k: v for k, v in slow.env.items() if k not in base.env} == {"OMPI_MCA_btl": "self,tcp",
                                                                         "OPENBLAS_CORETYPE": "Prescott"}


def test_the_next_look_is_estimated_from_the_open_cases_only():
    from stackproof.acceptance.suite import job_seconds, look_estimate
    clock = [1000.0]

    def tc(name, rep, t, result="pass"):
        # submitted together (the async policy submits ahead), run one after another (singleton)
        clock[0] += t
        return {"display_name": f"{name} %repeat_index={rep}", "job_submit_time": 1000.0,
                "job_completion_time_unix": clock[0], "result": result}
    cases = [tc("OSU %b=lat", r, 3.0) for r in range(5)] + [tc("HPCC %size=ci", r, 2.0) for r in range(5)]
    doc = {"runs": [{"testcases": cases + [{"display_name": "GPU", "result": "skip"}]}]}
    assert [round(t, 6) for _, t in job_seconds(cases)] == [3.0] * 5 + [2.0] * 5   # not the queue wait
    # 25 s in jobs of a 30-s session: 5 s outside jobs; OSU still open: 3 s per pair
    assert look_estimate(doc, {"OSU %b=lat"}, 5, 30.0, 3) == 5.0 + 3 * 3.0
    assert look_estimate(doc, set(), 5, 30.0, 3) == 5.0



def test_the_spread_within_a_pair_of_an_a_a_run(tmp_path):
    """The spread table: per verdict metric, the median over the pairs of |log(B / A)| (pairs matched
    by repeat index, whatever order the launches were stored in), headline metrics first."""
    from stackproof.report import build, load_run
    tcs = []
    values = {"commodity": [1.0, 2.0, 1.0, 1.0], "commodity-copy": [1.1, 2.0, 0.95, 1.0]}
    for stack, vals in values.items():
        for i, v in reversed(list(enumerate(vals))):
            tcs.append({"name": f"HPCC %repeat_index={i}", "display_name": f"HPCC %repeat_index={i}",
                        "system": "testcluster", "partition": "cpu", "environ": stack, "stack": stack,
                        "result": "pass", "repeat_index": i, "perf_better": {"hpl": "higher", "ptrans": "higher"},
                        "perf_headline": ["hpl"],
                        "perfvalues": {"testcluster:cpu:hpl": [v, 0, None, None, "Gflop/s"],
                                       "testcluster:cpu:ptrans": [v * 3, 0, None, None, "GB/s"]}})
    doc = {"session_info": {"uuid": "s", "stack": "commodity+commodity-copy"}, "runs": [{"testcases": tcs}]}
    p = tmp_path / "r.json"
    p.write_text(json.dumps(doc))
    report = build(load_run(str(p)), tmp_path / "out", "t")
    spreads = bench.pair_spreads(doc, report)
    assert [(s["var"], s["headline"], s["pairs"]) for s in spreads] == [("hpl", True, 4), ("ptrans", False, 4)]
    # |log| of 1.1, 1, 0.95, 1: median of 0.0953, 0, 0.0513, 0 -> 2.56 %
    assert spreads[0]["spread_pct"] == 2.56 and spreads[0]["max_pct"] == 9.53


def test_a_call_that_is_no_verdict_value_is_refused(tmp_path, capsys):
    """report.json keeps the call and its reason apart (comparison.Verdict): a string with its reason
    glued on is not split back, it is refused in one line."""
    fake_run(tmp_path / "aa", ["commodity", "commodity-copy"], ["inconclusive: 96.9 % interval"])
    assert bench.main(["-o", str(tmp_path), "--runs", "aa", "--summarize-only"]) == 1
    assert "is no call" in capsys.readouterr().err


def test_headline_figures_and_calls_against_their_interval():
    report = {"verdicts": [
        {"case": "A", "var": "lat", "headline": True, "vs": {"v": {"verdict": "worse", "lo": 1.2, "hi": 1.5, "n": [8, 8]}}},
        {"case": "B", "var": "bw", "headline": True, "vs": {"v": {"verdict": "inconclusive", "lo": 0.4, "hi": 0.9,
                                                                    "n": [16, 12]}}},
        {"case": "C", "var": "x", "headline": False, "vs": {"v": {"verdict": "better", "lo": 0.8, "hi": 1.1, "n": [4, 4]}}},
        {"case": "D", "var": "y", "headline": True, "vs": {"v": {"verdict": "not measured"}}}]}
    got = bench.headline_figures(report)
    assert got == {"headline_decided": 1, "headline": 3, "fewest_launches": 8, "against_interval": ["B bw", "C x"]}


def test_a_run_named_again_runs_again_in_its_own_directory(tmp_path):
    for label in ("aa", "aa-2"):
        fake_run(tmp_path / label, ["commodity", "commodity-copy"], ["no difference"])
    assert bench.main(["-o", str(tmp_path), "--runs", "aa,aa", "--summarize-only"]) == 0
    assert [r["run"] for r in json.loads((tmp_path / "summary.json").read_text())] == ["aa", "aa-2"]
